"""Who and what a report is about, as short plain-text rows the Markdown and HTML views
share (each escapes them its own way): paths, run ids, short hashes and counts, never a
raw structure or `None`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from decflow.report.kinds import is_check
from decflow.report.model import BackendRef, DatasetRef, Report
from decflow.views.text import preview, short_hash

if TYPE_CHECKING:
    from decflow.report.diff_report import DiffSide, DiffView, SideCache

Row = tuple[str, str]


def _join(*parts: str) -> str:
    return " · ".join(part for part in parts if part)


def _hash(value: Any) -> str:
    return short_hash(value) if isinstance(value, str) and value else ""


def flat_text(mapping: dict[str, Any]) -> str:
    """`key value, key value` of a mapping's entries (structures as a short preview)."""
    return ", ".join(f"{k} {v if isinstance(v, str | int | float) else preview(v, 40)}"
                     for k, v in mapping.items() if v is not None)


def dataset_text(dataset: DatasetRef) -> str:
    """Where the cases or records came from, how many, and their hash."""
    if dataset.n_records is not None:
        parts = dataset.partitions or 1
        counted = f"{dataset.n_records} records" + (
            f" in {parts} partitions" if parts > 1 else "")
    elif dataset.n_cases is not None:
        counted = f"{dataset.n_cases} cases, {dataset.n_labeled or 0} labeled"
    else:
        counted = ""
    return _join(str(dataset.path or "n/a"), counted, _hash(dataset.hash))


def baseline_text(baseline: dict[str, Any]) -> str:
    """A check's or monitor's baseline: `dataset · PATH · N records · hash`; a stored run's
    path already names it (`run ID · N records · hash`, not `run · run ID`)."""
    dataset = DatasetRef.model_validate(baseline)
    source = str(baseline.get("source") or "")
    named = str(dataset.path or "").startswith(f"{source} ")
    return _join("" if named else source, dataset_text(dataset))


def backend_text(backend: BackendRef) -> str:
    """`name: provider · model M · version V`."""
    model, version = backend.model, backend.model_version
    return _join(f"{backend.name or 'n/a'}: {backend.provider or 'n/a'}",
                 f"model {model}" if model else "", f"version {version}" if version else "")


def identity_rows(report: Report) -> list[Row]:
    """The identity of a run or check report (a diff's sides: `side_rows`)."""
    rows: list[Row] = []
    contract = report.contract
    if contract:
        kind = f" ({contract.type})" if contract.type else ""
        labels = ", ".join(contract.labels)
        rows.append(("contract", _join(f"{contract.name or 'n/a'}{kind}",
                                       f"labels {labels}" if labels else "",
                                       str(contract.path or ""), _hash(contract.hash))))
    if report.dataset:
        rows.append(("records" if report.kind == "check" else "dataset",
                     dataset_text(report.dataset)))
    if is_check(report) and report.baseline is not None:
        # a check's baseline: its source and records
        rows.append(("baseline", baseline_text(report.baseline.to_dict())))
    backend = report.backend
    if backend:
        rows.append(("backend", backend_text(backend)))
        if backend.details:
            rows.append(("backend details", flat_text(backend.details)))
    if report.health:
        rows.append(("health", f"{report.health.status}: {report.health.detail}"))
    if report.evaluation:
        rows.append(("evaluation", flat_text(report.evaluation.to_dict())))
    run = report.run
    if run:
        mode = report.mode
        rows.append(("run", _join(str(run.id or "n/a"), f"mode {mode}" if mode else "",
                                  f"in {run.store}" if run.store else "")))
    return rows


def _side(side: DiffSide) -> dict[str, str]:
    shown = {
        "run": str(side.path or "n/a"),
        "created": str(side.created_at or "n/a"),
        "mode": str(side.mode or "n/a"),
        "contract": _hash(side.contract_hash) or "n/a",
        "dataset": dataset_text(side.dataset or DatasetRef()),
        "backend": backend_text(side.backend or BackendRef()),
    }
    if side.call_cache is not None:
        shown["call cache"] = cache_side(side.call_cache)
    return shown


def cache_side(used: SideCache) -> str:
    """`30 answers from the call cache, 0 sent (read-write)` for one side of a diff."""
    sent = used.requests_sent
    return (f"{used.served_from_cache} answers from the call cache"
            f"{'' if sent is None else f', {sent} sent'} ({used.mode})")


def side_rows(report: DiffView) -> list[tuple[str, str, str]]:
    """A diff's two runs side by side: (what, baseline, candidate)."""
    from decflow.report.diff_report import DiffSide

    baseline, candidate = (_side(side or DiffSide()) for side in (report.baseline,
                                                                  report.candidate))
    return [(name, baseline[name], candidate[name]) for name in baseline]


def gates_text(report: DiffView) -> str:
    """Whose gates a diff applies."""
    if report.gates_from:
        return report.gates_from
    path = report.contract.path if report.contract else None
    return (f"the contract {path}" if path
            else "no contract given: the implicit error-rate requirement only")
