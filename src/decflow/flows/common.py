"""What every decflow flow run does at its start and its end.

Start (`decflow_run`): once a flow knows its decflow run id, the flow run's name ends with
it and the run is tagged `decflow` and `run:<id>`, so it is found by its id in the UI; the
body runs followed (`crashes.followed_run`), so a killed run ends Crashed saying how to
resume it.

End (`finish`): the verdict of the run's report(s), the same everywhere. A FAIL ends the
flow run Failed — a verdict, not a crash, so one line and no traceback — whose state
message is the report's headline, naming the failing gates (`FAIL 2/18: max_ece 0.175 >
0.15; …`). PASS and WARN end Completed with the headline as their message (`--fail-on-warn`
only sets the command's exit code). The run is tagged `verdict:<status>`, and the headline
is logged, at WARNING unless the verdict is PASS. A Python caller of a Failed flow gets
`GateFailed`, which carries the flow's result.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from uuid import UUID

from prefect import get_client, get_run_logger
from prefect.client.schemas.objects import State
from prefect.runtime import flow_run
from prefect.states import Completed, Failed
from prefect.utilities.annotations import quote

from decflow.flows.crashes import followed_run
from decflow.tasks.logs import ReportedFailure

DECFLOW_TAG = "decflow"
T = TypeVar("T")
SEVERITY = {"pass": 0, "warn": 1, "fail": 2}



def unwalked(value: T) -> T:
    """`value` as a task argument Prefect does not walk (`quote`): it visits every nested
    value of every task input looking for futures, ≈0.1 s a task for a manifest carrying
    provenance. The task receives `value` itself, hence the type."""
    return cast(T, quote(value))

class GateFailed(ReportedFailure):
    """The report of a flow run is FAIL (its artifacts are published): the run shows as
    Failed in the Prefect UI, so alerts can fire. `result` is what the flow returns."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class Verdict:
    """A report's verdict: `outcome` as the tasks return it (status, exit code, headline,
    report path); `subject` names the report when a flow run judges several."""

    outcome: Mapping[str, Any]
    subject: str = ""

    @property
    def status(self) -> str:
        return str(self.outcome["status"])

    def line(self) -> str:
        headline = str(self.outcome["headline"])
        return f"{self.subject}: {headline}" if self.subject else headline


def _update_flow_run(*, name: str | None = None, tags: tuple[str, ...] = ()) -> None:
    """Rename the current flow run and add tags (nothing outside a flow run)."""
    run_id = flow_run.id
    if not run_id:
        return
    with get_client(sync_client=True) as client:
        current = client.read_flow_run(UUID(run_id)).tags
        client.update_flow_run(UUID(run_id), name=name,
                               tags=[*current, *(t for t in tags if t not in current)])


@contextmanager
def decflow_run(run_id: str | None, name: str, crash: str) -> Iterator[None]:
    """The body of a flow run for decflow run `run_id`: named `<name>-<run_id>`, tagged,
    followed with the crash message `crash` (see the module docstring). A flow run that
    makes no decflow run (a replay) is only tagged and followed."""
    if run_id is None:
        _update_flow_run(tags=(DECFLOW_TAG,))
    else:
        _update_flow_run(name=f"{name}-{run_id}", tags=(DECFLOW_TAG, f"run:{run_id}"))
    with followed_run(crash):
        yield


def overall(verdicts: tuple[Verdict, ...]) -> str:
    """The worst status of the verdicts: fail, else warn, else pass."""
    return max((v.status for v in verdicts), key=lambda s: SEVERITY.get(s, 0))


def final_state(result: Any, *verdicts: Verdict) -> State[Any]:
    """Failed naming the failing reports' gates when one FAILs, else Completed naming
    every report's verdict; `result` is the flow's return value either way."""
    if overall(verdicts) == "fail":
        message = "; ".join(v.line() for v in verdicts if v.status == "fail")
        return Failed(message=message, data=GateFailed(message, result))
    return Completed(message="; ".join(v.line() for v in verdicts), data=result)


def finish(result: Any, *verdicts: Verdict) -> State[Any]:
    """Log and tag the verdicts, and return the final state (see the module docstring)."""
    logger = get_run_logger()
    for verdict in verdicts:
        level = logging.INFO if verdict.status == "pass" else logging.WARNING
        logger.log(level, "%s", verdict.line())
    _update_flow_run(tags=(f"verdict:{overall(verdicts)}",))
    return final_state(result, *verdicts)


def flow_result(state: State[Any]) -> Any:
    """What a flow run returned, also when its report FAILed; any other failure raises."""
    try:
        return state.result()
    except GateFailed as failed:
        return failed.result
