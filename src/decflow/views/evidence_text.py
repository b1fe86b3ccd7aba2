"""One line per golden rate gate's evidence (report key `gate_evidence`): DecGuard's verdict
stays as it is; the line says how far it can be trusted at this n. Older reports show
nothing."""

from __future__ import annotations

from typing import Any

from decflow.gates.headline import number


def gate_evidence_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for item in report.get("gate_evidence") or []:
        evidence = item["evidence"]
        bounds = f"[{number(evidence.get('low'))}, {number(evidence.get('high'))}]"
        text = (f"{item['gate']} {item['limit']:g}: {number(evidence.get('estimate'))} {bounds} "
                f"over {evidence['n']} cases (95% per side)")
        if "underpowered" in evidence.get("notes", []):
            needed = evidence.get("cases_needed")
            text += " — underpowered" + (f" (about {needed} cases would show it)"
                                         if needed else "")
        lines.append(text)
    return lines
