"""The seeded random stream that makes transformations reproducible.

Draws come from SHA-256, not Python's `random`, so every platform and Python version
produces the same transformations, and a case's stream depends only on (seed, property,
case id): adding cases or properties never changes the transformations of other cases.
The construction is DecGuard's, so the same seed yields the same transformed cases.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

# Counter encodings for the first draws of a stream (a case rarely needs more than a few dozen).
_COUNTERS = tuple(k.to_bytes(8, "big") for k in range(256))
_from_bytes = int.from_bytes


class Stream:
    """Draw k = int(sha256(key ‖ k as 8-byte big-endian)[:16], big-endian) mod n."""

    __slots__ = ("_base", "_counter")

    def __init__(self, seed: int, property_name: str, case_id: str) -> None:
        key = hashlib.sha256(f"{seed}\x1f{property_name}\x1f{case_id}".encode()).digest()
        # Hashing the 32-byte key once and copying the state saves a block per draw.
        self._base = hashlib.sha256(key)
        self._counter = 0

    def draw(self, n: int) -> int:
        """The next draw, an integer in [0, n)."""
        k = self._counter
        self._counter = k + 1
        h = self._base.copy()
        h.update(_COUNTERS[k] if k < 256 else k.to_bytes(8, "big"))
        return _from_bytes(h.digest()[:16], "big") % n

    def sample(self, items: Sequence[T], k: int) -> list[T]:
        """k items without replacement: a partial Fisher–Yates shuffle of a copy."""
        pool = list(items)
        size = len(pool)
        draw = self.draw
        for i in range(k):
            j = i + draw(size - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]
