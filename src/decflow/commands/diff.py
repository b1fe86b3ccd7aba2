"""`decflow diff BASELINE CANDIDATE [-c CONTRACT]`: regression diff of two runs or reports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import typer

import decflow
from decflow.commands import common
from decflow.commands.common import check_format, open_store, publish
from decflow.errors import DecflowError
from decflow.pipeline.spec import now_iso

REPORT_VERSION = "decflow/1"


def _decision(report: dict[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    contract = report.get("contract") or {}
    return contract.get("name"), contract.get("type"), tuple(contract.get("labels") or ())


def _describe(decision: tuple[str, str, tuple[str, ...]]) -> str:
    name, kind, labels = decision
    return f"'{name}' ({kind}: {', '.join(labels)})"


def _identity(report: dict[str, Any], path: str) -> dict[str, Any]:
    return {
        "path": path,
        "created_at": report.get("created_at"),
        "mode": report.get("mode"),
        "contract_hash": (report.get("contract") or {}).get("hash"),
        "dataset": report.get("dataset"),
        "backend": report.get("backend"),
    }


def diff_reports(
    baseline: dict[str, Any],
    candidate: dict[str, Any],
    *,
    baseline_path: str,
    candidate_path: str,
    contract: Any | None = None,
    contract_path: str | None = None,
    segment_by: Sequence[str] | None = None,
    fail_on_warn: bool = False,
) -> dict[str, Any]:
    """The diff report of two loaded (already verified) run reports. Evaluation settings
    and gates come from `contract` when given, else from the candidate report (gates: only
    the implicit error-rate requirement). Raises `DecflowError` for different decisions."""
    import decflow
    from decflow.gates.checks import status_of
    from decflow.gates.regression import regression_checks
    from decflow.metrics.regression import diff_results
    from decflow.pipeline.spec import now_iso

    before, after = _decision(baseline), _decision(candidate)
    if before != after:
        raise DecflowError(f"cannot compare {_describe(before)} with {_describe(after)}")
    regression = None
    if contract is not None:
        decision = contract.decision
        own = (decision.name, decision.type, tuple(decision.labels))
        if own != after:
            raise DecflowError(
                f"{contract_path}: the contract describes {_describe(own)}, "
                f"but the reports are for {_describe(after)}"
            )
        regression = contract.regression
        evaluation = contract.evaluation.model_dump()
    else:
        evaluation = dict(candidate.get("evaluation") or {})
    keys = list(segment_by) if segment_by else list(regression.segment_by if regression else [])
    diff = diff_results(
        baseline["results"],
        candidate["results"],
        labels=after[2],
        decision_type=after[1],
        calibration_bins=int(evaluation.get("calibration_bins", 10)),
        confidence_threshold=evaluation.get("confidence_threshold"),
        segment_by=keys,
        min_segment_size=regression.min_segment_size if regression else 5,
    )
    checks = regression_checks(regression, diff)
    status, exit_code = status_of(checks, fail_on_warn=fail_on_warn)
    same = (baseline.get("dataset") or {}).get("hash") == (candidate.get("dataset") or {}).get(
        "hash"
    )
    return {
        "report_version": REPORT_VERSION,
        "decflow_version": decflow.__version__,
        "kind": "diff",
        "created_at": now_iso(),
        "status": status,
        "exit_code": exit_code,
        "contract": {
            "name": after[0],
            "type": after[1],
            "labels": list(after[2]),
            "path": contract_path,
        },
        "baseline": _identity(baseline, baseline_path),
        "candidate": _identity(candidate, candidate_path),
        "same_dataset": same,
        "evaluation": evaluation,
        "counts": diff["counts"],
        "shift": diff["shift"],
        "metrics": diff["metrics"],
        "segments": diff["segments"],
        "checks": [c.to_dict() for c in checks],
        "changes": diff["changes"],
    }


ACCEPTED = "accepted"


def accepted_baseline(store: Any, candidate: dict[str, Any]) -> str | None:
    """The run accepted for the candidate's decision and backend (`decflow runs accept`)."""
    from decflow.commands.runs import accepted_run

    return accepted_run(store, candidate["contract"]["name"], candidate["backend"]["name"])


def no_accepted_baseline(
    candidate: dict[str, Any], source: str, *, fail_on_warn: bool
) -> dict[str, Any]:
    """Nothing to compare with yet: a WARN that says so and how to accept a run."""
    from decflow.gates import make_check, status_of

    decision, backend = candidate["contract"]["name"], candidate["backend"]["name"]
    check = make_check("regression.accepted_baseline", "warning", "accepted_baseline_runs",
                       ">=", 1, 0)
    status, exit_code = status_of([check], fail_on_warn=fail_on_warn)
    run_id = (candidate.get("run") or {}).get("id")
    hint = f"`decflow runs accept {run_id}`" if run_id else "`decflow runs accept RUN`"
    return {
        "report_version": "decflow/1",
        "kind": "diff",
        "decflow_version": decflow.__version__,
        "created_at": now_iso(),
        "status": status,
        "exit_code": exit_code,
        "note": f"no accepted baseline for decision '{decision}' and backend '{backend}'; "
        f"nothing was compared. Accept a run as the baseline with {hint}.",
        "contract": {k: candidate["contract"][k] for k in ("name", "type", "labels")},
        "baseline": None,
        "candidate": _identity(candidate, source),
        "checks": [check.to_dict()],
    }


def run_diff(
    baseline: str,
    candidate: str,
    *,
    contract_path: str | None = None,
    segment_by: Sequence[str] | None = None,
    fail_on_warn: bool = False,
    store: str | None = None,
) -> dict[str, Any]:
    """Load and verify two reports (files, or run ids in the store; decflow or DecGuard 0.1
    run reports) and diff them."""
    from decflow.commands.report import load_verified

    opened = open_store(store)
    new, new_source, _ = load_verified(candidate, opened)
    if baseline == ACCEPTED:
        found = accepted_baseline(opened, new)
        if found is None:
            return no_accepted_baseline(new, new_source, fail_on_warn=fail_on_warn)
        baseline = found
    old, old_source, _ = load_verified(baseline, opened)
    contract = None
    if contract_path is not None:
        from decflow.contracts import load_contract

        contract = load_contract(contract_path).contract
    return diff_reports(
        old,
        new,
        baseline_path=baseline if old_source == baseline else old_source,
        candidate_path=candidate if new_source == candidate else new_source,
        contract=contract,
        contract_path=contract_path,
        segment_by=segment_by,
        fail_on_warn=fail_on_warn,
    )


def register(app: typer.Typer) -> None:
    @app.command("diff")
    def diff_command(
        baseline: str = typer.Argument(..., help="Baseline report file or run id."),
        candidate: str = typer.Argument(..., help="Candidate report file or run id."),
        contract: str | None = typer.Option(None, "-c", "--contract"),
        segment_by: list[str] = typer.Option(
            [], "-s", "--segment-by", help="Metadata key to segment by (repeatable)."
        ),
        output: str | None = common.OUTPUT_OPTION,
        fmt: str = common.FORMAT_OPTION,
        fail_on_warn: bool = common.FAIL_ON_WARN_OPTION,
        store: str | None = common.STORE_OPTION,
        html: str | None = common.HTML_OPTION,
        junit: str | None = common.JUNIT_OPTION,
        markdown: str | None = common.MARKDOWN_OPTION,
    ) -> None:
        """Compare two runs case by case and gate the regression."""
        from decflow.views.diff_text import render_diff

        check_format(fmt)
        report = run_diff(
            baseline,
            candidate,
            contract_path=contract,
            segment_by=segment_by or None,
            fail_on_warn=fail_on_warn,
            store=store,
        )
        publish(
            report, render_diff, fmt=fmt, output=output, html=html, junit=junit,
            markdown=markdown, what="diff",
        )
