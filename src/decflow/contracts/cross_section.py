"""Rules that span sections (the "invalid combinations" of the contract reference).

Each check runs only when the sections it reads validated, so one broken section does not
hide problems elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence

from decflow.contracts.decision import Decision
from decflow.contracts.gates import (
    GOLDEN_GATES,
    GoldenGates,
    Production,
    Regression,
    regression_gates,
)
from decflow.contracts.properties import Counterfactual, LabelFormat, PropertySet
from decflow.contracts.sections import Evaluation, Policy


def _types_phrase(types: Sequence[str]) -> str:
    return " and ".join(types) + " decisions"


def golden_gate_problems(
    name: str, gates: GoldenGates, evaluation: Evaluation | None, decision: Decision | None
) -> list[str]:
    problems = []
    if evaluation is not None and evaluation.confidence_threshold is None:
        problems += [
            f"{name}.{gate.name} needs evaluation.confidence_threshold to be set"
            for gate in GOLDEN_GATES.entries()
            if gate.needs_threshold and gates.limit(gate.name) is not None
        ]
    if decision is not None and decision.type != "score":
        problems += [f"{name}.{gate.name} only applies to score decisions"
                     for gate in GOLDEN_GATES.entries()
                     if gate.score_only and gates.limit(gate.name) is not None]
    return problems


def production_problems(production: Production, evaluation: Evaluation | None) -> list[str]:
    if evaluation is None or evaluation.confidence_threshold is not None:
        return []
    sets = ("requirements", "warnings", "segment_requirements", "segment_warnings")
    return [
        f"production.{name}.min_threshold_coverage: production min_threshold_coverage needs "
        "evaluation.confidence_threshold to be set"
        for name in sets
        if getattr(production, name).min_threshold_coverage is not None
    ]


def regression_problems(regression: Regression) -> list[str]:
    if regression.segment_by:
        return []
    problems = []
    for gate in regression_gates():
        message = f"{gate.name} needs segment_by (case metadata keys)"
        if gate.needs_segment_by and regression.limit("requirement", gate.name) is not None:
            problems.append(f"regression.{message}")
        if gate.needs_segment_by and regression.limit("warning", gate.name) is not None:
            problems.append(f"regression.warnings.{message}")
    return problems


def property_problems(properties: PropertySet, decision: Decision) -> list[str]:
    problems = []
    labels = set(decision.labels)
    for name, config in properties:
        if config is None:
            continue
        if decision.type not in config.applies_to:
            problems.append(
                f"properties.{name} applies to {_types_phrase(config.applies_to)}, "
                f"not {decision.type}"
            )
    label_format = properties.get("label_format")
    if isinstance(label_format, LabelFormat):
        unknown = sorted(set(label_format.aliases) - labels)
        if unknown:
            problems.append(f"properties.label_format.aliases: unknown labels {unknown}")
    counterfactual = properties.get("counterfactual")
    if not isinstance(counterfactual, Counterfactual):
        return problems
    if counterfactual.favourable_labels is not None:
        unknown = sorted(set(counterfactual.favourable_labels) - labels)
        if unknown:
            problems.append(
                f"properties.counterfactual.favourable_labels: unknown labels {unknown}; "
                f"the contract labels are {list(decision.labels)}"
            )
    return problems + counterfactual_slot_problems(counterfactual)


def counterfactual_slot_problems(config: Counterfactual) -> list[str]:
    """Template and `persona_pairs` slots the language's persona catalogue cannot fill."""
    from decflow.catalogue.entries import load_catalogue
    from decflow.catalogue.templates import unknown_slots

    catalogue = load_catalogue(config.language)
    usable = sorted(s for s in catalogue.slot_names if not s.endswith("_cap"))
    hint = f"the {config.language} persona catalogue fills {usable}"
    problems = []
    if config.template is not None:
        unknown = unknown_slots(config.template, catalogue)
        if unknown:
            problems.append(f"properties.counterfactual.template: unknown slots {unknown}; {hint}")
    for i, pair in enumerate(config.persona_pairs or []):
        # 'a' and 'b' fill the same slots (checked by the model), so one report per pair.
        unknown = sorted(set(pair.a) - set(catalogue.slot_names))
        if unknown:
            problems.append(
                f"properties.counterfactual.persona_pairs.{i}: unknown slots {unknown}; {hint}"
            )
    return problems


def policy_problems(policy: Policy, backend_names: Sequence[str] | None) -> list[str]:
    problems = []
    last = len(policy.routes) - 1
    previous: float | None = None
    for i, route in enumerate(policy.routes):
        at = f"policy.routes.{i}"
        if route.when is None and i < last:
            problems.append(
                f"{at}: only the last route may omit 'when' (the final route must be unconditional)"
            )
        if route.when is not None and i == last:
            problems.append(f"{at}.when: the final route must be unconditional")
        if route.when is not None:
            threshold = route.when.confidence_gte
            if previous is not None and threshold >= previous:
                problems.append(
                    f"{at}.when.confidence_gte: confidence_gte thresholds must be strictly "
                    f"descending ({threshold:g} follows {previous:g})"
                )
            previous = threshold
        if route.action == "fallback" and route.backend is None:
            problems.append(f"{at}: fallback routes require 'backend'")
        if route.action != "fallback" and route.backend is not None:
            problems.append(f"{at}.backend: only fallback routes name a backend")
        known = backend_names is None or route.backend is None or route.backend in backend_names
        if not known:
            problems.append(
                f"{at}.backend: unknown backend {route.backend!r}; the contract defines: "
                f"{', '.join(backend_names or [])}"
            )
    return problems
