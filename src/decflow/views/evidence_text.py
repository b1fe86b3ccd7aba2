"""One line per golden rate gate's evidence (report key `gate_evidence`): DecGuard's verdict
stays as it is; the line says how far it can be trusted at this n. Older reports show
nothing."""

from __future__ import annotations

from decflow.gates.headline import number
from decflow.report.run_report import GoldenGateEvidence


def gate_evidence_lines(items: list[GoldenGateEvidence] | None) -> list[str]:
    lines = []
    for item in items or []:
        evidence = item.evidence
        bounds = f"[{number(evidence.low)}, {number(evidence.high)}]"
        text = (f"{item.gate} {item.limit:g}: {number(evidence.estimate)} {bounds} "
                f"over {evidence.n} cases (95% per side)")
        if "underpowered" in evidence.notes:
            needed = evidence.cases_needed
            text += " — underpowered" + (f" (about {needed} cases would show it)"
                                         if needed else "")
        lines.append(text)
    return lines
