"""The evidence section of a diff report, as rows every view renders alike: how the diff was
gated and why, the rerun noise it was judged against (or how to measure it), and per gate
its decision phrase, method and cases. Reports written before the section existed have
none (`evidence_rows` is empty)."""

from __future__ import annotations

from typing import Any

from decflow.gates.headline import number

EVIDENCE_HEADERS = ("gate", "level", "decision", "method", "cases", "McNemar p")


def gating_line(report: dict[str, Any]) -> str | None:
    """`evidence gating: <why>` or `point gating …`; None for older reports."""
    evidence = report.get("evidence")
    if not evidence:
        return None
    if evidence["gating"] == "evidence":
        return f"evidence gating: {evidence['why']}"
    return f"point gating ({evidence['why']}); the evidence below is shown beside it"


def noise_line(report: dict[str, Any]) -> str | None:
    """The rerun noise the diff was judged against, or how to measure it."""
    noise = (report.get("evidence") or {}).get("noise")
    if not noise:
        return None
    if not noise.get("measured"):
        return str(noise["advice"])
    sources = "; ".join(noise.get("sources") or [])
    return (f"{100.0 * noise['flip_rate']:.1f}% rerun flips, mean TV "
            f"{number(noise['mean_tv_distance'])} over {noise['cases']} cases "
            f"({noise['pairs']} placebo pairs: {sources})")


def evidence_rows(report: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per configured gate: gate, level, decision phrase, method, cases, McNemar."""
    rows: list[tuple[str, ...]] = []
    for gate in (report.get("evidence") or {}).get("gates") or []:
        mcnemar = gate.get("mcnemar_p")
        rows.append((
            str(gate["gate"]), str(gate["level"]), str(gate["phrase"]),
            str(gate.get("method") or "point estimate"),
            "" if gate.get("n") is None else str(gate["n"]),
            "" if mcnemar is None else number(mcnemar),
        ))
    return rows


def evidence_table(report: dict[str, Any]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """Headers and rows of the evidence table, without a column no gate has a value in
    (the McNemar p of a diff no gate tested that way)."""
    rows = evidence_rows(report)
    keep = [i for i in range(len(EVIDENCE_HEADERS)) if any(row[i] for row in rows)]
    return (tuple(EVIDENCE_HEADERS[i] for i in keep),
            [tuple(row[i] for i in keep) for row in rows])


def evidence_items(report: dict[str, Any]) -> list[str]:
    """One sentence per gate: `gate (level): decision · method · n cases · McNemar p`."""
    items = []
    for gate, level, phrase, method, cases, mcnemar in evidence_rows(report):
        facts = [method, *([f"{cases} cases"] if cases else []),
                 *([f"McNemar p {mcnemar}"] if mcnemar else [])]
        items.append(f"{gate} ({level}): {phrase} · {' · '.join(facts)}")
    return items
