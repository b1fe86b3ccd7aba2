"""The deterministic `mock` backend, with DecGuard 0.1's exact semantics.

Rules match on whitespace-collapsed, case-folded text (object inputs on their compact JSON);
without a matching rule and without `default`, a seeded SHA-256 distribution is used. Shown
labels are read by meaning (enumerators, quotes and brackets stripped, case-folded) and the
requests stage has already mapped each shown label to its contract label, so reordering or
reformatting labels never changes the answer; `position_bias` b moves mass b
to whichever label is shown first. A whole shard is decided in one vectorized call.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from decflow.backends.base import (
    Backend,
    BatchAnswer,
    DecisionRequest,
    DecisionSpec,
    Health,
    Prediction,
    RequestBatch,
)
from decflow.data.golden_dataset import compact_json

_ENUMERATOR = re.compile(r"^(?:\d{1,3}|[A-Za-z])[).:]\s+")
_WRAPPERS = "\"'[](){}<>“”‘’«»"


def label_meaning(shown: str) -> str:
    """What a presented label means: `B) Refund`, `"refund"`, `[REFUND]` all mean `refund`."""
    text = _ENUMERATOR.sub("", shown.strip(), count=1)
    return text.strip().strip(_WRAPPERS).strip().casefold()


def _match_text(value: str | dict[str, Any]) -> str:
    text = value if isinstance(value, str) else compact_json(value)
    return _one_space(text).casefold()


def _one_space(text: str) -> str:
    """Each run of whitespace as one space, as `re.sub(r"\\s+", " ", text)` does (the same
    characters: `str.isspace`), three times faster than the regular expression."""
    words = text.split()
    if not words:
        return " " if text else ""
    collapsed = " ".join(words)
    if text[0].isspace():
        collapsed = " " + collapsed
    if text[-1].isspace():
        collapsed += " "
    return collapsed


def hash_distribution(seed: int, text: str, meanings: Sequence[str]) -> np.ndarray:
    """The seeded fallback: weight = first 8 bytes of SHA-256 / 2^64 + 0.001, normalised."""
    weights = np.empty(len(meanings), dtype=np.float64)
    for j, meaning in enumerate(meanings):
        digest = hashlib.sha256(f"{seed}\x1f{text}\x1f{meaning}".encode()).digest()
        weights[j] = int.from_bytes(digest[:8], "big") / 2.0**64 + 0.001
    normalised: np.ndarray = weights / weights.sum()
    return normalised


class MockBackend(Backend):
    provider = "mock"
    supports_batch = True

    def __init__(self, name: str, model: str | None, settings: Any, decision: DecisionSpec) -> None:
        super().__init__(name, model or "mock")
        self.labels = decision.labels
        self.meaning_index = {label_meaning(label): i for i, label in enumerate(self.labels)}
        self.seed = int(getattr(settings, "seed", 0) or 0)
        self.position_bias = float(getattr(settings, "position_bias", 0.0) or 0.0)
        self.model_version = getattr(settings, "model_version", None)
        rules = getattr(settings, "rules", None) or []
        self.rule_texts = [_match_text(_rule_value(rule, "contains")) for rule in rules]
        table = [self._canonical(_rule_value(rule, "probabilities")) for rule in rules]
        default = getattr(settings, "default", None)
        self.has_default = default is not None
        if default is not None:
            table.append(self._canonical(default))
        self.table = np.array(table, dtype=np.float64).reshape(len(table), len(self.labels))

    def _canonical(self, probabilities: Mapping[str, Any]) -> list[float]:
        return [float(probabilities[label]) for label in self.labels]

    def _rule_index(self, text: str) -> int:
        for index, rule_text in enumerate(self.rule_texts):
            if rule_text in text:
                return index
        return len(self.rule_texts) if self.has_default else -1

    def decide_batch(self, batch: RequestBatch) -> BatchAnswer:
        n, width = len(batch.request_ids), len(self.labels)
        orders = np.asarray(batch.label_orders, dtype=np.int64).reshape(n, width)
        keys = pl.Series("key", batch.input_text, dtype=pl.String).fill_null(
            pl.Series(batch.input_json, dtype=pl.String)
        ).to_list()
        # Many requests share an input (reordered or reformatted labels, reruns): match each
        # distinct text once.
        rule_of: dict[str, int] = {}
        for key in keys:
            if key not in rule_of:
                rule_of[key] = self._rule_index(_one_space(key).casefold())
        rules = np.fromiter((rule_of[key] for key in keys), dtype=np.int64, count=n)
        matched = rules >= 0
        probabilities = np.empty((n, width), dtype=np.float64)
        if len(self.table):
            probabilities[matched] = self.table[rules[matched]]
        for i in np.flatnonzero(~matched).tolist():
            meanings = [label_meaning(label) for label in batch.shown_labels[i]]
            probabilities[i, orders[i]] = hash_distribution(self.seed, keys[i], meanings)
        if self.position_bias:
            probabilities *= 1.0 - self.position_bias
            probabilities[np.arange(n), orders[:, 0]] += self.position_bias
        return BatchAnswer(probabilities, [None] * n, [None] * n, self.model, self.model_version)

    async def predict(self, request: DecisionRequest) -> Prediction:
        shown = request.decision.labels
        index = [self.meaning_index.get(label_meaning(s), j) for j, s in enumerate(shown)]
        order = np.array([index])
        text = request.input if isinstance(request.input, str) else None
        obj = None if isinstance(request.input, str) else compact_json(request.input)
        batch = RequestBatch([request.case_id], [text], [obj], [shown], order)
        row = self.decide_batch(batch).probabilities[0]
        return Prediction(
            {label: float(row[order[0, j]]) for j, label in enumerate(shown)},
            model=self.model,
            model_version=self.model_version,
        )

    async def healthcheck(self) -> Health:
        return Health("ok", "mock backend")

    def details(self) -> dict[str, Any]:
        details: dict[str, Any] = {"rules": len(self.rule_texts), "seed": self.seed}
        if self.position_bias:
            details["position_bias"] = self.position_bias
        return details


def _rule_value(rule: Any, key: str) -> Any:
    return rule[key] if isinstance(rule, Mapping) else getattr(rule, key)
