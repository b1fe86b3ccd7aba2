"""Finding and verifying a report: a report file, or a run id in the store.

`decflow report`, `diff`, `replay`, the SDK and the Prefect tasks all load reports through
`load_verified`, so a tampered report stops every one of them with exit 2: a stored
report must match the sha256 its run recorded (`decflow.store.run_files`), and its
verdict the one the run recorded and its summary stage stored.
"""

from __future__ import annotations

import os
from typing import Any

from decflow.errors import DecflowError, ReportError
from decflow.report.check_report import verify_check_report
from decflow.report.model import REJUDGE, REWRITE, Report
from decflow.report.monitor_report import MonitorReport
from decflow.report.verify import REPORT_MAX_DEPTH, load_report_file, verify_run_report
from decflow.report.versions import REPORT_VERSIONS, RUN_REPORT_VERSIONS
from decflow.store.runs import (
    FAILED,
    FINISHED,
    INTERRUPTED,
    REPORT,
    RUNNING,
    has_run,
    read_run_file,
    read_run_record,
    report_path,
    resume_command,
    run_state,
)
from decflow.store.store import Manifest, Store
from decflow.strictjson import JsonProblem, loads
from decflow.textfile import TextProblem, decode_utf8


def _stored_file(target: str, store: Store, run_id: str) -> bool:
    """Whether the file `target` is run `run_id`'s own stored report (not a copy)."""
    local = store.path(report_path(run_id))
    try:
        return os.path.exists(local) and os.path.samefile(target, local)
    except OSError:
        return False


def resolve_report(target: str, store: Store) -> tuple[dict[str, Any], str, str | None, bool]:
    """(report, source name, run id when the run's artifacts are in the store, whether it is
    the run's own stored report). A run's stored report is read only if it still matches the
    sha256 in the run's record."""
    if os.path.exists(target):
        report = load_report_file(target)
        run = report.get("run")
        run_id = run.get("id") if isinstance(run, dict) else None  # checked when verified
        if isinstance(run_id, str) and has_run(store, run_id):
            own = _stored_file(target, store, run_id)
            if own:
                read_run_file(store, run_id, REPORT)
            return report, target, run_id, own
        return report, target, None, False
    if store.exists(report_path(target)):
        source = f"run {target}"
        try:
            document = loads(decode_utf8(read_run_file(store, target, REPORT)),
                             max_depth=REPORT_MAX_DEPTH)
        except (TextProblem, JsonProblem) as exc:
            where = store.uri(report_path(target))
            raise ReportError(f"{where}: not a JSON report: {exc}") from None
        if not isinstance(document, dict):
            raise ReportError(f"{store.uri(report_path(target))}: not a report")
        return document, source, target, True
    if has_run(store, target):
        raise DecflowError(f"run {target} has no report: {no_report(store, target)}")
    raise DecflowError(
        f"'{target}' is neither a file or folder nor a run id in the store {store.url} "
        "(see `decflow runs`)"
    )


def no_report(store: Store, run_id: str) -> str:
    """Why a stored run has no report, and what to do."""
    state = run_state(store, read_run_record(store, run_id))
    if state.status == RUNNING:
        return f"it is still running ({state.detail})"
    if state.status == INTERRUPTED:
        return f"it was interrupted; {state.detail}"
    if state.status == FAILED:
        resume = resume_command(read_run_record(store, run_id))
        return f"it failed: {state.detail}" + (
            f"; fix that, then finish it with `{resume}`" if resume else "")
    return f"its report is missing (status {state.status}); run it again"


def load_verified(target: str, store: Store, *, judged_again: bool = False,
                  ) -> tuple[Report, str, str | None]:
    """`resolve_report`, then re-verify a run or check report (typed: `RunReport`,
    `CheckReport`); a probe report is re-derived from its stored call table by
    `decflow.probe.load`. Anything else is exit 2.

    `judged_again`: the caller judges the report again from its stored numbers (`report -c`),
    so a run's own stored report (its bytes matched the sha256 its run recorded) need not
    have verdicts that today's gates would give; a report file still must."""
    document, source, run_id, own = resolve_report(target, store)
    kind = document.get("kind", "run")
    version = document.get("report_version")
    advice = REJUDGE.format(run=run_id) if own else REWRITE
    verdicts = not (judged_again and own)
    report: Report
    if version in RUN_REPORT_VERSIONS and kind == "run":
        report = verify_run_report(document, source, advice=advice, verdicts=verdicts)
    elif kind == "check":
        report = verify_check_report(document, source, advice=advice, verdicts=verdicts)
    elif version in REPORT_VERSIONS and kind == "probe":
        report = Report.read(document, source, "probe report", advice=advice)
    elif version in REPORT_VERSIONS and kind == "monitor":
        report = MonitorReport.read(document, source, "monitor report", advice=advice)
    else:
        raise DecflowError(f"{source}: not a decflow or DecGuard 0.1 run, check or monitor "
                           "report")
    if run_id is not None:
        verify_against_run(report, source, store, run_id)
    return report, source, run_id


def verify_against_run(report: Report, source: str, store: Store, run_id: str) -> None:
    """The report's verdict must be the one its run recorded: the status and exit code in
    the run's record and, for a contract run, the gates and statuses of the checks its
    summary stage stored (an artifact checked against its manifest's sha256)."""
    record = read_run_record(store, run_id)
    verdict = {"status": report.status, "exit_code": report.exit_code}
    for field, shown_value in verdict.items():
        if record.get("status") in FINISHED and field in record and (
                shown_value != record[field]):
            raise ReportError(
                f"{source}: {field} {shown_value!r} is not the {record[field]!r} run "
                f"{run_id} recorded; the report was edited after the run"
            )
    summary = (record.get("stages") or {}).get("summary")
    if not isinstance(summary, dict) or "checks" not in report.model_fields_set:
        return
    stored = store.read(Manifest.from_dict(summary), ["gate", "status"])
    recorded = list(zip(stored["gate"], stored["status"], strict=True)) if stored.height else []
    shown = [(c.gate, c.status) for c in report.checks]
    if shown != recorded:
        raise ReportError(
            f"{source}: its checks are not the ones run {run_id} stored with its summary; "
            "the report was edited after the run"
        )
