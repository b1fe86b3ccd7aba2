"""The `counterfactual` part of the diagnostics section: the persona pairs the requests stage
stored, their arms' answers, and the per-axis verdicts with their checks. Apart from
`diagnostics_section` because only a contract that declares counterfactual personas needs
it (the persona catalogue and the verdicts' statistics load with it)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import polars as pl

from decflow.diagnostics.blindness import BlindnessResult, describe, detect_blindness
from decflow.diagnostics.counterfactual import (
    NOT_EXERCISED,
    CounterfactualResult,
    analyse_counterfactual,
    attach_probabilities,
    counterfactual_checks,
    plan,
)
from decflow.diagnostics.pair_storage import pairs_from
from decflow.diagnostics.personas import PairSet
from decflow.diagnostics.stability import StabilityResult
from decflow.gates import Check, make_check
from decflow.pipeline.contract_run.derive import (
    COUNTERFACTUAL,
    PERSONA_PAIRS,
    arm_fingerprint,
    counterfactual_config,
    persona_pair_set,
    persona_settings,
)
from decflow.pipeline.contract_run.diagnostic_rows import DiagnosticRows, stored_pair_table
from decflow.pipeline.spec import RunSpec
from decflow.store.store import Manifest, Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.properties import Counterfactual

MAX_EXAMPLES = 20
MAX_LISTED = 200


def stored_pairs(store: Store, requests: Manifest) -> tuple[PairSet, dict[str, Any]] | None:
    """The stored persona pairs as a `PairSet`, with the settings they were drawn with."""
    table = stored_pair_table(store, requests)
    if table is None:
        return None
    stored = requests.extra[PERSONA_PAIRS]
    return pairs_from(table, stored["meta"]), stored["settings"]


def _run_pairs(
    store: Store, requests: Manifest, contract: Contract, config: Counterfactual,
    cases: pl.DataFrame,
) -> tuple[PairSet, dict[str, Any]]:
    """The stored persona pairs of the run's cases (a sequential run sent only some of the
    suite's). Runs stored before pairs were kept get them drawn again from this contract
    (the arms they sent then decide which of them have results)."""
    stored = stored_pairs(store, requests)
    if stored is None:
        return persona_pair_set(contract, config, cases), persona_settings(contract, config)
    pairs, settings = stored
    sent = set(cases["case_id"].to_list())
    return replace(pairs, pairs=[p for p in pairs.pairs if p.case_id in sent],
                   skipped=[s for s in pairs.skipped if s["case_id"] in sent],
                   bases={c: b for c, b in pairs.bases.items() if c in sent}), settings


def counterfactual_section(
    spec: RunSpec,
    contract: Contract,
    store: Store,
    requests: Manifest,
    cases: pl.DataFrame,
    rows: DiagnosticRows,
    meter: StabilityResult | None,
    blind: bool,
) -> tuple[dict[str, Any] | None, list[Check]]:
    """(the section, its checks) of the persona axes the contract declares."""
    config = counterfactual_config(spec, contract)
    if config is None:
        return None, []
    labels = tuple(contract.decision.labels)
    pairs, drawn_with = _run_pairs(store, requests, contract, config, cases)
    probabilities = {
        arm_fingerprint(rid): None if kind is not None else probs
        for rid, probs, kind in zip(
            rows.arms["request_id"], rows.arms["probabilities"], rows.arms["error_kind"],
            strict=True,
        )
    }
    base_blindness = _base_persona_blindness(contract, pairs, rows.arms)
    result = analyse_counterfactual(
        attach_probabilities(pairs.frame(), probabilities),
        labels,
        axes=config.dimensions,
        not_exercised=pairs.not_exercised,
        max_flip_rate=config.max_flip_rate,
        favourable_labels=config.favourable_labels,
        tau_rerun=None if meter is None else meter.tv_p95,
        max_tv_distance=config.max_tv_distance,
        blind=blind if base_blindness is None else base_blindness.blind,
        attributed=config.placebo and config.persona_pairs is None,
        rounding_seed=spec.rounding_seed,
    )
    checks = counterfactual_checks(result, config.level)
    needed = pairs.pair_arms()
    missing = sum(fp not in probabilities for fp in needed)
    changed = persona_settings(contract, config) != drawn_with
    if missing or changed:
        # Persona settings changed since the run (or it made no arm calls): its results
        # cannot stand in for arms it never sent.
        reason = (
            "the run's persona arms were drawn with other persona settings than this "
            "contract's" if changed else
            f"the run has no result for {missing} of the {len(needed)} persona arms this "
            "contract needs"
        ) + "; run it again with this contract"
        checks = [
            make_check(c.gate, c.level, c.metric, c.comparison, c.threshold, None,
                       reason_if_null=reason)
            for c in checks
        ]
    section = result.summary() | {
        "language": pairs.language,
        "catalogue_version": pairs.catalogue_version,
        "catalogue_sha256": pairs.catalogue_sha256,
        "template": pairs.template,
        "placebo": config.placebo,
        "attribution": "placebo" if config.placebo and config.persona_pairs is None
        else "unattributed",
        "base_blindness": _base_blindness_section(base_blindness),
        "arms_sent": rows.arms.height,
        "skipped_cases": pairs.skipped[:MAX_LISTED],
        "n_skipped_cases": len(pairs.skipped),
        "plan": plan(
            cases.height,
            dimensions=config.dimensions,
            num_pairs_per_dimension=config.num_pairs_per_dimension,
            placebo=config.placebo,
            max_flip_rate=config.max_flip_rate,
        ),
        "examples": _examples(result),
    }
    return section, checks


def _base_persona_blindness(
    contract: Contract, pairs: PairSet, arms: pl.DataFrame
) -> BlindnessResult | None:
    """Blindness over the cases' base-persona decisions; None when the run has none of them
    (runs stored before the base arms were sent)."""
    selected = {
        arm_fingerprint(rid): label
        for rid, label, kind in zip(
            arms["request_id"], arms["selected"], arms["error_kind"], strict=True
        )
        if kind is None
    } | {
        arm_fingerprint(rid): None
        for rid, kind in zip(arms["request_id"], arms["error_kind"], strict=True)
        if kind is not None
    }
    bases = list(pairs.bases.values())
    if not bases or any(fp not in selected for fp, _ in bases):
        return None
    config = contract.diagnostics.blindness if contract.diagnostics is not None else None
    kwargs = {} if config is None else {"threshold": config.threshold}
    return detect_blindness(
        [selected[fp] for fp, _ in bases], inputs=[fp for fp, _ in bases], **kwargs
    )


def _base_blindness_section(result: BlindnessResult | None) -> dict[str, Any]:
    if result is None:
        return {
            "measured": False,
            "note": "the run has no base-persona decisions (stored by an older decflow); "
            "the original inputs' blindness guards the persona verdicts",
        }
    return result.to_dict() | {"measured": True, "summary": describe(result)}


def _examples(result: CounterfactualResult) -> list[dict[str, Any]]:
    """Cross-group flips (fingerprints, not persona text), most distant first."""
    columns = ["axis", "pair_id", "group_a", "group_b", "selected_a", "selected_b", "tv",
               "fingerprint_a", "fingerprint_b"]
    flips = result.pairs.filter((pl.col("kind") == "cross") & pl.col("flipped")).sort(
        "tv", descending=True
    )
    return flips.select(columns).head(MAX_EXAMPLES).to_dicts()


def not_exercised_axes(section: dict[str, Any] | None) -> list[dict[str, str]]:
    """The persona axes of `section` that were not exercised (n/a, never a pass)."""
    return [{"name": f"{COUNTERFACTUAL}.{axis['axis']}", "reason": axis["note"]}
            for axis in (section or {}).get("axes", []) if axis["verdict"] == NOT_EXERCISED]
