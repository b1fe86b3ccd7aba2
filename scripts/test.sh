#!/usr/bin/env bash
# Install test dependencies into .venv and run the whole test suite (unit, integration with
# real HTTP servers and the local LLM, Prefect orchestration). Servers are started and
# stopped by the tests themselves on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
.venv/bin/ruff check .
.venv/bin/lint-imports      # the layers of pyproject.toml [tool.importlinter]
.venv/bin/mypy              # all of src/ at the level of pyproject.toml [tool.mypy]
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
