"""Small core sections: `evaluation`, `fuzz`, `policy`, and the decflow `diagnostics`,
`sequential` and `monitor` extensions."""

# No `from __future__ import annotations` here: pydantic would compile and evaluate every
# field's annotation string again for each model (and each subclass) it collects.

import secrets
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from decflow.contracts.base import Level, Name, NonEmptyStr, StrictModel, Unit

Action = Literal["accept", "abstain", "fallback", "human_review"]


CallCacheMode = Literal["off", "read-write", "read-only", "refresh"]


class Evaluation(StrictModel):
    confidence_threshold: Unit | None = None
    calibration_bins: int = Field(default=10, ge=1, le=1000)
    probability_tolerance: float = Field(default=0.001, gt=0.0, le=0.1)
    max_concurrency: int = Field(default=4, ge=1, le=256)
    # decflow: reuse stored backend answers (`--call-cache` overrides); None: not set
    call_cache: CallCacheMode | None = None

    @field_validator("call_cache", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        """YAML 1.1 reads a bare `off` as false: that is the mode `off`, as written."""
        return "off" if value is False else value


class Fuzz(StrictModel):
    seed: int = Field(default=0, ge=0, lt=2**63)
    text_field: NonEmptyStr | None = None
    minimize: bool = True
    max_minimize_calls: int = Field(default=32, ge=0, le=1000)


class When(StrictModel):
    confidence_gte: Unit


class Route(StrictModel):
    when: When | None = None
    action: Action
    backend: Name | None = None


class Policy(StrictModel):
    routes: Annotated[list[Route], Field(min_length=1)]


class Stability(StrictModel):
    """Rerun meter: `repeats` calls per case, judged against tolerance `epsilon`."""

    repeats: int = Field(default=6, ge=2, le=1000)
    epsilon: float = Field(default=0.05, gt=0.0, lt=1.0)
    level: Level = "warning"


class Blindness(StrictModel):
    """A suite whose modal label share reaches `threshold` cannot tell models apart."""

    threshold: float = Field(default=0.9, gt=0.0, le=1.0)
    level: Level = "warning"


class Diagnostics(StrictModel):
    stability: Stability | None = None
    blindness: Blindness | None = None


# A run's `sequential.seed_from` when its order seed was derived, not drawn nor set.
DERIVED_SEED_FROM = "contract and dataset"


class Sequential(StrictModel):
    """`--sequential` runs: cases in a seeded random order, stopped once every gate is decided.

    `alpha` is the run's chance of a status other than the full suite's, split across its
    gates; `max_cases` caps the cases sent (default: the whole suite); `batch` is the cases
    decided between two looks (default: the concurrency window); `seed` draws the order
    (default: a seed drawn for each run and recorded with it, so `--resume` replays it; with
    the call cache reading, one derived from the contract and dataset instead, so a repeated
    run takes the same cases, answered by the cache); `zero_limit` is the share of cases a
    limit-0 gate is judged against (a run that stops early has not seen every case)."""

    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    max_cases: int | None = Field(default=None, ge=1)
    batch: int | None = Field(default=None, ge=1, le=100_000)
    seed: int | None = Field(default=None, ge=0, lt=2**63)
    zero_limit: float = Field(default=0.02, gt=0.0, lt=1.0)

    @classmethod
    def settings(cls, section: "Sequential | None", wanted: bool | None,
                 overrides: Mapping[str, Any],
                 derived_seed: Callable[[], int] | None = None) -> dict[str, Any] | None:
        """A new run's settings: None unless `wanted` (default: the contract has the
        section); else the section (or the defaults) with the `overrides` that are set,
        validated (pydantic's ValidationError names the field), and an order seed unless
        one is set: `derived_seed()` when given (recorded with `seed_from`, what it was
        derived from), else drawn for this run (every order is as good; one fixed order for
        every run would make each run's error the same draw)."""
        if not (wanted if wanted is not None else section is not None):
            return None
        values = (section or cls()).model_dump()
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls.model_validate(values).model_dump()
        if settings["seed"] is None and derived_seed is not None:
            settings["seed"], settings["seed_from"] = derived_seed(), DERIVED_SEED_FROM
        elif settings["seed"] is None:
            settings["seed"] = secrets.randbelow(2**32)
        return settings


class HarmfulShift(StrictModel):
    """`monitor.harmful_shift`: alarm when the production risk of labelled records (`metric`
    per record: `error_rate` 1 − correct, `brier` (confidence − correct)² of the top label)
    since some window is shown above the baseline's risk upper bound plus `tolerance`.
    `alpha` is the chance of any false alarm within `horizon` windows, split between the
    baseline's bound and the detector (docs/statistics.md, "Harmful-shift alarm")."""

    metric: Literal["error_rate", "brier"] = "error_rate"
    tolerance: float = Field(default=0.02, ge=0.0, lt=1.0)
    alpha: float = Field(default=0.05, gt=0.0, le=0.5)
    horizon: int = Field(default=365, ge=1, le=1_000_000)


class Monitor(StrictModel):
    """`decflow monitor`: records split into windows by `timestamp` (`window`); records
    without one are an error unless `without_timestamp: arrival` windows them by the run
    that found them; `harmful_shift` turns on the alarm over labelled records."""

    window: Literal["1h", "6h", "1d", "7d"] = "1d"
    without_timestamp: Literal["error", "arrival"] = "error"
    harmful_shift: HarmfulShift | None = None
