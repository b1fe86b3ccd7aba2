"""`ProbeResult`: the diagnostic picture of one probe, and its JSON report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from decflow.diagnostics.blindness import BlindnessResult
from decflow.diagnostics.stability import StabilityResult, oracle_guidance
from decflow.gates.checks import Check, status_of
from decflow.gates.headline import Qualifier, bounds, headline
from decflow.probe.analyse import (
    ProbeSettings,
    blindness,
    discover_labels,
    inputs_of,
    measure,
    relation_results,
)
from decflow.probe.relations import RelationResult, probe_checks
from decflow.report.versions import REPORT_VERSION


@dataclass(frozen=True)
class ProbeResult:
    settings: ProbeSettings
    inputs: tuple[str, ...]
    labels: tuple[str, ...]  # verdicts the agent gave, in the order first seen
    meter: StabilityResult
    blindness: BlindnessResult
    relation_results: tuple[RelationResult, ...]
    observations: pl.DataFrame  # one row per agent call (see decflow.probe.collect.SCHEMA)
    run_id: str | None = None
    created_at: str | None = None

    @property
    def calls(self) -> int:
        return self.observations.height

    @property
    def is_stochastic(self) -> bool:
        return self.meter.verdict == "stochastic"

    @property
    def is_blind(self) -> bool:
        return self.blindness.blind

    @property
    def vacuous_relations(self) -> list[RelationResult]:
        return [r for r in self.relation_results if r.is_vacuous]

    @property
    def violated_relations(self) -> list[RelationResult]:
        return [r for r in self.relation_results if r.violated]

    @property
    def suite_is_meaningful(self) -> bool:
        """False when the agent is blind, or relations were requested and none changed any
        input; a diagnostics-only probe (no relations) has nothing to distrust."""
        nothing_ran = bool(self.relation_results) and all(
            r.is_vacuous for r in self.relation_results
        )
        return not self.is_blind and not nothing_ran

    @property
    def checks(self) -> list[Check]:
        """The probe's gates (`probe_checks`): blindness, then one per relation."""
        return probe_checks(self.blindness, self.relation_results)

    @property
    def exit_code(self) -> int:
        return status_of(self.checks)[1]

    @property
    def status(self) -> str:
        """fail (exit 1) when blind or a relation was violated; warn (exit 0) when a relation
        asked for changed no input, or no first draw was decided — not established, never a
        pass; else pass."""
        return status_of(self.checks)[0]

    @property
    def headline(self) -> str:
        """The report's first line in PRODUCT §4's grammar (`gates.headline`), with a
        `stochastic` qualifier when the meter shows the agent flips on reruns (violation
        rates then read against that, not against zero): `FAIL 1/3: whitespace.
        max_violation_rate 0.25 [0.0127, 0.7514] > 0`."""
        checks = self.checks
        return headline(status_of(checks)[0], checks, qualifiers=self.qualifiers)

    @property
    def qualifiers(self) -> list[Qualifier]:
        meter = self.meter
        if not self.is_stochastic:
            return []
        return [Qualifier("stochastic", f"{meter.flips}/{meter.pairs} rerun pairs flipped "
                                        f"{bounds(meter.ci_low, meter.ci_high)}")]

    @property
    def guidance(self) -> str:
        return oracle_guidance(self.meter, self.blindness)

    def _calls(self) -> dict[str, Any]:
        n, k = len(self.inputs), self.settings.repeats
        followups = int((self.observations["side"] == "followup").sum())
        failed = self.observations.filter(pl.col("text").is_null())
        return {
            "made": self.calls,
            "followups": followups,
            "with_reuse": n * k + followups,
            "without_reuse": n * k + n + 2 * followups,
            "errors": failed.height,
            "first_error": failed["error"][0] if failed.height else None,
        }

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON report (`kind: probe`)."""
        return {
            "report_version": REPORT_VERSION,
            "kind": "probe",
            "run": {"id": self.run_id, "created_at": self.created_at},
            "status": self.status,
            "exit_code": self.exit_code,
            "headline": self.headline,
            "qualifiers": [q.to_dict() for q in self.qualifiers],
            "checks": [c.to_dict() for c in self.checks],
            "settings": self.settings.to_dict(),
            "inputs": len(self.inputs),
            "labels": list(self.labels),
            "calls": self._calls(),
            "meter": self.meter.to_dict(),
            "blindness": self.blindness.to_dict(),
            "guidance": self.guidance,
            "relations": [r.to_dict() for r in self.relation_results],
            "not_exercised": [r.name for r in self.vacuous_relations],
            "suite_is_meaningful": self.suite_is_meaningful,
        }

    def summary(self) -> str:
        """One line: the meter's call, blindness and the calls made, e.g. `undecided 0/8
        pairs [0.000, 0.527] at ε 0.01; 75% 'allow'; 28 calls` (the whole report:
        `decflow.render_text(result.to_dict())`)."""
        meter, blind = self.meter, self.blindness
        skew = "no decided input" if blind.skew is None else (
            f"{blind.skew:.0%} '{blind.modal_label}'" + (" BLIND" if blind.blind else ""))
        violated = [r.name for r in self.violated_relations]
        relations = f"; violated: {', '.join(violated)}" if violated else ""
        return (f"{meter.verdict} {meter.flips}/{meter.pairs} pairs [{meter.ci_low:.3f}, "
                f"{meter.ci_high:.3f}] at ε {meter.epsilon:g}; {skew}{relations}; "
                f"{self.calls} calls")

    def to_contract(self, *, as_yaml: bool = True, name: str = "probed_agent",
                    dataset: str = "cases.jsonl", labels: Sequence[str] | None = None) -> (
        str | dict[str, Any]
    ):
        """A decflow contract reproducing what the agent answered (YAML text, or the dict);
        see decflow.probe.contract. `labels` adds answers the agent could give but did not."""
        from decflow.probe.contract import contract_document, contract_yaml

        document = contract_document(self, name=name, dataset=dataset, labels=labels)
        return contract_yaml(self, document) if as_yaml else document

    def write_contract(self, directory: str | Path, *, name: str = "probed_agent",
                       labels: Sequence[str] | None = None) -> Path:
        """Write `decflow.yaml` and its dataset `cases.jsonl` into `directory`; returns the
        contract's path."""
        from decflow.probe.contract import write_contract

        return write_contract(self, Path(directory), name=name, labels=labels)


def build_result(frame: pl.DataFrame, settings: ProbeSettings, *, run_id: str | None = None,
                 created_at: str | None = None) -> ProbeResult:
    inputs = inputs_of(frame)
    labels = discover_labels(frame)
    return ProbeResult(
        settings=settings,
        inputs=tuple(inputs),
        labels=tuple(labels),
        meter=measure(frame, settings, labels),
        blindness=blindness(frame, settings),
        relation_results=tuple(relation_results(frame, settings, len(inputs))),
        observations=frame,
        run_id=run_id,
        created_at=created_at,
    )
