"""Evidence beside DecGuard's point-estimate production verdicts (`check` of a DecGuard 0.1
contract, `production.gating: point`): the headline's `underpowered` qualifier.

A point verdict passes a gate on the observed value. It is *underpowered* when the evidence
beside it — the one-sided (1 − α) bound on the side a pass needs shown, the one the
evidence-gated check would judge by — does not clear the limit: `min_accuracy lower bound
0.4729` on 4 records. Only the bound is computed (for rates the exact Clopper–Pearson bound,
else the evidence test's own bound), never a planning figure, so the qualifier costs
microseconds per gate. Verdicts, checks and exit codes stay DecGuard's; a limit-0 rate gate
(or a minimum of 1) is a count and always established.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from decflow.contracts.gates import PRODUCTION_GATES
from decflow.data.records.rules import shown_segment_value
from decflow.gates.checks import Check
from decflow.gates.headline import MAX_ITEMS, Qualifier, number
from decflow.gates.production_evidence import metric_test
from decflow.metrics.binomial import clopper_pearson_high, clopper_pearson_low
from decflow.metrics.evidence import ALPHA, UNDERPOWERED
from decflow.metrics.production import Metrics

_cp_low = lru_cache(maxsize=4096)(clopper_pearson_low)
_cp_high = lru_cache(maxsize=4096)(clopper_pearson_high)


def pass_bound(metric: str, comparison: str, limit: float, metrics: Metrics,
               baseline: Metrics | None, *, alpha: float = ALPHA) -> float | None:
    """The one-sided (1 − α) bound of a production metric on the side a pass needs shown
    (upper for `<=`, lower for `>=`); None when it cannot be computed or the gate is a
    count (nothing to infer)."""
    upper = comparison == "<="
    rate = next((entry.rate for entry in PRODUCTION_GATES.entries()
                 if entry.metric == metric and entry.rate is not None), None)
    if rate is not None:
        section = metrics.get(rate.section)
        if not section or section.get(rate.key) is None or not section.get(rate.size):
            return None
        if limit <= 0.0 or limit >= 1.0:
            return None
        n = int(section[rate.size])
        count = round(float(section[rate.key]) * n)
        return _cp_high(count, n, alpha) if upper else _cp_low(count, n, alpha)
    test = metric_test(metric, comparison, limit, metrics, baseline, alpha=alpha)
    if test is None:
        return None
    return test.high if upper else test.low


def _sources(metrics: Metrics, segments: Sequence[Mapping[str, Any]]) -> dict[str, Metrics]:
    """Each check prefix's metrics: the aggregate's (no prefix) and each segment's."""
    out: dict[str, Metrics] = {"": metrics}
    for entry in segments:
        out[f"segment[{entry['key']}={shown_segment_value(entry['value'])}]."] = entry["metrics"]
    return out


def underpowered_point_checks(checks: Sequence[Check], metrics: Metrics,
                              baseline: Metrics | None,
                              segments: Sequence[Mapping[str, Any]]) -> Qualifier | None:
    """``(underpowered: min_accuracy lower bound 0.4729, …)``: the point checks that pass on
    their observed value while their bound does not clear the limit (the first `MAX_ITEMS`
    named, then how many more)."""
    sources = _sources(metrics, segments)
    prefixes = sorted(sources, key=len, reverse=True)
    items = []
    for check in checks:
        if check.status != "pass" or check.evidence is not None:
            continue
        prefix = next(p for p in prefixes if check.gate.startswith(p))
        bound = pass_bound(check.metric[len(prefix):], check.comparison, check.threshold,
                           sources[prefix], baseline if not prefix else None)
        if bound is None:
            continue
        upper = check.comparison == "<="
        if (bound > check.threshold) if upper else (bound < check.threshold):
            items.append(f"{check.gate} {'upper' if upper else 'lower'} bound {number(bound)}")
    if not items:
        return None
    more = len(items) - MAX_ITEMS
    return Qualifier(UNDERPOWERED, ", ".join(items[:MAX_ITEMS])
                     + (f", +{more} more" if more > 0 else ""))


def point_qualifiers(status: str, checks: Sequence[Check], metrics: Metrics,
                     baseline: Metrics | None,
                     segments: Sequence[Mapping[str, Any]]) -> list[Qualifier]:
    """A check report's headline qualifiers: `underpowered` on a PASS or WARN (a FAIL stands
    whatever its passing gates rest on)."""
    if status == "fail":
        return []
    found = underpowered_point_checks(checks, metrics, baseline, segments)
    return [] if found is None else [found]
