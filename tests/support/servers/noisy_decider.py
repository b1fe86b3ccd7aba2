"""A `decguard.http/0.1` decision server that never changes but is never quite repeatable.

Every input has a usual label (from a SHA-256 of the seed and the text); a quarter of the
inputs are unstable and answer a neighbouring label with probability 0.2 on each request,
so two calls of the same input disagree with probability 0.32 there and 8 % over all inputs
(the model of `tests.support.noisy_model`). The draw of the k-th request for an input is a
hash of (seed, text, k), so the answers do not depend on request order or concurrency, and
the same sequence of runs always sees the same answers.

`POST /broken/decide` is the same model with a planted regression: stable inputs whose
usual label is right and whose hash falls in the broken share answer a wrong label.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter

from tests.support.servers.recording import Recorded, Reply

LABELS = ("refund", "reject", "review")
UNSTABLE = 0.25
PEAK = 0.7


def unit(*parts: object) -> float:
    """A number in [0, 1) from the SHA-256 of the parts."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class NoisyDecider:
    def __init__(self, seed: int, broken_share: float = 0.15) -> None:
        self.seed, self.broken_share = seed, broken_share
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def usual(self, text: str) -> int:
        return int(unit(self.seed, "usual", text) * 3)

    def unstable(self, text: str) -> bool:
        return unit(self.seed, "unstable", text) < UNSTABLE

    def expected(self, text: str) -> str:
        """The dataset's label: the usual answer for 80 % of inputs, another one otherwise."""
        shift = 0 if unit(self.seed, "right", text) < 0.8 else 1
        return LABELS[(self.usual(text) + shift) % 3]

    def broken(self, text: str) -> bool:
        return (not self.unstable(text) and LABELS[self.usual(text)] == self.expected(text)
                and unit(self.seed, "broken", text) < self.broken_share)

    def answer(self, text: str, planted: bool) -> int:
        with self._lock:
            self.calls[text] += 1
            k = self.calls[text]
        label = self.usual(text)
        if planted and self.broken(text):
            return (label + 1) % 3
        if self.unstable(text) and unit(self.seed, "draw", text, k) < 0.2:
            return (label + 1 + int(unit(self.seed, "other", text) * 2)) % 3
        return label

    def __call__(self, request: Recorded) -> Reply:
        body = request.json()
        shown = body["decision"]["labels"]
        chosen = LABELS[self.answer(str(body["input"]), request.path.startswith("/broken"))]
        rest = (1.0 - PEAK) / (len(shown) - 1)
        probabilities = {label: PEAK if label == chosen else rest for label in shown}
        return Reply(200, {"probabilities": probabilities, "model": "noisy-v1"})


def dataset_lines(decider: NoisyDecider, cases: int) -> str:
    """A JSONL golden dataset of `cases` refund requests labelled as the decider expects."""
    lines = []
    for i in range(cases):
        text = f"Refund request {i}: order {1000 + 7 * i} arrived late."
        lines.append(json.dumps({"id": f"c{i}", "input": text,
                                 "expected": decider.expected(text)}))
    return "\n".join(lines) + "\n"
