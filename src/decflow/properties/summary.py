"""Per-property summaries (`properties.summaries[]`) and property checks.

Inputs are columns over the transformed cases of one property: the error kind of each
transformed case (None when it has a result) and, for the evaluated ones, the comparison
and judgement columns. Means use exact summation (`math.fsum`) in row order.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from decflow.contracts.properties import PropertyConfig
from decflow.gates.checks import Check, make_check
from decflow.metrics.case_rates import rate_test, shares_by_case
from decflow.metrics.compare import Comparison, Judgement, Limits, level_decrease
from decflow.metrics.evidence import UNDERPOWERED, Evidence, count_evidence
from decflow.metrics.rounded_shares import ROUNDED, ROUNDED_NOTE, uniforms

NOT_TRANSFORMED = "no case could be transformed"
NOT_RUN = "the property was not run"
NOT_EVALUATED = "no transformed case has a result"


def _max(values: np.ndarray) -> float | None:
    return float(values.max()) if len(values) else None


def property_summary(
    property_name: str,
    *,
    level: str,
    relation: str,
    n_cases: int,
    n_skipped: int,
    error_kinds: Sequence[str | None],
    comparison: Comparison,
    judgement: Judgement,
    n_reduced: int,
    direction: str = "increasing",
) -> dict[str, Any]:
    """The summary dict, keys in DecGuard's order; `comparison` covers evaluated cases only."""
    errors = Counter(kind for kind in error_kinds if kind is not None)
    n_errors = sum(errors.values())
    n_evaluated = len(comparison)
    if len(error_kinds) - n_errors != n_evaluated:
        raise ValueError("comparison rows must be the transformed cases without an error")
    n_violations = int(judgement.limit_violated.sum())
    n_flips = int(comparison.flipped.sum())
    rate = (lambda count: count / n_evaluated) if n_evaluated else (lambda _count: None)
    decrease = None
    if relation == "monotonic" and n_evaluated:
        decrease = float(level_decrease(comparison, direction).max())
    return {
        "property": property_name,
        "level": level,
        "relation": relation,
        "n_cases": n_cases,
        "n_transformed": len(error_kinds),
        "n_skipped": n_skipped,
        "n_errors": n_errors,
        "errors_by_kind": dict(sorted(errors.items())),
        "n_evaluated": n_evaluated,
        "n_violations": n_violations,
        "violation_rate": rate(n_violations),
        "n_flips": n_flips,
        "flip_rate": rate(n_flips),
        "mean_tv_distance": math.fsum(comparison.tv.tolist()) / n_evaluated
        if n_evaluated
        else None,
        "max_tv_distance": _max(comparison.tv),
        "max_js_divergence": _max(comparison.js),
        "max_abs_delta": _max(comparison.max_abs_delta),
        "max_abs_confidence_delta": _max(np.abs(comparison.confidence_delta)),
        "max_level_decrease": decrease,
        "n_reduced": n_reduced,
    }


def property_checks(
    summary: dict[str, Any] | None, property_name: str, config: PropertyConfig, relation: str
) -> list[Check]:
    """The checks of one enabled property; `summary` None means the property did not run."""
    level = config.level
    n_transformed = summary["n_transformed"] if summary else 0
    error_rate = summary["n_errors"] / n_transformed if summary and n_transformed else None
    checks = [
        make_check(
            f"{property_name}.max_error_rate",
            "requirement",
            f"{property_name}.error_rate",
            "<=",
            0.0,
            error_rate,
            reason_if_null=NOT_TRANSFORMED if summary else NOT_RUN,
        )
    ]
    limits = Limits.of(config, relation)
    per_case = limits.per_case()
    if per_case:
        listed = ", ".join(f"{key} {value:g}" for key, value in per_case)
        checks.append(
            make_check(
                f"{property_name}.max_violation_rate",
                level,
                f"{property_name}.violation_rate",
                "<=",
                getattr(config, "max_violation_rate", 0.0),
                summary["violation_rate"] if summary else None,
                reason_if_null=_null_reason(summary),
                suffix=f" (per case: {listed})",
            )
        )
    if limits.max_flip_rate is not None:
        checks.append(
            make_check(
                f"{property_name}.max_flip_rate",
                level,
                f"{property_name}.flip_rate",
                "<=",
                limits.max_flip_rate,
                summary["flip_rate"] if summary else None,
                reason_if_null=_null_reason(summary),
            )
        )
    return checks


def rate_evidence(
    property_name: str,
    config: Any,
    relation: str,
    case_ids: Sequence[str] | np.ndarray,
    violated: np.ndarray,
    flipped: np.ndarray,
    *,
    rounding_seed: int | None = None,
) -> list[dict[str, Any]]:
    """What each gated rate of one property rests on, beside DecGuard's unchanged checks.

    One row per evaluated transformed case (``case_ids``, ``violated``, ``flipped``). The
    case is the sampling unit: option_order, label_format and monotonic give several
    variants of one case, and the variants of a case fail together, so each case contributes
    its share of violating variants and the bounds are on the mean of those shares
    (``decflow.metrics.case_rates``: exact binomial with one variant per case, otherwise on
    the shares randomly rounded with the uniforms of ``rounding_seed``, or Bentkus's bound
    for a run recorded without one). The verdict itself stays DecGuard's (rate against limit); the
    evidence says how far it can be trusted: with a limit above 0, a pass the evidence does
    not establish is *underpowered*, with the cases that would establish it at the observed
    rate; with limit 0 the gate is a count, and "0 of n cases" shows its exact upper bound.
    """
    if not len(case_ids):
        return []
    limits = Limits.of(config, relation)
    gated = []
    if limits.per_case():
        gated.append(("max_violation_rate", violated, getattr(config, "max_violation_rate", 0.0)))
    if limits.max_flip_rate is not None:
        gated.append(("max_flip_rate", flipped, limits.max_flip_rate))
    ids, codes = np.unique(np.asarray(case_ids, dtype=object).astype(str), return_inverse=True)
    out = []
    for gate, hits, limit in gated:
        hits = np.asarray(hits, dtype=bool)
        shares, most = shares_by_case(codes, hits)
        count, variants, cases = int(hits.sum()), int(hits.size), int(shares.size)
        cases_hit = int((shares > 0).sum())
        passed = count / variants <= limit
        if limit == 0:
            evidence = count_evidence(cases_hit, cases)
            statement = f"{count} of {variants} variants over {cases} cases" + (
                f", upper bound {evidence.high:.3f}" if not count else "")
        else:
            draws = None if rounding_seed is None else uniforms(
                rounding_seed, f"{property_name}.{gate}", ids.tolist())
            test = rate_test(shares, most, limit, uniforms=draws)
            underpowered = passed and test.verdict() != "holds"
            evidence = test.evidence(notes=(UNDERPOWERED,) if underpowered else ())
            statement = _rate_statement(evidence, count, variants, limit, underpowered)
        out.append({
            "gate": f"{property_name}.{gate}",
            "count": count,
            "variants": variants,
            "n": cases,
            "rate": count / variants,
            "limit": limit,
            "ci_low": evidence.low,
            "ci_high": evidence.high,
            "underpowered": UNDERPOWERED in evidence.notes,
            "cases_needed": evidence.cases_needed if UNDERPOWERED in evidence.notes else None,
            "statement": statement,
            "evidence": evidence.to_dict(),
        })
    return out


def _rate_statement(
    evidence: Evidence, count: int, variants: int, limit: float, underpowered: bool
) -> str:
    counts = f"{count} of {variants} variants over {evidence.n} cases"
    rounded = f", {ROUNDED_NOTE}" if evidence.method == ROUNDED else ""
    interval = f"[{evidence.low:.3f}, {evidence.high:.3f}] (95% per side, case as unit{rounded})"
    if not underpowered:
        return f"{counts}, {interval}"
    more = (
        f"; about {evidence.cases_needed} cases at this rate would show it below the limit"
        if evidence.cases_needed is not None else "; at this rate no number of cases shows it"
    )
    return f"underpowered: {counts}, {interval} does not show it below {limit:g}{more}"


def _null_reason(summary: dict[str, Any] | None) -> str:
    if summary is None:
        return NOT_RUN
    return NOT_TRANSFORMED if summary["n_transformed"] == 0 else NOT_EVALUATED
