#!/usr/bin/env bash
# Run the test suite against the lowest versions pyproject.toml admits for decflow's direct
# dependencies (uv's lowest-direct resolution), in a throwaway venv (.venv-lowest), so the
# declared lower bounds stay true. The real-LLM tests are left out (their server is pinned).
# Extra pytest arguments are passed on.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-lowest
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet uv
"$VENV/bin/uv" pip compile pyproject.toml --extra test --extra dask --extra s3 \
  --resolution lowest-direct --python-version 3.11 --no-header --quiet \
  --output-file "$VENV/lowest.txt"
"$VENV/bin/pip" install --quiet -r "$VENV/lowest.txt"
"$VENV/bin/pip" install --quiet --no-deps -e .
grep -E '^(prefect|polars|pyarrow|pydantic|pyyaml|httpx|numpy|typer|rich|fsspec|dask|prefect-dask|s3fs)==' \
  "$VENV/lowest.txt" | tr '\n' ' '
echo
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not llm" "$@"
