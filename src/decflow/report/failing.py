"""Which cases make each gate of a report fail: what an on-call reader opens first.

`failing_gates` pairs every gate that does not pass with the stored cases behind it:

- golden gates with the stored cases their registry entry names (`GoldenGate.failing`):
  `max_error_rate` with the errored cases, `min_accuracy`, `min_macro_f1` and
  `min_selective_accuracy` with the wrongly answered ones (`failures`);
- property gates `<property>.max_violation_rate | max_flip_rate | max_error_rate` with that
  property's violating, flipped or errored transformed cases (`properties.failures`, which
  keeps the first `STORED_PROPERTY_FAILURES` of them; the count comes from the property's
  summary, every case is in the run's `comparisons` stage);
- persona gates `counterfactual.<axis>.…` with the axis's cross-group flips kept as examples;
- diff gates with the changes their entry names (`RegressionGate.failing`):
  `max_answer_flip_rate`, `max_accuracy_drop`, `max_macro_f1_drop` and
  `max_error_rate_increase` with the flipped, newly wrong or newly errored cases (`changes`);
- check reports' `segment[<key>=<value>].…` gates with their segment.

Any other gate (calibration, coverage, latency, drift, stability…) is judged on the whole
suite: no single case fails it, and `cases` is empty with `aggregate` set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from decflow.contracts.gates import GOLDEN_GATES, golden_gate, regression_gate
from decflow.contracts.properties import PROPERTY_GATES
from decflow.gates.headline import failing_first
from decflow.report.model import CheckRow, Report
from decflow.report.sections import property_failures, report_kind

STORED_PROPERTY_FAILURES = 200  # pipeline.contract_run.properties_section keeps these
# The per-property count a property gate is judged on (its summary's field).
SUMMARY_COUNTS = {"max_violation_rate": "n_violations", "max_flip_rate": "n_flips",
                  "max_error_rate": "n_errors"}


@dataclass(frozen=True)
class FailingGate:
    """A gate that does not pass, the stored cases behind it and how many there are in all
    (`total` may exceed `len(cases)` where the report keeps only the first ones; `source`
    names the report field the cases come from)."""

    check: CheckRow
    kind: str  # golden | property | persona | change | segment | aggregate
    cases: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    source: str = ""

    @property
    def aggregate(self) -> bool:
        return self.kind == "aggregate"


Found = tuple[list[dict[str, Any]], int, str]  # cases, how many in all, report field


def _complete(cases: list[dict[str, Any]], source: str) -> Found:
    return cases, len(cases), source


def _golden(report: dict[str, Any], gate: str) -> Found | None:
    failing = golden_gate(gate).failing if gate in GOLDEN_GATES else None
    items = report.get("failures") or []
    if failing == "errored":
        return _complete([i for i in items if i.get("kind") == "error"], "failures")
    if failing in ("wrong", "wrong_covered"):
        wrong = [i for i in items if i.get("kind") != "error"]
        if failing == "wrong_covered":
            threshold = (report.get("evaluation") or {}).get("confidence_threshold")
            if threshold is not None:
                wrong = [i for i in wrong if (i.get("confidence") or 0.0) >= threshold]
        return _complete(wrong, "failures")
    return None


def _failed_by(gate: str) -> Callable[[dict[str, Any]], bool]:
    if gate == "max_flip_rate":
        return lambda item: bool((item.get("comparison") or {}).get("flipped"))
    if gate == "max_error_rate":
        return lambda item: bool(item.get("error"))
    return lambda item: bool(item.get("violations"))


def _property(report: dict[str, Any], gate: str) -> Found | None:
    name, _, which = gate.rpartition(".")
    properties = report.get("properties") or {}
    if not name or which not in PROPERTY_GATES or not properties:
        return None
    matches = _failed_by(which)
    cases = [i for i in property_failures(properties)
             if i.get("property") == name and matches(i)]
    summary: dict[str, Any] = next((s for s in properties.get("summaries") or []
                                    if s.get("property") == name), {})
    total = max(len(cases), int(summary.get(SUMMARY_COUNTS[which]) or 0))
    return cases, total, "properties.failures"


def _persona(report: dict[str, Any], gate: str) -> Found | None:
    if not gate.startswith("counterfactual."):
        return None
    axis = gate.split(".")[1]
    counterfactual = (report.get("diagnostics") or {}).get("counterfactual") or {}
    examples = [e for e in counterfactual.get("examples") or [] if e.get("axis") == axis]
    return _complete(examples, "diagnostics.counterfactual.examples")


def _changes(report: dict[str, Any], gate: str) -> Found | None:
    found = regression_gate(gate)
    failing = None if found is None else found.failing
    changes = report.get("changes") or []
    if failing in ("flip", "newly_errored"):
        return _complete([c for c in changes if c.get("kind") == failing], "changes")
    if failing == "newly_wrong":
        return _complete([c for c in changes if c.get("kind") == "flip"
                          and c.get("expected") is not None
                          and c.get("candidate_selected") != c.get("expected")], "changes")
    return None


def _segment(report: dict[str, Any], gate: str) -> Found | None:
    if not gate.startswith("segment["):
        return None
    name = gate[len("segment["):].split("]", 1)[0]
    found = [s for s in report.get("segments") or []
             if f"{s.get('key')}={s.get('value')}" == name]
    return _complete(found, "segments")


Finder = Callable[[dict[str, Any], str], Found | None]
# Per report kind, the finders tried in turn (see the module docstring).
FINDERS: dict[str, tuple[tuple[str, Finder], ...]] = {
    "run": (("property", _property), ("golden", _golden), ("persona", _persona)),
    "diff": (("change", _changes),),
    "check": (("segment", _segment),),
}


def gate_cases(report: dict[str, Any], check: CheckRow) -> FailingGate:
    """The stored cases behind one gate (see the module docstring)."""
    for name, finder in FINDERS.get(report_kind(report), ()):
        found = finder(report, check.gate)
        if found is not None:
            cases, total, source = found
            return FailingGate(check, name, cases, total, source)
    return FailingGate(check, "aggregate")


def failing_gates(report: dict[str, Any]) -> list[FailingGate]:
    """Every gate that does not pass, in display order, with its stored cases."""
    head = Report.view(report)
    return [gate_cases(report, check) for check in failing_first(head.failing_checks())]
