"""Finding and verifying a report: a report file, or a run id in the store.

`decflow report`, `diff`, `replay`, the SDK and the Prefect tasks all load reports through
`load_verified`, so a tampered report stops every one of them with exit 2.
"""

from __future__ import annotations

import os
from typing import Any

from decflow.errors import DecflowError
from decflow.report.verify import load_report_file, verify_run_report
from decflow.report.versions import REPORT_VERSIONS, RUN_REPORT_VERSIONS
from decflow.store.runs import has_run, report_path
from decflow.store.store import Store


def resolve_report(target: str, store: Store) -> tuple[dict[str, Any], str, str | None]:
    """(report, source name, run id when the run's artifacts are in the store)."""
    if os.path.exists(target):
        report = load_report_file(target)
        run = report.get("run")
        run_id = run.get("id") if isinstance(run, dict) else None  # checked when verified
        if run_id and has_run(store, run_id):
            return report, target, run_id
        return report, target, None
    if store.exists(report_path(target)):
        return store.read_json(report_path(target)), f"run {target}", target
    raise DecflowError(
        f"'{target}' is neither a report file nor a run in the store {store.url} "
        "(see `decflow runs`)"
    )


def load_verified(target: str, store: Store) -> tuple[dict[str, Any], str, str | None]:
    """`resolve_report`, then re-verify a run report; a probe report is re-derived from its
    stored call table by `decflow.probe.load`. Anything else is exit 2."""
    report, source, run_id = resolve_report(target, store)
    kind = report.get("kind", "run")
    version = report.get("report_version")
    if version in RUN_REPORT_VERSIONS and kind == "run":
        verify_run_report(report, source)
    elif not (version in REPORT_VERSIONS and kind == "probe"):
        raise DecflowError(f"{source}: not a decflow or DecGuard 0.1 run report")
    return report, source, run_id
