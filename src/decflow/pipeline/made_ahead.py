"""What a run makes ahead of the stage that uses it, taken at most once.

A remote run's summary needs work that its stored artifacts decide before the calls are
over (the per-case results of the cases, each result chunk's answers), so a thread makes
it while the backend is called (`decflow.commands.ahead`). The run carries one `MadeAhead`
in its stages' context (`StageContext.made_ahead`): what another run made is never seen.
Each value is put under the key of what it was made of and for (an artifact's sha256, the
decision and backend whose results it holds), and a stage takes it only under an equal
key: made for another artifact, contract or backend, it is never taken.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any


class MadeAhead:
    """Values made ahead by key; `take` hands each over once (its objects become the
    taker's: a second summary of the same run makes its own)."""

    def __init__(self) -> None:
        self._made: dict[Hashable, Any] = {}

    def put(self, key: Hashable, value: Any) -> None:
        self._made[key] = value

    def take(self, key: Hashable) -> Any:
        """The value made under `key` (None: none was, or it was taken)."""
        return self._made.pop(key, None)
