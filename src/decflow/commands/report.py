"""`decflow report REPORT_OR_RUN [-c CONTRACT]`: show a stored run, or re-gate it offline."""

from __future__ import annotations

import os
from typing import Any

import typer

from decflow.commands import common
from decflow.commands.common import check_format, open_store, publish
from decflow.errors import DecflowError


def resolve_report(target: str, store: Any) -> tuple[dict[str, Any], str, str | None]:
    """(report, source name, run id when the run's artifacts are in the store)."""
    from decflow.reports.verify import load_report_file

    if os.path.exists(target):
        report = load_report_file(target)
        run = report.get("run")
        run_id = run.get("id") if isinstance(run, dict) else None  # checked when verified
        if run_id and store.exists(f"runs/{run_id}/run.json"):
            return report, target, run_id
        return report, target, None
    relative = f"runs/{target}/report.json"
    if store.exists(relative):
        return store.read_json(relative), f"run {target}", target
    raise DecflowError(
        f"'{target}' is neither a report file nor a run in the store {store.url} "
        "(see `decflow runs`)"
    )


def load_verified(target: str, store: Any) -> tuple[dict[str, Any], str, str | None]:
    from decflow.reports.verify import verify_run_report

    report, source, run_id = resolve_report(target, store)
    kind = report.get("kind", "run")
    if report.get("report_version") in ("decflow/1", "0.1") and kind == "run":
        verify_run_report(report, source)
    elif report.get("report_version") == "decflow/1" and kind == "probe":
        pass  # a probe report is re-derived from its stored call table by `decflow.probe.load`
    else:
        raise DecflowError(f"{source}: not a decflow or DecGuard 0.1 run report")
    return report, source, run_id


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report_command(
        target: str = typer.Argument(..., help="A report.json file or a run id."),
        contract: str | None = typer.Option(
            None, "-c", "--contract", help="Re-gate offline with this contract."
        ),
        output: str | None = common.OUTPUT_OPTION,
        fmt: str = common.FORMAT_OPTION,
        fail_on_warn: bool = common.FAIL_ON_WARN_OPTION,
        store: str | None = common.STORE_OPTION,
        html: str | None = common.HTML_OPTION,
        junit: str | None = common.JUNIT_OPTION,
        markdown: str | None = common.MARKDOWN_OPTION,
    ) -> None:
        """Show a stored run or report; with -c, re-gate it without calling any backend."""
        from decflow.reports.views import render_text

        check_format(fmt)
        opened = open_store(store)
        report, _source, run_id = load_verified(target, opened)
        if contract is not None:
            from decflow.contracts import load_contract
            from decflow.pipeline.regate import regate_inline, regate_stored_run

            loaded = load_contract(contract)
            if run_id is not None:
                report = regate_stored_run(
                    opened, run_id, loaded, contract, fail_on_warn=fail_on_warn
                )
            else:
                report = regate_inline(report, loaded, contract, fail_on_warn=fail_on_warn)
        elif fail_on_warn and report["status"] == "warn":
            report = {**report, "exit_code": 1}
        publish(
            report, render_text, fmt=fmt, output=output, html=html, junit=junit,
            markdown=markdown,
        )
