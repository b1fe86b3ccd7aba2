"""The blindness detector: does the probe set ever make the decision change?

Skew is the share of the most common selected label over one decision per input (the first
draw, so it costs no extra call). A suite at or above the threshold is *blind*: invariance
properties and persona axes can hold without the decision ever being near a boundary, so
their passes say little. This is a warning about the suite's power, not about correctness.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from decflow.gates.checks import Check, Level, make_check

DEFAULT_THRESHOLD = 0.9

# Gates whose passes a blind suite makes potentially vacuous: everything that compares a
# changed input with its original (properties and persona axes), not golden metrics.
_DIAGNOSTIC_PREFIXES = ("stability.", "blindness.")


@dataclass(frozen=True)
class BlindnessResult:
    n: int
    skew: float | None
    modal_label: str | None
    distinct: int
    threshold: float
    blind: bool
    duplicates_dropped: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def detect_blindness(
    labels: Sequence[str | None],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    inputs: Sequence[Hashable] | None = None,
) -> BlindnessResult:
    """Modal-label share over first draws; blind when skew ≥ threshold (inclusive).

    ``labels`` holds one selected label per case, None for a case whose first draw errored
    (left out). ``inputs``, when given, are the cases' inputs in the same order: repeated
    inputs are counted once (the first occurrence), because copies of one question inflate
    the skew. With one decided input the suite is always blind.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"blindness threshold must be in (0, 1], got {threshold}")
    if inputs is not None and len(inputs) != len(labels):
        raise ValueError("labels and inputs must have the same length")
    seen: set[Hashable] = set()
    kept: list[str] = []
    dropped = 0
    for i, label in enumerate(labels):
        if inputs is not None:
            if inputs[i] in seen:
                dropped += 1
                continue
            seen.add(inputs[i])
        if label is not None:
            kept.append(label)
    if not kept:
        return BlindnessResult(0, None, None, 0, threshold, False, dropped)
    # Counter keeps first-seen order, so a tie goes to the label seen first.
    modal, count = Counter(kept).most_common(1)[0]
    skew = count / len(kept)
    distinct = len(set(kept))
    return BlindnessResult(len(kept), skew, modal, distinct, threshold, skew >= threshold, dropped)


def describe(result: BlindnessResult) -> str:
    if result.skew is None:
        return "blindness could not be computed (no decided case)"
    share = f"{result.skew:.1%} '{result.modal_label}' on {result.n} inputs"
    if result.blind:
        return (
            f"blind: {share} (threshold {result.threshold:g}); passes of "
            "properties and persona axes may be vacuous because the inputs rarely cross "
            "a decision boundary"
        )
    return f"ok: {share}, {result.distinct} distinct labels"


def blindness_check(result: BlindnessResult, level: Level) -> Check:
    """`blindness.max_skew`: skew must stay strictly below the threshold (9 of 10 at 0.9 is
    blind); a suite with no decided case fails, since it shows nothing."""
    suffix = (
        ""
        if result.skew is None
        else f" ('{result.modal_label}' on {result.n} inputs, {result.distinct} distinct)"
    )
    return make_check(
        "blindness.max_skew",
        level,
        "blindness.skew",
        "<",
        result.threshold,
        result.skew,
        reason_if_null="no decided case",
        suffix=suffix,
    )


def mark_vacuous(checks: Iterable[Check], result: BlindnessResult) -> list[Check]:
    """The checks, with a note on the passing property and persona checks of a blind suite.

    Only the message changes, so every check keeps its status. Error-rate checks say that
    the cases were answered, which blindness does not weaken, so they get no note.
    """
    if not result.blind:
        return list(checks)
    note = f" (potentially vacuous: the suite is blind, {result.skew:.0%} '{result.modal_label}')"
    return [
        replace(check, message=check.message + note)
        if check.status == "pass"
        and "." in check.gate
        and not check.gate.startswith(_DIAGNOSTIC_PREFIXES)
        and not check.gate.endswith(".max_error_rate")
        else check
        for check in checks
    ]
