"""`decflow deploy` and `decflow serve`: the scheduled Prefect deployments of
`deployments/prefect.yaml` (nightly regression, drift check); `decflow prefect-setup`: the
server-side automation that marks killed flow runs Crashed (deploy and serve create it too).

Prefect is imported only inside the command bodies (and `deploy` runs Prefect's own CLI
in a subprocess, `python -P -s -m prefect`: never a module planted in the project
directory), so loading the CLI stays fast.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import typer

from decflow import startup
from decflow.errors import DecflowError
from decflow.tasks.heartbeat import DEFAULT_WINDOW_S, HEARTBEAT_S, MIN_WINDOW_S
from decflow.workers.command import python_module

DEFAULT_FILE = "deployments/prefect.yaml"
FILE_OPTION = typer.Option(DEFAULT_FILE, "--file", help="The deployments file.")


def deployments_file(option: str) -> Path:
    path = Path(option)
    if not path.is_file():
        raise DecflowError(
            f"{option}: no deployments file (run from the project root or pass --file)"
        )
    return path.resolve()


def require_api_url(command: str) -> None:
    if not os.environ.get("PREFECT_API_URL"):
        raise DecflowError(
            f"decflow {command} needs a Prefect server: start one with `prefect server start` "
            "and set PREFECT_API_URL (e.g. http://127.0.0.1:4200/api)"
        )


def prefect_cli(*args: str, cwd: Path, env: dict[str, str] | None = None,
                check: bool = True) -> int:
    command = python_module("prefect", *args)
    code = subprocess.run(command, cwd=cwd, env=env, check=False).returncode
    if check and code != 0:
        raise DecflowError(f"`prefect {' '.join(args)}` failed with exit code {code}")
    return code


def crash_detection(window_s: float | None = None, api_url: str | None = None) -> str:
    """Create or update the crash automation; returns a line saying what was done."""
    from decflow.flows.crash_by_heartbeat import describe, ensure_crash_automation

    return describe(ensure_crash_automation(window_s, api_url))


def deploy(file: Path, pool: str) -> None:
    """Create the process work pool if needed, register every deployment of `file` and
    the crash automation."""
    from decflow.flows.deployments import checked_definitions

    checked_definitions(file)  # before anything is registered
    typer.echo(crash_detection(), err=True)
    project = file.parent.parent
    exists = subprocess.run(python_module("prefect", "work-pool", "inspect", pool),
                            cwd=project, check=False, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode == 0
    if not exists:
        prefect_cli("work-pool", "create", pool, "--type", "process", cwd=project)
    env = {**os.environ, "DECFLOW_PROJECT_DIR": str(project)}
    prefect_cli("--no-prompt", "deploy", "--all", "--prefect-file", str(file), cwd=project,
                env=env)


def register(app: typer.Typer) -> None:
    @app.command("deploy", short_help="Register the scheduled Prefect deployments.")
    def deploy_command(
        file: str = FILE_OPTION,
        pool: str = typer.Option("decflow-process", "--pool", help="Process work pool."),
    ) -> None:
        """Register the scheduled deployments with the Prefect server (PREFECT_API_URL);
        run them with `prefect worker start --pool decflow-process`."""
        require_api_url("deploy")
        path = deployments_file(file)
        deploy(path, pool)
        typer.echo(f"deployments of {path} registered; start a worker with "
                   f"`prefect worker start --pool {pool}`")

    @app.command("prefect-setup", short_help="Make killed flow runs end Crashed (once).")
    def prefect_setup_command(
        crash_after: float | None = typer.Option(
            None, "--crash-after", min=MIN_WINDOW_S,
            help=f"Seconds without a heartbeat before a run is marked Crashed, at least "
            f"{MIN_WINDOW_S} (runs heartbeat every {HEARTBEAT_S} s; default: keep the current "
            f"window, {DEFAULT_WINDOW_S} on creation)."),
        api_url: str | None = typer.Option(
            None, "--api-url",
            help="The URL at which the Prefect server reaches its own API (it closes "
            "crashed runs through it; default: keep the URL set before, PREFECT_API_URL on "
            "creation)."),
    ) -> None:
        """Create (or update) the Prefect server's automation that marks a decflow flow run
        Crashed when its heartbeats stop (killed process, lost machine). Run it once per
        server; `decflow deploy` and `decflow serve` do it too."""
        require_api_url("prefect-setup")
        if api_url is not None and not api_url.startswith(("http://", "https://")):
            raise DecflowError(f"--api-url: expected an http(s) URL such as "
                               f"http://127.0.0.1:4200/api, got {api_url!r}")
        typer.echo(crash_detection(crash_after, api_url))

    @app.command("serve", short_help="Serve the scheduled Prefect deployments here.")
    def serve_command(file: str = FILE_OPTION) -> None:
        """Serve the scheduled deployments from this process (until stopped)."""
        require_api_url("serve")
        path = deployments_file(file)
        from decflow.flows.deployments import serve_deployments

        startup.end()  # serves until stopped: the collector back to its defaults
        serve_deployments(path)
