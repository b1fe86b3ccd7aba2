"""Report keys as words for the HTML and Markdown views: `calls_made` is "backend calls
sent", `mean_tv_distance` "mean TV distance", `with_correctness` "with a correctness
label". Gate names stay as written (they are what a contract says); metric and count keys
are read by people. A key not listed reads as its parts, abbreviations spelled as they are
printed elsewhere (ECE, TV, ms)."""

from __future__ import annotations

KEYS = {
    "n": "records",
    "calls_made": "backend calls sent",
    "calls_full": "backend calls of the full suite",
    "calls_from_cache": "answers from the call cache",
    "cases_sent": "cases sent",
    "suite_cases": "cases in the suite",
    "stop_reason": "stopped because",
    "seconds_saved": "time saved (s)",
    "money_saved": "money saved",
    "price_per_call": "price per call",
    "alpha": "error rate α",
    "alpha_per_gate": "α per gate",
    "seed": "order seed",
    "seed_from": "order seed derived from (call cache on)",
    "batch": "cases per batch",
    "with_outcome": "with an outcome",
    "with_correctness": "with a correctness label",
    "with_action": "with an action",
    "with_fallback": "with a fallback flag",
    "with_latency": "with a latency",
    "with_cost": "with a cost",
    "n_actions": "actions",
    "n_fallback": "fallbacks",
    "n_label_outcomes": "with a label outcome",
    "latency_ms": "latency (ms)",
    "macro_f1": "macro-F1",
    "matched": "cases in both",
}
PARTS = {"brier": "Brier", "ece": "ECE", "nll": "NLL", "tv": "TV", "js": "JS", "ms": "(ms)",
         "abs": "absolute", "f1": "F1", "mae": "MAE"}


def words(key: str) -> str:
    """A report key as words (see the module docstring)."""
    if key in KEYS:
        return KEYS[key]
    return " ".join(PARTS.get(part, part) for part in key.split("_") if part)
