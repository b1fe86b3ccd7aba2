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
        h = self._base.copy()
        h.update(self._counter.to_bytes(8, "big"))
        self._counter += 1
        return int.from_bytes(h.digest()[:16], "big") % n

    def sample(self, items: Sequence[T], k: int) -> list[T]:
        """k items without replacement: a partial Fisher–Yates shuffle of a copy."""
        pool = list(items)
        for i in range(k):
            j = i + self.draw(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]
