#!/usr/bin/env bash
# Refresh requirements/lock.txt: every package (and version) the README's install commands
# put in .venv, resolved from pyproject.toml's ranges with uv (installed in a throwaway venv).
# scripts/install.sh installs through this file as a pip constraints file, so a fresh
# install gets exactly these versions; pyproject.toml keeps its ranges loose for library
# users. Run it, run `bash scripts/test.sh`, and commit the new lock with the tests green.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOL="$(mktemp -d)"
trap 'rm -rf "$TOOL"' EXIT
python3 -m venv "$TOOL/venv"
"$TOOL/venv/bin/pip" install --quiet uv
"$TOOL/venv/bin/uv" pip compile pyproject.toml requirements/llm-server.in \
  --all-extras --python-version 3.11 --universal --no-header --quiet \
  --output-file requirements/lock.txt "$@"
echo "requirements/lock.txt: $(grep -c '==' requirements/lock.txt) pinned packages"
