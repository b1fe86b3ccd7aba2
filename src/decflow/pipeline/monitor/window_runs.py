"""A window checked: its report (the check's own summary of its statistics against the
baseline, with evidence gating, plus the `window` block) stored as a run of kind
`window` that names its monitor and the monitor run that made it, so `decflow runs` lists
it under its monitor and `runs gc` removes it like any run."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decflow.contracts.loader import LoadedContract
from decflow.data.records.windows import window_length, window_start
from decflow.pipeline.monitor.spec import BACKEND, MonitorSpec
from decflow.pipeline.production.baseline import Baseline
from decflow.pipeline.production.statistics import Aggregates
from decflow.pipeline.production.summary import summarize
from decflow.redaction import redact
from decflow.report.model import RunRef
from decflow.store.runs import run_path, write_report, write_run_record
from decflow.store.store import Store

WINDOW_KIND = "window"


def window_run_id(monitor_run: str, window: str) -> str:
    """`<monitor run>-w<window start, digits only>`: after its monitor run in `runs`."""
    return f"{monitor_run}-w" + "".join(c for c in window if c.isalnum())


def window_digest(partitions: list[tuple[str, str]], n_labelled: int) -> str:
    """A window's identity: its partitions' names and bytes, and how many labels joined."""
    listing = "".join(f"{name}\t{digest}\n" for name, digest in sorted(partitions))
    return "sha256:" + hashlib.sha256(f"{listing}labelled\t{n_labelled}\n".encode()).hexdigest()


@dataclass(frozen=True)
class Judged:
    """A window's stored report: its run, verdict and the gated values for the chart."""

    run_id: str
    status: str
    headline: str
    report: dict[str, Any]

    def gates(self) -> dict[str, dict[str, Any]]:
        """Each gate's value, band and limit (`evidence` bounds when it has them)."""
        out = {}
        for check in self.report["checks"]:
            evidence = check.get("evidence") or {}
            out[check["gate"]] = {"value": check["value"], "low": evidence.get("low"),
                                  "high": evidence.get("high"), "limit": check["threshold"],
                                  "comparison": check["comparison"], "status": check["status"]}
        return out


@dataclass(frozen=True)
class Recheck:
    """A window to judge (again): its name and length, why, and its report until now."""

    window: str
    length: str
    reason: str
    supersedes: str | None


def judge_window(store: Store, spec: MonitorSpec, loaded: LoadedContract, recheck: Recheck,
                 aggregates: Aggregates, baseline: Baseline | None) -> Judged:
    """Judge one window like a check of its records and store it as a window run."""
    window = recheck.window
    run_id = window_run_id(spec.run_id, window)
    # a window is always judged by its evidence, whatever the contract's gating
    built = summarize(loaded.contract, aggregates, baseline, contract_path=spec.contract_path,
                      contract_hash=loaded.hash, created_at=spec.created_at,
                      gating="evidence")
    built.run = RunRef(id=run_id, store=store.location)
    report = redact(built.to_dict())
    start = window_start(window)
    report["window"] = {
        "name": window, "start": start.isoformat(),
        "end": (start + window_length(recheck.length)).isoformat(),
        "monitor": spec.monitor_id, "monitor_run": spec.run_id, "reason": recheck.reason,
        "supersedes": recheck.supersedes,
    }
    write_run_record(store, {
        "run_id": run_id, "kind": WINDOW_KIND, "decision": report["contract"]["name"],
        "contract_hash": loaded.hash, "dataset_hash": report["dataset"]["hash"],
        "backend": BACKEND, "mode": WINDOW_KIND, "status": report["status"],
        "exit_code": report["exit_code"], "monitor": spec.monitor_id,
        "monitor_run": spec.run_id, "window": window, "stages": {},
    })
    contract = Path(spec.contract_path)
    store.write_bytes(run_path(run_id, f"contract{contract.suffix}"), contract.read_bytes())
    write_report(store, run_id, report)
    return Judged(run_id, report["status"], report["headline"], report)
