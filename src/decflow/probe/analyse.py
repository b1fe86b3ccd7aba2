"""From the observations table to the meter, blindness and relation results (no calls).

A pure function of the stored table and the settings, so a stored probe is re-read (and
could be re-judged at another ε or threshold) without asking the agent again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from decflow.diagnostics.blindness import BlindnessResult, detect_blindness
from decflow.diagnostics.stability import StabilityResult, measure_stability
from decflow.probe.observation import layer_key
from decflow.probe.relations import RelationResult


@dataclass(frozen=True)
class ProbeSettings:
    agent: str  # how the agent is named in reports and `decflow runs`
    repeats: int
    epsilon: float
    blindness_threshold: float
    layer: str
    reuse_calls: bool
    relations: tuple[tuple[str, str], ...]  # (name, type), in the order they ran
    # the meter's share rounding (`metrics.rounded_shares`), drawn per probe; None for a
    # probe stored before it (Bentkus's bound)
    rounding_seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["relations"] = [{"name": n, "type": t} for n, t in self.relations]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeSettings:
        values = dict(data)
        values["relations"] = tuple((r["name"], r["type"]) for r in data["relations"])
        values.setdefault("rounding_seed", None)
        return cls(**values)


def keys(frame: pl.DataFrame, layer: str) -> list[str | None]:
    """The compared value of every row on `layer`; None for a failed call (no text)."""
    return [
        None if text is None else layer_key(verdict, text, tools or [], layer)
        for verdict, text, tools in frame.select("verdict", "text", "tools").iter_rows()
    ]


def discover_labels(frame: pl.DataFrame) -> list[str]:
    """Verdicts (and probability labels) the agent gave, in the order they first appeared."""
    seen: dict[str, None] = {}
    ok = frame.filter(pl.col("text").is_not_null())
    for key, probabilities in zip(keys(ok, "verdict"), ok["probabilities"], strict=True):
        if probabilities is not None:
            seen.update(dict.fromkeys(json.loads(probabilities)))
        if key is not None:
            seen[key] = None
    return list(seen)


def _probability_column(meter: pl.DataFrame, labels: list[str]) -> pl.Series | None:
    """Probabilities in discovered-label order, when every meter draw carried them."""
    column = meter["probabilities"]
    if column.null_count():
        return None
    vectors = []
    for value in column:
        mapping = json.loads(value)
        vectors.append([float(mapping.get(label, 0.0)) for label in labels])
    return pl.Series("probabilities", vectors, dtype=pl.List(pl.Float64))


def measure(frame: pl.DataFrame, settings: ProbeSettings, labels: list[str]) -> StabilityResult:
    meter = frame.filter(pl.col("kind") == "meter")
    reruns = pl.DataFrame({
        "case_id": meter["input_index"],
        "repeat": meter["repeat"],
        "selected": pl.Series(keys(meter, settings.layer), dtype=pl.String),
    })
    probabilities = _probability_column(meter, labels) if settings.layer == "verdict" else None
    if probabilities is not None:
        reruns = reruns.with_columns(probabilities)
    return measure_stability(reruns, epsilon=settings.epsilon,
                             rounding_seed=settings.rounding_seed)


def blindness(frame: pl.DataFrame, settings: ProbeSettings) -> BlindnessResult:
    """One answer per input: the meter's first draw, or the separate draw without reuse."""
    sample = (
        frame.filter((pl.col("kind") == "meter") & (pl.col("repeat") == 0))
        if settings.reuse_calls
        else frame.filter(pl.col("kind") == "blindness")
    ).sort("input_index")
    return detect_blindness(keys(sample, settings.layer), threshold=settings.blindness_threshold)


def relation_results(frame: pl.DataFrame, settings: ProbeSettings, n_inputs: int) -> (
    list[RelationResult]
):
    followups = frame.filter(pl.col("side") == "followup")
    counts = {
        (row["relation"], row["outcome"]): row["len"]
        for row in followups.group_by("relation", "outcome").len().iter_rows(named=True)
    }
    results = []
    for name, rtype in settings.relations:
        held = counts.get((name, "held"), 0)
        violated = counts.get((name, "violated"), 0)
        errors = counts.get((name, "error"), 0)
        skipped = n_inputs - held - violated - errors
        results.append(RelationResult(name, rtype, n_inputs, held, violated, skipped, errors))
    return results


def inputs_of(frame: pl.DataFrame) -> list[str]:
    first = frame.filter((pl.col("kind") == "meter") & (pl.col("repeat") == 0))
    return first.sort("input_index")["input"].to_list()
