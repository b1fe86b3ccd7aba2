"""option_order: present the contract labels in another order (position bias).

Step: `{"order": [contract label indices in shown order]}`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import permutations
from typing import TYPE_CHECKING

from decflow.properties.base import (
    SKIP_NO_CHANGE,
    Generated,
    Input,
    Original,
    Presentation,
    Step,
    Transformation,
    Transformed,
)
from decflow.properties.stream import Stream

if TYPE_CHECKING:
    from decflow.contracts.properties import OptionOrder

# Up to this many labels every non-identity permutation is listed and sampled.
_ENUMERATE_UP_TO = 6
_MAX_SHUFFLES = 1000


@lru_cache(maxsize=16)
def _orders(n: int) -> tuple[tuple[int, ...], ...]:
    """Every non-identity permutation of n labels, in lexicographic order."""
    return tuple(permutations(range(n)))[1:]


@lru_cache(maxsize=4096)
def _steps(order: tuple[int, ...]) -> list[Step]:
    """Shared per order (read-only, like label_format's variants): the requests stage
    serialises each shared step list once."""
    return [{"order": list(order)}]


@lru_cache(maxsize=4096)
def _presentation(order: tuple[int, ...], labels: tuple[str, ...]) -> Presentation:
    return presentation([{"order": list(order)}], labels)


def generate(
    config: OptionOrder, stream: Stream, original: Input, labels: Sequence[str]
) -> Generated:
    n = len(labels)
    identity = tuple(range(n))
    if n <= _ENUMERATE_UP_TO:
        orders = _orders(n)
        chosen = stream.sample(orders, min(config.samples, len(orders)))
    else:
        chosen = []
        seen = {identity}
        for _ in range(_MAX_SHUFFLES):
            if len(chosen) == config.samples:
                break
            order = tuple(stream.sample(identity, n))
            if order not in seen:
                seen.add(order)
                chosen.append(order)
    if not chosen:
        return Generated(skip_reason=SKIP_NO_CHANGE)
    key = tuple(labels)
    # Distinct non-identity orders by construction: nothing to drop.
    return Generated(
        [
            Transformed(i, _steps(order), original, _presentation(order, key))
            for i, order in enumerate(chosen)
        ]
    )


def presentation(steps: Sequence[Step], labels: Sequence[str]) -> Presentation:
    """Labels in shown order; None when the last order step is the identity."""
    order = steps[-1]["order"] if steps else list(range(len(labels)))
    if list(order) == list(range(len(labels))):
        return None
    return [(labels[i], labels[i]) for i in order]


def _adjacent_swaps(steps: list[Step], _labels: Sequence[str]) -> Iterator[list[Step]]:
    """One inversion fewer: each adjacent pair out of order swapped back, left to right (the
    identity order this can reach is skipped as a no-op)."""
    order = list(steps[-1]["order"])
    for i in range(len(order) - 1):
        if order[i] > order[i + 1]:
            yield [{"order": [*order[:i], order[i + 1], order[i], *order[i + 2 :]]}]


def _generate(config: OptionOrder, original: Original) -> Generated:
    return generate(config, original.stream(), original.input, original.labels)


def _apply(steps: Sequence[Step], original: Original) -> tuple[Input, Presentation]:
    return original.input, presentation(steps, original.labels)


OPTION_ORDER = Transformation(_generate, _apply, shrink=_adjacent_swaps, shared_steps=True)
