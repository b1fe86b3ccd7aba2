"""Greedy, bounded minimisation of failing transformed cases.

From the current best step list, smaller candidates are enumerated in a fixed order; no-ops
are skipped without cost; each candidate sent costs one call (errors are ignored); the
first candidate that still violates becomes the new best and enumeration restarts. It
stops when no candidate violates or `max_calls` calls are spent. Only a found reduction is
reported (`reduced` is None otherwise), together with the calls spent either way.

Many failing cases are shrunk together: each round sends one candidate per unfinished case
in a single `decide` batch, which keeps every case's sequence (and call count) exactly as
if it were shrunk alone.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from decflow.metrics.compare import Limits, compare, judge
from decflow.properties.base import Input, Presentation, Step
from decflow.properties.generate import apply_steps, transformation

if TYPE_CHECKING:
    from decflow.contracts.properties import PropertyConfig

Probabilities = np.ndarray
Candidate = tuple[Input, Presentation]
Decide = Callable[[list[Candidate]], Sequence[Probabilities | None]]
Judge = Callable[[Probabilities, Probabilities], tuple[dict[str, Any], list[str]]]


@dataclass(slots=True)
class ShrinkJob:
    """One failing transformed case; `original` = the original case's probabilities."""

    property_name: str
    steps: list[Step]
    original_input: Input
    original: Probabilities
    judge: Judge


@dataclass(slots=True)
class Shrunk:
    reduced: dict[str, Any] | None
    backend_calls: int


def make_judge(
    config: PropertyConfig, relation: str, decision_type: str, labels: Sequence[str],
    direction: str,
) -> Judge:
    """Judge one candidate against its original with the property's limits."""
    limits = Limits.of(config, relation)

    def run(p: Probabilities, q: Probabilities) -> tuple[dict[str, Any], list[str]]:
        found = compare(
            p[None, :],
            q[None, :],
            relation=relation,
            decision_type=decision_type,
            direction=direction,
        )
        verdict = judge(found, limits, relation=relation, labels=labels, direction=direction)
        return found.row(0, labels), verdict.violations[0]

    return run


def smaller(property_name: str, steps: list[Step], labels: Sequence[str]) -> Iterator[list[Step]]:
    """Candidate step lists one step smaller than `steps`, in DecGuard's order (the
    property's own `shrink`; none for a property whose cases are not minimised)."""
    shrink = transformation(property_name).shrink
    return iter(()) if shrink is None else shrink(steps, labels)


def _shrink(
    job: ShrinkJob,
    labels: Sequence[str],
    text_field: str | None,
    max_calls: int,
) -> Generator[Candidate, Probabilities | None, Shrunk]:
    best = job.steps
    reduced: dict[str, Any] | None = None
    calls = 0
    improved = True
    while improved:
        improved = False
        for steps in smaller(job.property_name, best, labels):
            new_input, presentation = apply_steps(
                job.property_name, steps, job.original_input, labels, text_field
            )
            if presentation is None and new_input == job.original_input:
                continue
            if calls >= max_calls:
                return Shrunk(_with_calls(reduced, calls), calls)
            q = yield (new_input, presentation)
            calls += 1
            if q is None:
                continue
            comparison, violations = job.judge(job.original, q)
            if violations:
                best = steps
                reduced = {
                    "steps": steps,
                    "input": new_input,
                    "presentation": presentation,
                    "probabilities": q,
                    "comparison": comparison,
                    "violations": violations,
                }
                improved = True
                break
    return Shrunk(_with_calls(reduced, calls), calls)


def _with_calls(reduced: dict[str, Any] | None, calls: int) -> dict[str, Any] | None:
    return None if reduced is None else {**reduced, "backend_calls": calls}


def minimize_many(
    jobs: Sequence[ShrinkJob],
    decide: Decide,
    *,
    labels: Sequence[str],
    text_field: str | None,
    max_calls: int,
) -> list[Shrunk]:
    """Shrink every job; properties that are not shrunk give `Shrunk(None, 0)`."""
    results: list[Shrunk | None] = [None] * len(jobs)
    runs: dict[int, Generator[Candidate, Probabilities | None, Shrunk]] = {}
    pending: dict[int, Candidate] = {}
    for i, job in enumerate(jobs):
        if transformation(job.property_name).shrink is None:
            results[i] = Shrunk(None, 0)
            continue
        runs[i] = _shrink(job, labels, text_field, max_calls)
        _advance(runs, i, None, pending, results, first=True)
    while pending:
        batch = list(pending.items())
        pending = {}
        answers = decide([candidate for _i, candidate in batch])
        for (i, _candidate), q in zip(batch, answers, strict=True):
            _advance(runs, i, q, pending, results, first=False)
    return [r if r is not None else Shrunk(None, 0) for r in results]


def _advance(
    runs: dict[int, Generator[Candidate, Probabilities | None, Shrunk]],
    i: int,
    answer: Probabilities | None,
    pending: dict[int, Candidate],
    results: list[Shrunk | None],
    *,
    first: bool,
) -> None:
    try:
        pending[i] = next(runs[i]) if first else runs[i].send(answer)
    except StopIteration as done:
        results[i] = done.value


def minimize(
    job: ShrinkJob,
    decide: Decide,
    *,
    labels: Sequence[str],
    text_field: str | None,
    max_calls: int,
) -> Shrunk:
    """Shrink one failing transformed case."""
    return minimize_many([job], decide, labels=labels, text_field=text_field, max_calls=max_calls)[
        0
    ]
