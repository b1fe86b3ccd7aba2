"""Serve decflow's scheduled deployments from one process: `python deployments/serve.py`
(the same as `decflow serve`). Schedules and parameters live in `prefect.yaml` beside it."""

from pathlib import Path

from decflow.flows.deployments import serve_deployments

if __name__ == "__main__":
    serve_deployments(Path(__file__).with_name("prefect.yaml"))
