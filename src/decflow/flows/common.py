"""Helpers shared by the flows: how a flow run whose report is FAIL ends.

A FAIL is a verdict, not a crash: the flow publishes its artifacts, then returns a Failed
state whose message is one line ("run X: FAIL (exit 1); see its artifacts"). Prefect shows
that line as the run's final state, no traceback; a Python caller of the flow gets
`GateFailed` raised, as before.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from prefect.client.schemas.objects import State
from prefect.states import Failed
from prefect.utilities.annotations import quote

from decflow.tasks.logs import ReportedFailure

T = TypeVar("T")


def unwalked(value: T) -> T:
    """`value` as a task argument Prefect does not walk (`quote`): it visits every nested
    value of every task input looking for futures, ≈0.1 s a task for a manifest carrying
    provenance. The task receives `value` itself, hence the type."""
    return cast(T, quote(value))


class GateFailed(ReportedFailure):
    """The report of a scheduled flow run is FAIL (its artifacts are published): the run
    shows as Failed in the Prefect UI, so alerts can fire."""


def failure(report: dict[str, Any], what: str) -> str | None:
    """`<what>: FAIL (exit 1); see its artifacts` when the report failed, else None."""
    if report.get("exit_code") == 1:
        return f"{what}: {report['status'].upper()} (exit 1); see its artifacts"
    return None


def finish(result: dict[str, Any], *failures: str | None) -> dict[str, Any] | State[Any]:
    """The flow's return value: `result`, or a Failed state naming every failure."""
    found = [f for f in failures if f]
    if not found:
        return result
    message = "; ".join(found)
    return Failed(message=message, data=GateFailed(message))
