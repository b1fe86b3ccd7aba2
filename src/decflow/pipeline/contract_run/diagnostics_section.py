"""The report's `diagnostics` section: rerun stability, blindness and counterfactual personas.

Everything is computed from the stored `cases`, `requests` and `results` tables and the
contract at hand, so re-gating a stored run recomputes the diagnostics without any call:

- the meter's series per case is the original (first draw), its `stability` reruns, then
  the `paraphrase` re-asks when the identity provider made them (rerun evidence, not a
  paraphrase test), paired consecutively and disjointly;
- blindness reads one decision per case, the original's (no extra call);
- persona pairs are read back as the requests stage stored them, and get their arms'
  probabilities from the `counterfactual` results by fingerprint.

A blind suite marks the passing property and persona checks as potentially vacuous, and
properties or axes that changed nothing are named as *not exercised* (n/a, never a pass).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import polars as pl

from decflow.contracts.sections import Stability
from decflow.diagnostics.blindness import (
    BlindnessResult,
    blindness_check,
    describe,
    detect_blindness,
    mark_vacuous,
)
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
from decflow.diagnostics.stability import (
    StabilityResult,
    measure_stability,
    oracle_guidance,
    stability_check,
)
from decflow.gates import Check, make_check
from decflow.pipeline.contract_run.derive import (
    COUNTERFACTUAL,
    PERSONA_PAIRS,
    RERUN,
    arm_fingerprint,
    counterfactual_config,
    persona_pair_set,
    persona_settings,
    stability_config,
)
from decflow.pipeline.contract_run.results import phase_result_parts
from decflow.pipeline.spec import RunSpec
from decflow.store.store import Manifest, Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.loader import LoadedContract
    from decflow.contracts.properties import Counterfactual

MAX_EXAMPLES = 20
MAX_LISTED = 200


@dataclass(frozen=True)
class DiagnosticRows:
    """The requests the diagnostics read, joined with their results."""

    originals: pl.DataFrame  # property "", one per case
    reruns: pl.DataFrame  # property "stability"
    paraphrases: pl.DataFrame  # property "paraphrase" (identity re-asks are rerun evidence)
    arms: pl.DataFrame  # property "counterfactual"


WANTED = ("", RERUN, "paraphrase", COUNTERFACTUAL)
REQUEST_COLUMNS = ["request_id", "case_id", "property", "sample", "input_text", "input_json"]
RESULT_COLUMNS = ["request_id", "selected", "probabilities", "error_kind"]


def diagnostic_rows(requests: pl.DataFrame, results: pl.DataFrame) -> DiagnosticRows:
    """The requests the diagnostics read (`REQUEST_COLUMNS`, any others ignored) joined
    with their results (`RESULT_COLUMNS`)."""
    joined = requests.filter(pl.col("property").is_in(WANTED)).select(REQUEST_COLUMNS).join(
        results.select(RESULT_COLUMNS), on="request_id", how="left")
    by = {name: joined.filter(pl.col("property") == name) for name in WANTED}
    return DiagnosticRows(by[""], by[RERUN], by["paraphrase"], by[COUNTERFACTUAL])


def stored_rows(store: Store, manifests: dict[str, Manifest]) -> DiagnosticRows:
    """The run's stored diagnostic requests joined with their results."""
    requests = store.read(manifests["requests"], REQUEST_COLUMNS,
                          where=pl.col("property").is_in(WANTED))
    columns = RESULT_COLUMNS
    # A derived request's id starts with its property's name (`derive.py`), so the
    # transformed phase's results are narrowed by prefix before the join, part by part.
    named = pl.any_horizontal(
        [pl.col("request_id").str.starts_with(f"{name}/") for name in WANTED if name]
    )
    parts = [
        store.read(phase_result_parts(manifests["results"], "originals"), columns),
        store.read(phase_result_parts(manifests["results"], "transformed"), columns, named),
    ]
    results = pl.concat([frame for frame in parts if frame.width], how="vertical")
    return diagnostic_rows(requests, results)


def _identity_reasks(rows: DiagnosticRows) -> pl.DataFrame:
    """The paraphrase requests when every one re-asked its original input unchanged."""
    if not rows.paraphrases.height:
        return rows.paraphrases
    original = rows.originals.select(
        "case_id", original_text="input_text", original_json="input_json"
    )
    joined = rows.paraphrases.join(original, on="case_id", how="left")
    same = (
        pl.col("input_text").eq_missing(pl.col("original_text"))
        & pl.col("input_json").eq_missing(pl.col("original_json"))
    )
    if not joined.select(same.all()).item():
        return rows.paraphrases.clear()
    return rows.paraphrases


def meter_input(rows: DiagnosticRows) -> pl.DataFrame | None:
    """The meter's series, or None when the run made no rerun evidence."""
    reasks = _identity_reasks(rows)
    if not rows.reruns.height and not reasks.height:
        return None
    return _meter_input(rows, reasks)


def _meter_input(rows: DiagnosticRows, reasks: pl.DataFrame) -> pl.DataFrame:
    """One series per case: original (repeat 0), reruns (their sample), then re-asks."""
    last = rows.reruns["sample"].max()
    after_reruns = (last if isinstance(last, int) else 0) + 1
    columns = ["case_id", "repeat", "selected", "probabilities", "error_kind"]
    parts = [
        rows.originals.with_columns(repeat=pl.lit(0, dtype=pl.Int64)),
        rows.reruns.with_columns(repeat=pl.col("sample")),
        reasks.with_columns(repeat=pl.col("sample") + after_reruns),
    ]
    return pl.concat([p.select(columns) for p in parts], how="vertical")


def _stability(
    spec: RunSpec, contract: Contract, rows: DiagnosticRows
) -> tuple[dict[str, Any] | None, StabilityResult | None, list[Check]]:
    config = stability_config(spec, contract)
    reasks = _identity_reasks(rows)
    if config is None and not reasks.height:
        return None, None, []
    if config is not None and not rows.reruns.height and not reasks.height:
        reason = "the run made no stability reruns; run it again with this contract"
        check = make_check(
            "stability.verdict", config.level, "stability.ci_low", "<=", config.epsilon, None,
            reason_if_null=reason,
        )
        return None, None, [check]
    epsilon = config.epsilon if config is not None else Stability().epsilon
    result = measure_stability(_meter_input(rows, reasks), epsilon=epsilon,
                               rounding_seed=spec.rounding_seed)
    section = result.to_dict() | {
        "configured": config is not None,
        "sources": {"reruns": rows.reruns.height, "identity_paraphrase": reasks.height},
    }
    if config is None:
        section["note"] = (
            "measured from the identity paraphrase re-asks only; add diagnostics.stability "
            "to make reruns and gate on the verdict"
        )
        return section, result, []
    return section, result, [stability_check(result, config.level)]


def _blindness(
    contract: Contract, table: pl.DataFrame
) -> tuple[dict[str, Any], BlindnessResult, list[Check]]:
    config = contract.diagnostics.blindness if contract.diagnostics is not None else None
    inputs = list(zip(table["input_text"].to_list(), table["input_json"].to_list(), strict=True))
    kwargs = {} if config is None else {"threshold": config.threshold}
    result = detect_blindness(table["selected"].to_list(), inputs=inputs, **kwargs)
    section = result.to_dict() | {"configured": config is not None, "summary": describe(result)}
    checks = [] if config is None else [blindness_check(result, config.level)]
    return section, result, checks


def stored_pair_table(store: Store, requests: Manifest) -> pl.DataFrame | None:
    """The table of persona pairs (`pair_storage.pair_table`) the run's requests stage drew
    for the whole suite and stored (None: the run stored none)."""
    stored = requests.extra.get(PERSONA_PAIRS)
    return None if stored is None else store.read(Manifest.from_dict(stored["manifest"]))


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


def _counterfactual(
    spec: RunSpec,
    contract: Contract,
    store: Store,
    requests: Manifest,
    cases: pl.DataFrame,
    rows: DiagnosticRows,
    meter: StabilityResult | None,
    blind: bool,
) -> tuple[dict[str, Any] | None, list[Check]]:
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


def _not_exercised(
    properties: dict[str, Any] | None, counterfactual: dict[str, Any] | None
) -> list[dict[str, str]]:
    named = []
    for summary in (properties or {}).get("summaries", []):
        if summary.get("rerun_evidence"):
            named.append({
                "name": summary["property"],
                "reason": "the identity provider re-asks the unchanged input: rerun evidence "
                "for the stability meter, not a paraphrase test",
            })
        elif not summary.get("n_evaluated"):
            named.append({"name": summary["property"], "reason": "no transformed case compared"})
    for axis in (counterfactual or {}).get("axes", []):
        if axis["verdict"] == NOT_EXERCISED:
            named.append({"name": f"{COUNTERFACTUAL}.{axis['axis']}", "reason": axis["note"]})
    return named


def _caveats(
    blindness: BlindnessResult, vacuous: int, not_exercised: list[dict[str, str]]
) -> list[str]:
    caveats = []
    if blindness.blind:
        caveats.append(
            f"BLIND: {blindness.skew:.0%} of inputs get '{blindness.modal_label}'; "
            f"{vacuous} passing property/persona check(s) are potentially vacuous"
        )
    if not_exercised:
        names = ", ".join(item["name"] for item in not_exercised)
        caveats.append(f"NOT EXERCISED (n/a, not a pass): {names}")
    return caveats


def _guidance(contract: Contract, meter: StabilityResult | None, blind: BlindnessResult) -> str:
    configured = contract.diagnostics is not None and contract.diagnostics.stability is not None
    if meter is None and configured and not blind.blind:
        return (
            "NOT MEASURED — this mode makes no reruns; `decflow test --all` or "
            "`decflow stability` measures the rerun noise."
        )
    return oracle_guidance(meter, blind)


def diagnostics_section(
    loaded: LoadedContract,
    spec: RunSpec,
    store: Store,
    manifests: dict[str, Manifest],
    table: pl.DataFrame,
    properties: dict[str, Any] | None,
    checks: list[dict[str, Any]],
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the section, every check of the report with the diagnostics' own appended and the
    blind suite's passes marked); None when the mode runs no diagnostics (`test`)."""
    if not spec.run_mode.fills("diagnostics"):
        return None, checks
    contract = loaded.contract
    rows = stored_rows(store, manifests)
    cases = store.read(manifests["cases"])
    stability, meter, stability_checks = _stability(spec, contract, rows)
    blindness, blind, blindness_checks = _blindness(contract, table)
    counterfactual, persona_checks = _counterfactual(
        spec, contract, store, manifests["requests"], cases, rows, meter, blind.blind
    )
    own = stability_checks + blindness_checks + persona_checks
    before = [Check.from_dict(c) for c in checks] + own
    after = mark_vacuous(before, blind)
    vacuous = sum(a.message != b.message for a, b in zip(after, before, strict=True))
    not_exercised = _not_exercised(properties, counterfactual)
    section = {
        "guidance": _guidance(contract, meter, blind),
        "stability": stability,
        "blindness": blindness,
        "counterfactual": counterfactual,
        "not_exercised": not_exercised,
        "caveats": _caveats(blind, vacuous, not_exercised),
    }
    return section, [c.to_dict() for c in after]
