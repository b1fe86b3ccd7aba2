"""The seeded random stream that makes transformations reproducible.

Draws come from SHA-256, not Python's `random`, so every platform and Python version
produces the same transformations, and a case's stream depends only on (seed, property,
case id): adding cases or properties never changes the transformations of other cases.
The construction is DecGuard's, so the same seed yields the same transformed cases.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

# Counter encodings for the first draws of a stream (a case rarely needs more than a few dozen).
_COUNTERS = tuple(k.to_bytes(8, "big") for k in range(256))
_from_bytes = int.from_bytes
_sha256 = hashlib.sha256
# The hash state after "seed ‖ property ‖", per (seed, property): a run makes ~5·10⁴ streams
# from a handful of them, and each then hashes only its case id.
_PREFIXES: dict[tuple[int, str], Callable[[], hashlib._Hash]] = {}


class Stream:
    """Draw k = int(sha256(key ‖ k as 8-byte big-endian)[:16], big-endian) mod n."""

    __slots__ = ("_copy", "_counter")

    def __init__(self, seed: int, property_name: str, case_id: str) -> None:
        prefix = _PREFIXES.get((seed, property_name))
        if prefix is None:
            if len(_PREFIXES) >= 256:
                _PREFIXES.clear()
            prefix = _PREFIXES[seed, property_name] = _sha256(
                f"{seed}\x1f{property_name}\x1f".encode()
            ).copy
        key = prefix()
        key.update(case_id.encode())
        # Hashing the 32-byte key once and copying the state saves a block per draw.
        self._copy = _sha256(key.digest()).copy
        self._counter = 0

    def draw(self, n: int) -> int:
        """The next draw, an integer in [0, n)."""
        k = self._counter
        self._counter = k + 1
        h = self._copy()
        h.update(_COUNTERS[k] if k < 256 else k.to_bytes(8, "big"))
        return _from_bytes(h.digest()[:16], "big") % n

    def draw_each(self, sizes: Sequence[int]) -> list[int]:
        """The next draws, one in [0, n) for each n of `sizes`: `[draw(n) for n in sizes]`
        with less work per draw (a run makes ~3·10⁵ of them)."""
        counter = self._counter
        self._counter = counter + len(sizes)
        copy = self._copy
        found = []
        for k, n in enumerate(sizes, counter):
            h = copy()
            h.update(_COUNTERS[k] if k < 256 else k.to_bytes(8, "big"))
            found.append(_from_bytes(h.digest()[:16], "big") % n)
        return found

    def sample(self, items: Sequence[T], k: int) -> list[T]:
        """k items without replacement: a partial Fisher–Yates shuffle of a copy."""
        pool = list(items)
        size = len(pool)
        counter = self._counter
        self._counter = counter + k
        copy = self._copy
        for i in range(k):
            c = counter + i
            h = copy()
            h.update(_COUNTERS[c] if c < 256 else c.to_bytes(8, "big"))
            j = i + _from_bytes(h.digest()[:16], "big") % (size - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]
