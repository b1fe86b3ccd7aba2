"""What every decflow flow run does at its start and its end.

Start (`decflow_run`): once a flow knows its decflow run id, the flow run's name ends with
it and the run is tagged `decflow` and `run:<id>`, so it is found by its id in the UI; the
body runs followed (`crash_by_follower.followed_run`), so a killed run ends Crashed saying how to
resume it. A body that cannot run (`DecflowError`, exit 2) tags the run `verdict:error`.

End (`finish`): the verdict of the run's report(s), the same everywhere. A FAIL ends the
flow run Failed — a verdict, not a crash, so no traceback — PASS and WARN end Completed
(`--fail-on-warn` only sets the command's exit code; a flow passing `fail_on_warn` to
`finish`, the nightly, ends Failed on WARN too). The state message's first line is the
headline (`FAIL 2/18: max_ece 0.175 > 0.15; …`): the worst verdict's, the last of equals
(a nightly's diff before its run); a flow judging several reports then names each on a
line of its own, and the caveats of the reports follow (`NOT EXERCISED …`). The run is
tagged `verdict:<status>` — one verdict tag and one run tag, set, not added, so a retried
flow run never carries two — and the headline is logged, at WARNING unless PASS. A Python
caller of a Failed flow gets `GateFailed`, which carries the flow's result.
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

from decflow.errors import DecflowError
from decflow.flows.crash_by_follower import followed_run
from decflow.tasks.logs import ReportedFailure
from decflow.tasks.report import RUN_LABEL

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
    report path, caveats); `subject` names the report when a flow run judges several."""

    outcome: Mapping[str, Any]
    subject: str = ""

    @property
    def status(self) -> str:
        return str(self.outcome["status"])

    @property
    def headline(self) -> str:
        return str(self.outcome["headline"])

    @property
    def caveats(self) -> list[str]:
        return [str(c) for c in self.outcome.get("caveats") or []]

    def line(self) -> str:
        return f"{self.subject}: {self.headline}" if self.subject else self.headline


def _update_flow_run(*, name: str | None = None, **tagged: str | None) -> None:
    """Rename the current flow run and set its `decflow` tag and the tags given as
    `<prefix>=<value>` (`run="…"`: the tag `run:…`; None: no tag of that prefix),
    replacing any earlier tag of that prefix (nothing outside a flow run)."""
    run_id = flow_run.id
    if not run_id:
        return
    prefixes = tuple(f"{prefix}:" for prefix in tagged)
    with get_client(sync_client=True) as client:
        current = client.read_flow_run(UUID(run_id)).tags
        kept = [t for t in current if not t.startswith(prefixes) and t != DECFLOW_TAG]
        client.update_flow_run(UUID(run_id), name=name, tags=[
            *kept, DECFLOW_TAG, *(f"{prefix}:{value}" for prefix, value in tagged.items()
                                  if value is not None)])
        if "run" in tagged and tagged["run"] is not None:
            client.update_flow_run_labels(UUID(run_id), {RUN_LABEL: tagged["run"]})


def retried_run_id() -> str | None:
    """The decflow run an earlier attempt of the current flow run started (a flow run
    retried from the UI or the API keeps its labels), None on its first attempt."""
    run_id = flow_run.id
    if not run_id:
        return None
    with get_client(sync_client=True) as client:
        found = client.read_flow_run(UUID(run_id)).labels.get(RUN_LABEL)
    return found if isinstance(found, str) else None


@contextmanager
def decflow_run(run_id: str | None, name: str, crash: str) -> Iterator[None]:
    """The body of a flow run for decflow run `run_id`: named `<name>-<run_id>`, tagged
    (a retried flow run's earlier verdict tag is dropped until it has a new one), labelled
    with the run id (`retried_run_id`), followed with the crash message `crash` (see the
    module docstring). A flow run that makes no decflow run (a replay) is only tagged and
    followed."""
    if run_id is None:
        _update_flow_run(verdict=None)
    else:
        _update_flow_run(name=f"{name}-{run_id}", run=run_id, verdict=None)
    try:
        with followed_run(crash):
            yield
    except DecflowError:
        _update_flow_run(verdict="error")
        raise


def overall(verdicts: tuple[Verdict, ...]) -> str:
    """The worst status of the verdicts: fail, else warn, else pass."""
    return max((v.status for v in verdicts), key=lambda s: SEVERITY.get(s, 0))


def state_message(verdicts: tuple[Verdict, ...]) -> str:
    """The headline of the worst verdict first, then each verdict when there are several,
    then the reports' caveats (see the module docstring)."""
    worst = overall(verdicts)
    lead = [v for v in verdicts if v.status == worst][-1]
    lines = [lead.headline]
    if len(verdicts) > 1:
        lines.extend(v.line() for v in verdicts)
    lines.extend(c for v in verdicts for c in v.caveats)
    return "\n".join(dict.fromkeys(lines))


def final_state(result: Any, *verdicts: Verdict, fail_on_warn: bool = False) -> State[Any]:
    """Failed when a verdict FAILs (or WARNs, with `fail_on_warn`), else Completed, with
    the state message of `state_message`; `result` is the flow's return value either way."""
    message = state_message(verdicts)
    status = overall(verdicts)
    if status == "fail" or (fail_on_warn and status == "warn"):
        return Failed(message=message, data=GateFailed(message, result))
    return Completed(message=message, data=result)


def finish(result: Any, *verdicts: Verdict, fail_on_warn: bool = False) -> State[Any]:
    """Log and tag the verdicts, and return the final state (see the module docstring)."""
    logger = get_run_logger()
    for verdict in verdicts:
        level = logging.INFO if verdict.status == "pass" else logging.WARNING
        logger.log(level, "%s", verdict.line())
    _update_flow_run(verdict=overall(verdicts))
    return final_state(result, *verdicts, fail_on_warn=fail_on_warn)


def task_value(state: State[Any]) -> Any:
    """What a task returned, also when it ended Failed as a verdict (`tasks.common.judged`:
    the failing stage is red, the run goes on); a task that raised raises here."""
    value = state.result(raise_on_failure=False)
    if isinstance(value, BaseException):
        raise value
    return value


def flow_result(state: State[Any]) -> Any:
    """What a flow run returned, also when its report FAILed; any other failure raises."""
    try:
        return state.result()
    except GateFailed as failed:
        return failed.result
