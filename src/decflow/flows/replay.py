"""The `replay` flow: re-send a stored run's property failures and reduced examples; the
flow run fails when any of them reproduces (the CLI's exit 1)."""

from __future__ import annotations

import shlex
from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from decflow.flows.common import Verdict, decflow_run, finish
from decflow.flows.contract_run import decision_name
from decflow.flows.crash_by_follower import crash_message
from decflow.redaction import redact
from decflow.tasks.replay import replay_task
from decflow.tasks.report import artifact_key
from decflow.views.markdown import md
from decflow.views.replay_text import render_replay


def _replay_run_name() -> str:
    return f"replay-{flow_run.parameters['target']}"


@flow(name="replay", flow_run_name=_replay_run_name, persist_result=False)
def replay(
    target: str,
    store: str = ".decflow",
    ids: list[str] | None = None,
    contract: str | None = None,
    backend: str | None = None,
    max_concurrency: int | None = None,
) -> Any:
    """`target` is a fuzz / test --all report file or a run id in the store; a reproduced
    failure ends the flow run Failed (`GateFailed` for a Python caller)."""
    again = f"run it again with `decflow replay {shlex.quote(target)} --store {shlex.quote(store)}`"
    with decflow_run(None, _replay_run_name(), crash_message(f"replay of {target}", again)):
        result: dict[str, Any] = redact(replay_task(target, store, list(ids or []), contract,
                                                    backend, max_concurrency))
        create_markdown_artifact(
            f"**{md(result['headline'])}**\n\n# Replay of {md(target)}\n\n"
            f"```\n{render_replay(result)}```\n",
            key=artifact_key(decision_name(result["contract_path"]), str(result["backend"]),
                             "replay"),
            description=result["headline"],
        )
        return finish(result, Verdict(result))
