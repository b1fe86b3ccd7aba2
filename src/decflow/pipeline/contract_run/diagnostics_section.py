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
from decflow.diagnostics.stability import (
    StabilityResult,
    measure_stability,
    oracle_guidance,
    stability_check,
)
from decflow.gates import Check, make_check
from decflow.pipeline.contract_run.derive import (
    counterfactual_config,
    stability_config,
)
from decflow.pipeline.contract_run.diagnostic_rows import DiagnosticRows, stored_rows
from decflow.pipeline.spec import RunSpec
from decflow.store.store import Manifest, Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.loader import LoadedContract

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


def _not_exercised(
    properties: dict[str, Any] | None, axes: list[dict[str, str]]
) -> list[dict[str, str]]:
    """The properties that compared nothing, then the persona `axes` that were not
    exercised."""
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
    return named + axes


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
    counterfactual: dict[str, Any] | None = None
    persona_checks: list[Check] = []
    axes: list[dict[str, str]] = []
    if counterfactual_config(spec, contract) is not None:
        # persona pairs and their verdicts load only for a contract that declares them
        from decflow.pipeline.contract_run import counterfactual_section as persona

        counterfactual, persona_checks = persona.counterfactual_section(
            spec, contract, store, manifests["requests"], cases, rows, meter, blind.blind
        )
        axes = persona.not_exercised_axes(counterfactual)
    own = stability_checks + blindness_checks + persona_checks
    before = [Check.from_dict(c) for c in checks] + own
    after = mark_vacuous(before, blind)
    vacuous = sum(a.message != b.message for a, b in zip(after, before, strict=True))
    not_exercised = _not_exercised(properties, axes)
    section = {
        "guidance": _guidance(contract, meter, blind),
        "stability": stability,
        "blindness": blindness,
        "counterfactual": counterfactual,
        "not_exercised": not_exercised,
        "caveats": _caveats(blind, vacuous, not_exercised),
    }
    return section, [c.to_dict() for c in after]
