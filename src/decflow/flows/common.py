"""Helpers shared by the flows."""

from __future__ import annotations

from typing import Any


class GateFailed(Exception):
    """Raised at the end of a scheduled flow run whose report is FAIL (after its artifacts
    are published), so the run shows as Failed in the Prefect UI and alerts can fire."""


def fail_on_status(report: dict[str, Any], what: str) -> None:
    if report.get("exit_code") == 1:
        raise GateFailed(f"{what}: {report['status'].upper()} (exit 1); see its artifacts")
