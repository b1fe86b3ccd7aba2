"""option_order: present the contract labels in another order (position bias).

Step: `{"order": [contract label indices in shown order]}`.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import permutations
from typing import Any

from decflow.properties.base import Generated, Input, Presentation, Step, finish
from decflow.properties.stream import Stream

# Up to this many labels every non-identity permutation is listed and sampled.
_ENUMERATE_UP_TO = 6
_MAX_SHUFFLES = 1000


def generate(config: Any, stream: Stream, original: Input, labels: Sequence[str]) -> Generated:
    n = len(labels)
    identity = tuple(range(n))
    if n <= _ENUMERATE_UP_TO:
        orders = [p for p in permutations(range(n)) if p != identity]
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
    candidates = []
    for order in chosen:
        steps: list[Step] = [{"order": list(order)}]
        candidates.append((steps, original, presentation(steps, labels)))
    return finish(original, candidates)


def presentation(steps: Sequence[Step], labels: Sequence[str]) -> Presentation:
    """Labels in shown order; None when the last order step is the identity."""
    order = steps[-1]["order"] if steps else list(range(len(labels)))
    if list(order) == list(range(len(labels))):
        return None
    return [(labels[i], labels[i]) for i in order]
