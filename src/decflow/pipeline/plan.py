"""The diagnostics plan: the calls each diagnostic will make and the evidence a verdict needs,
computed from the contract and the dataset alone — no backend is built or called.

`decflow test|fuzz|stability --plan` prints it and stops; a real run prints the same plan
before its first call. Sizes come from the same statistics the verdicts use:

- stability: k reruns per case give ⌊k/2⌋ disjoint pairs each; a `deterministic` verdict
  at ε needs a number of quiet *cases* (the case is the sampling unit), from the meter's own
  test; the power curve: the cases that show a flip rate of 2, 3 and 5 × ε (effects 1, 2,
  4 × ε) with 80 % power (`metrics.power`);
- counterfactual: the distinct persona arms (base persona, cross pairs, placebo partners),
  the cases a `fair-qualified` verdict needs when no pair flips (the clustered excess), and
  the power curve of the unfair verdict at Holm's first level;
- blindness: no call of its own (it reads the originals' and base personas' decisions);
- metamorphic properties: their transformed requests, derived exactly as the run derives
  them (seeded), less those that carry a generation error.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from decflow.contracts.properties import Paraphrase
from decflow.data.golden_dataset import load_golden
from decflow.diagnostics.counterfactual import plan as counterfactual_plan
from decflow.diagnostics.stability import cases_for_deterministic
from decflow.metrics.evidence import ALPHA
from decflow.metrics.power import Test, power_curve
from decflow.pipeline.contract_run.derive import (
    counterfactual_config,
    derived_requests,
    persona_pair_set,
    selected_properties,
    stability_config,
)
from decflow.pipeline.contract_run.first_wave import dataset_location
from decflow.pipeline.spec import RunSpec, load_contract_cached

if TYPE_CHECKING:
    import polars as pl

    from decflow.contracts.contract import Contract
    from decflow.contracts.loader import LoadedContract
    from decflow.contracts.properties import Counterfactual
    from decflow.contracts.sections import Stability

def _share_test(spec: RunSpec) -> Test:
    """The test of shares the run will apply: rounded with its seed, else Bentkus's."""
    return "rounded" if spec.rounding_seed is not None else "bentkus"


def _stability(config: Stability, n_cases: int, shares: Test) -> dict[str, Any]:
    pairs = n_cases * (config.repeats // 2)
    needed = cases_for_deterministic(config.epsilon, config.repeats)
    return {
        "name": "stability",
        "calls": n_cases * (config.repeats - 1),  # the original is repeat 0
        "repeats": config.repeats,
        "epsilon": config.epsilon,
        "pairs": pairs,
        "cases_needed": needed,
        "can_decide": needed is not None and n_cases >= needed,
        "power": power_curve("binomial" if config.repeats // 2 <= 1 else shares,
                             config.epsilon),
        "advice": f"{pairs} rerun pairs over {n_cases} cases; a deterministic verdict at ε "
        f"{config.epsilon:g} needs {needed} quiet cases"
        + ("" if n_cases >= (needed or 0) else
           " (the reruns of one case are correlated: add cases, not repeats)"),
    }


def _counterfactual(
    contract: Contract, config: Counterfactual, cases: pl.DataFrame, shares: Test
) -> dict[str, Any]:
    pairs = persona_pair_set(contract, config, cases)
    frame = pairs.frame()
    sized = counterfactual_plan(
        cases.height,
        dimensions=config.dimensions,
        num_pairs_per_dimension=config.num_pairs_per_dimension,
        placebo=config.placebo and config.persona_pairs is None,
        max_flip_rate=config.max_flip_rate,
    )
    axes = []
    for axis in config.dimensions:
        rows = frame.filter((frame["axis"] == axis) & (frame["status"] != "identical"))
        cross = rows.filter(rows["kind"] == "cross")
        axes.append({
            "axis": axis,
            "cross_pairs": cross.height,
            "placebo_pairs": rows.height - cross.height,
            "cases": cross["case_id"].n_unique(),
            "not_exercised": pairs.not_exercised.get(axis),
        })
    attributed = config.placebo and config.persona_pairs is None
    test: Test = ("difference" if attributed else
                  "binomial" if config.num_pairs_per_dimension <= 1 else shares)
    return {
        "name": "counterfactual",
        "calls": len(pairs.unique_arms()),
        "max_flip_rate": config.max_flip_rate,
        "attribution": "placebo" if config.placebo and config.persona_pairs is None
        else "unattributed",
        "cases_needed": sized["cases_needed"],
        "can_decide": sized["can_qualify"],
        # Unfair is judged after Holm across the axes: its first step's level.
        "power": power_curve(test, config.max_flip_rate,
                             alpha=ALPHA / max(len(config.dimensions), 1)),
        "axes": axes,
        "advice": sized["advice"],
    }


def _property_calls(spec: RunSpec, loaded: LoadedContract,
                    cases: pl.DataFrame) -> list[dict[str, Any]]:
    """The requests each metamorphic property will send: derived as the requests stage
    derives them (seeded, no backend), less those that carry a generation error and are
    never sent. A paraphrase provider other than `identity` is not asked: its property
    counts at most one request per case and sample."""
    contract = loaded.contract
    properties = selected_properties(spec, contract)
    asked = [name for name, config in properties
             if not isinstance(config, Paraphrase) or config.source.provider == "identity"]
    counted: dict[str, dict[str, Any]] = {}
    if asked:
        only = replace(spec, mode="fuzz", properties=tuple(asked))
        frames, extra = derived_requests(only, loaded, cases, None)
        for frame in frames:
            sent = frame.filter(frame["pre_error_kind"].is_null())
            for name, count in sent.group_by("property").len().iter_rows():
                counted.setdefault(name, {"property": name, "calls": 0})["calls"] += count
        for skipped in extra["skipped"]:
            counted.setdefault(skipped["property"], {"property": skipped["property"],
                                                     "calls": 0})
    for name, config in properties:
        if isinstance(config, Paraphrase) and name not in asked:
            counted[name] = {"property": name, "calls": cases.height * config.samples,
                             "at_most": True}
    return [counted.get(name, {"property": name, "calls": 0}) for name, _ in properties]


def diagnostics_plan(spec: RunSpec) -> dict[str, Any]:
    """The plan of a run (see the module docstring); reads the contract and dataset only."""
    loaded = load_contract_cached(spec.contract_path)
    contract = loaded.contract
    read_path, shown = dataset_location(spec, contract)
    cases = load_golden(read_path, contract.decision.labels, shown_path=shown).cases
    properties = (_property_calls(spec, loaded, cases) if spec.run_mode.fills("properties")
                  else [])
    diagnostics: list[dict[str, Any]] = []
    stability = stability_config(spec, contract)
    if stability is not None:
        diagnostics.append(_stability(stability, cases.height, _share_test(spec)))
    if spec.run_mode.fills("diagnostics"):
        diagnostics.append({
            "name": "blindness",
            "calls": 0,
            "advice": "reads one decision per case that other steps make anyway",
        })
    counterfactual = counterfactual_config(spec, contract)
    if counterfactual is not None:
        diagnostics.append(_counterfactual(contract, counterfactual, cases, _share_test(spec)))
    property_calls = sum(p["calls"] for p in properties)
    diagnostic_calls = sum(d["calls"] for d in diagnostics)
    calls = cases.height + property_calls + diagnostic_calls
    sequential = None
    if spec.sequential:
        from decflow.pipeline.contract_run.sequential.calls import planned_checks
        from decflow.pipeline.contract_run.sequential.plan import sequential_plan

        sequential = sequential_plan(planned_checks(contract, spec), cases.height, calls,
                                     spec.sequential, len(contract.decision.labels),
                                     rounds_shares=spec.rounding_seed is not None)
    return {
        **({"sequential": sequential} if sequential is not None else {}),
        "mode": spec.mode,
        "cases": cases.height,
        "original_calls": cases.height,
        "properties": properties,
        "property_calls": property_calls,
        "diagnostics": diagnostics,
        "diagnostic_calls": diagnostic_calls,
        "calls": calls,
        "note": "counted from the contract and dataset alone: nothing is called; a paraphrase "
        "provider other than identity is counted at most (cases × samples)",
    }
