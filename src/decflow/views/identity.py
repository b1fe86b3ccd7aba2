"""Who and what a report is about, as short plain-text rows the Markdown and HTML views
share (each escapes them its own way): paths, run ids, short hashes and counts, never a
raw structure or `None`."""

from __future__ import annotations

from typing import Any

from decflow.views.text import preview, short_hash

Row = tuple[str, str]


def _join(*parts: str) -> str:
    return " · ".join(part for part in parts if part)


def _hash(value: Any) -> str:
    return short_hash(value) if isinstance(value, str) and value else ""


def flat_text(mapping: dict[str, Any]) -> str:
    """`key value, key value` of a mapping's entries (structures as a short preview)."""
    return ", ".join(f"{k} {v if isinstance(v, str | int | float) else preview(v, 40)}"
                     for k, v in mapping.items() if v is not None)


def dataset_text(dataset: dict[str, Any]) -> str:
    """Where the cases or records came from, how many, and their hash."""
    if dataset.get("n_records") is not None:
        parts = dataset.get("partitions") or 1
        counted = f"{dataset['n_records']} records" + (
            f" in {parts} partitions" if parts > 1 else "")
    elif dataset.get("n_cases") is not None:
        counted = f"{dataset['n_cases']} cases, {dataset.get('n_labeled', 0)} labeled"
    else:
        counted = ""
    return _join(str(dataset.get("path") or "n/a"), counted, _hash(dataset.get("hash")))


def backend_text(backend: dict[str, Any]) -> str:
    """`name: provider · model M · version V`."""
    model = backend.get("model")
    version = backend.get("model_version")
    return _join(f"{backend.get('name') or 'n/a'}: {backend.get('provider') or 'n/a'}",
                 f"model {model}" if model else "", f"version {version}" if version else "")


def identity_rows(report: dict[str, Any]) -> list[Row]:
    """The identity of a run or check report (a diff's sides: `side_rows`)."""
    rows: list[Row] = []
    contract = report.get("contract")
    if contract:
        kind = f" ({contract['type']})" if contract.get("type") else ""
        labels = ", ".join(contract.get("labels") or [])
        rows.append(("contract", _join(f"{contract.get('name') or 'n/a'}{kind}",
                                       f"labels {labels}" if labels else "",
                                       str(contract.get("path") or ""),
                                       _hash(contract.get("hash")))))
    if report.get("dataset"):
        rows.append(("records" if report.get("kind") == "check" else "dataset",
                     dataset_text(report["dataset"])))
    baseline = report.get("baseline")
    if isinstance(baseline, dict):
        rows.append(("baseline", _join(str(baseline.get("source") or ""),
                                       dataset_text(baseline))))
    backend = report.get("backend")
    if backend:
        rows.append(("backend", backend_text(backend)))
        if backend.get("details"):
            rows.append(("backend details", flat_text(backend["details"])))
    health = report.get("health")
    if health:
        rows.append(("health", f"{health.get('status')}: {health.get('detail')}"))
    if report.get("evaluation"):
        rows.append(("evaluation", flat_text(report["evaluation"])))
    run = report.get("run")
    if run:
        mode = report.get("mode")
        rows.append(("run", _join(str(run.get("id") or "n/a"), f"mode {mode}" if mode else "",
                                  f"in {run['store']}" if run.get("store") else "")))
    return rows


def _side(side: dict[str, Any]) -> dict[str, str]:
    return {
        "run": str(side.get("path") or "n/a"),
        "created": str(side.get("created_at") or "n/a"),
        "mode": str(side.get("mode") or "n/a"),
        "contract": _hash(side.get("contract_hash")) or "n/a",
        "dataset": dataset_text(side.get("dataset") or {}),
        "backend": backend_text(side.get("backend") or {}),
    }


def side_rows(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """A diff's two runs side by side: (what, baseline, candidate)."""
    baseline = _side(report.get("baseline") or {})
    candidate = _side(report.get("candidate") or {})
    return [(name, baseline[name], candidate[name]) for name in baseline]


def gates_text(report: dict[str, Any]) -> str:
    """Whose gates a diff applies."""
    if report.get("gates_from"):
        return str(report["gates_from"])
    path = (report.get("contract") or {}).get("path")
    return (f"the contract {path}" if path
            else "no contract given: the implicit error-rate requirement only")
