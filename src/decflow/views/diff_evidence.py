"""The evidence section of a diff report, as rows every view renders alike: how the diff was
gated and why, the rerun noise it was judged against (or how to measure it), and per gate
its decision phrase, method and cases. Reports written before the section existed have
none (`evidence_rows` is empty)."""

from __future__ import annotations

from decflow.gates.headline import number
from decflow.report.diff_report import DiffEvidence

EVIDENCE_HEADERS = ("gate", "level", "decision", "method", "cases", "McNemar p")


def gating_line(evidence: DiffEvidence | None) -> str | None:
    """`evidence gating: <why>` or `point gating …`; None for older reports."""
    if evidence is None:
        return None
    if evidence.gating == "evidence":
        return f"evidence gating: {evidence.why}"
    return f"point gating ({evidence.why}); the evidence below is shown beside it"


def noise_line(evidence: DiffEvidence | None) -> str | None:
    """The rerun noise the diff was judged against, or how to measure it."""
    noise = None if evidence is None else evidence.noise
    if noise is None:
        return None
    if not noise.measured:
        return str(noise.advice)
    sources = "; ".join(noise.sources)
    flips = "n/a" if noise.flip_rate is None else f"{100.0 * noise.flip_rate:.1f}%"
    return (f"{flips} rerun flips, mean TV "
            f"{number(noise.mean_tv_distance)} over {noise.cases} cases "
            f"({noise.pairs} placebo pairs: {sources})")


def evidence_rows(evidence: DiffEvidence | None) -> list[tuple[str, ...]]:
    """One row per configured gate: gate, level, decision phrase, method, cases, McNemar."""
    return [(gate.gate, gate.level, gate.phrase, gate.method or "point estimate",
             "" if gate.n is None else str(gate.n),
             "" if gate.mcnemar_p is None else number(gate.mcnemar_p))
            for gate in ([] if evidence is None else evidence.gates)]


def evidence_table(evidence: DiffEvidence | None,
                   ) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """Headers and rows of the evidence table, without a column no gate has a value in
    (the McNemar p of a diff no gate tested that way)."""
    rows = evidence_rows(evidence)
    keep = [i for i in range(len(EVIDENCE_HEADERS)) if any(row[i] for row in rows)]
    return (tuple(EVIDENCE_HEADERS[i] for i in keep),
            [tuple(row[i] for i in keep) for row in rows])


def evidence_items(evidence: DiffEvidence | None) -> list[str]:
    """One sentence per gate: `gate (level): decision · method · n cases · McNemar p`."""
    items = []
    for gate, level, phrase, method, cases, mcnemar in evidence_rows(evidence):
        facts = [method, *([f"{cases} cases"] if cases else []),
                 *([f"McNemar p {mcnemar}"] if mcnemar else [])]
        items.append(f"{gate} ({level}): {phrase} · {' · '.join(facts)}")
    return items
