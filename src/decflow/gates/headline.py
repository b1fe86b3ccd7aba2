"""The one line that leads every view of a report (text, Markdown, HTML, Prefect state
message, JSON ``headline``, JUnit): the verdict and the gates that decided it. One grammar
(PRODUCT §4, "Headlines")::

    STATUS N/M[ (K WARN)][ (qualifier: detail)]…: gate value op limit; …

N counts the gates of the verdict's own status (FAIL: the failing requirements; WARN: the
failing warnings and the not-established gates) out of M, K the warnings and
not-established gates beside a FAIL, and each `Qualifier` says what a reader must know about
the verdict. A verdict with no open gate ends in ``M/M gates hold``::

    FAIL 1/15 (4 WARN): max_ece 0.175 > 0.15; max_brier 0.31 > 0.2 (warning); …
    WARN 1/18: counterfactual.gender.max_flip_rate not established (about 40 cases needed)
    PASS: 18/18 gates hold
    PASS (zero_limit: max_error_rate judged at 0.02, 0 of 248 sent): 2/2 gates hold

``number`` is the one formatter for gate values in every view: at most four significant
digits, whole numbers from 1,000 up, never ``-0``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from decflow.gates.checks import Check
from decflow.metrics.evidence import CONTRADICTED, Evidence

MAX_ITEMS = 4
NEGATED = {">=": "<", "<=": ">", "<": ">="}
# Failing requirements first, then failing warnings, then the undecided.
ORDER = {"fail": 0, "warn": 1, "not_established": 2, "pass": 3}


def number(value: float | None) -> str:
    """A gate value for display: ``0.175``, ``0.8182``, ``1234``, ``n/a``; never ``-0``."""
    if value is None:
        return "n/a"
    value = float(value)
    if value != value:  # NaN never reaches a stored report, but a view must not crash
        return "nan"
    text = f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def bounds(low: float | None, high: float | None) -> str:
    """An interval for display: ``[0.01, 0.2]``, an unknown end ``n/a``."""
    return f"[{number(low)}, {number(high)}]"


def e_value(value: float | None) -> str:
    """An e-value for display: as `number` below a million, then as a power of ten
    (``3.2e+15``): past 1/alpha its size only says how far past, and sixteen digits hide
    the decision."""
    if value is not None and abs(float(value)) >= 1e6:
        return f"{float(value):.2g}"
    return number(value)


def _as_check(check: Check | Mapping[str, Any]) -> Check:
    return check if isinstance(check, Check) else Check.from_dict(check)


def brief(check: Check) -> str:
    """One headline item for a check that does not pass."""
    if check.status == "not_established":
        evidence = check.evidence
        needed = None if evidence is None else evidence.cases_needed
        detail = f" (about {needed} cases needed)" if needed is not None else ""
        return f"{check.gate} not established{detail}"
    suffix = " (warning)" if check.level == "warning" else ""
    if check.value is None:
        return f"{check.gate} n/a{suffix}"
    op = NEGATED.get(check.comparison, "vs")
    shown = _shown(check.value, check.evidence)
    return f"{check.gate} {shown} {op} {number(check.threshold)}{suffix}"


def _shown(value: float, evidence: Evidence | None) -> str:
    if evidence is not None and CONTRADICTED in evidence.notes:
        return f"{number(value)} ({CONTRADICTED})"
    if evidence is None or evidence.low is None or evidence.high is None:
        return number(value)
    return f"{number(value)} [{number(evidence.low)}, {number(evidence.high)}]"


class Judged(Protocol):
    """A check as gates and reports hold it (`Check`, a report model's check row)."""

    @property
    def status(self) -> str: ...


Shown = TypeVar("Shown", bound=Judged | Mapping[str, Any])


def failing_first(checks: Iterable[Shown]) -> list[Shown]:
    """The checks in display order: fail, warn, not established, pass (stable in a group)."""
    listed = list(checks)
    return sorted(listed, key=lambda c: ORDER.get(
        c["status"] if isinstance(c, Mapping) else c.status, len(ORDER)))


@dataclass(frozen=True)
class Qualifier:
    """What a reader must know about a verdict, shown in its headline after the counts as
    ``(name: detail)``: ``Qualifier("zero_limit", "max_error_rate judged at 0.02, 0 of 248
    sent")``, ``Qualifier("underpowered", "min_accuracy lower bound 0.37")``,
    ``Qualifier("not diffed", "no accepted baseline …")``. It never changes the verdict."""

    name: str
    detail: str

    def __str__(self) -> str:
        return f"({self.name}: {self.detail})"

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Qualifier:
        return cls(str(data["name"]), str(data["detail"]))


def gate_counts(status: str, checks: Sequence[Judged]) -> str:
    """``N/M[ (K WARN)]``: the gates of the verdict's status out of all, and beside a FAIL
    the warnings and not-established gates (which show as WARN)."""
    total = len(checks)
    failing = sum(c.status == "fail" for c in checks)
    warning = sum(c.status in ("warn", "not_established") for c in checks)
    if status == "fail":
        return f"{failing}/{total}" + (f" ({warning} WARN)" if warning else "")
    if status == "warn":
        return f"{warning}/{total}"
    return f"{total - failing - warning}/{total}"


def headline(
    status: str,
    checks: Sequence[Check | Mapping[str, Any]],
    *,
    item: Callable[[Check], str] = brief,
    qualifiers: Sequence[Qualifier] = (),
    label: str | None = None,
) -> str:
    """The report's first line from its status, checks and qualifiers (see the module
    docstring). `item` writes one open check (a diff phrases its evidence gates as
    decisions); `label` is the status as shown when it says more than the status (a
    monitor's ``ALARM since 2026-11-04``)."""
    judged = [_as_check(c) for c in checks]
    open_ = [c for c in failing_first(judged) if c.status != "pass"]
    lead = label if label is not None else status.upper()
    shown = "".join(f" {q}" for q in qualifiers)
    if not judged:
        return f"{lead}{shown}: no gates"
    if not open_:
        return f"{lead}{shown}: {len(judged)}/{len(judged)} gates hold"
    items = [item(c) for c in open_[:MAX_ITEMS]]
    more = len(open_) - MAX_ITEMS
    tail = f"; +{more} more" if more > 0 else ""
    return f"{lead} {gate_counts(status, judged)}{shown}: " + "; ".join(items) + tail
