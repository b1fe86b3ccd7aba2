"""What a contract run is asked to do, as small JSON-able parameters.

A `RunSpec` is all a stage needs to find its inputs: the stage functions (and the Prefect
tasks that wrap them) receive it plus upstream manifests, never DataFrames or clients.
"""

from __future__ import annotations

import secrets
import shlex
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from decflow.errors import DecflowError
from decflow.report.modes import Mode, ModeName, mode_named
from decflow.store.runs import now_iso

if TYPE_CHECKING:
    from decflow.contracts.loader import LoadedContract


@dataclass(frozen=True)
class RunSpec:
    """What a contract run is asked to do: its contract, store, mode and settings."""

    contract_path: str
    store_url: str
    run_id: str
    mode: ModeName = "test"
    backend: str = "default"
    dataset: str | None = None  # as typed on the command line; overrides the contract's
    seed: int | None = None
    properties: tuple[str, ...] | None = None
    minimize: bool | None = None
    max_concurrency: int | None = None
    healthcheck: bool = True
    shard_size: int = 5000
    # Draws per case in a `stability` run, overriding `diagnostics.stability.repeats` (the
    # noise reruns a regression diff makes, `decflow diff --noise-reruns K`).
    repeats: int | None = None
    # `--sequential`: alpha, max_cases, batch, seed, zero_limit (contract section, then the
    # command line); None for a run of the whole suite.
    sequential: dict[str, Any] | None = None
    created_at: str = field(default_factory=lambda: now_iso())
    # The creation instant in ns since the epoch: `created_at` is to the second, and runs
    # made within one second are ordered by it (the trend), not by their ids' random suffix.
    # None for a run recorded before it.
    created_ns: int | None = field(default_factory=time.time_ns)
    # folders outside the contract's own that its paths may name (--allow-path)
    allow_paths: tuple[str, ...] = ()
    # `--resume` of a finished run writes a new run that reuses its stages: the run it
    # continues (never changed by it).
    parent: str | None = None
    # the call cache's mode, fixed when the run starts (`contract_run.call_cache`)
    call_cache: str = "off"
    # the uniforms that round per-case shares to 0/1 (`metrics.rounded_shares`): drawn per
    # run (never by whoever writes the dataset) and recorded, so re-gating and --resume
    # replay the verdicts; None (shares keep Bentkus's bound) for a run recorded before it
    # and for a run with the call cache on (see __post_init__)
    rounding_seed: int | None = field(default_factory=lambda: secrets.randbelow(2**63))

    def __post_init__(self) -> None:
        # An identical run with the call cache on is served the same answers: it must write
        # the same report, and a fresh seed would re-draw a randomized verdict for free. Such
        # runs keep Bentkus's deterministic bound (docs/statistics.md, "The cost").
        if self.call_cache != "off" and self.rounding_seed is not None:
            object.__setattr__(self, "rounding_seed", None)

    @property
    def run_mode(self) -> Mode:
        return mode_named(self.mode)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["properties"] = list(self.properties) if self.properties is not None else None
        data["allow_paths"] = list(self.allow_paths)
        return data

    def resume_command(self) -> str:
        """The command line that finishes this run after an interruption (the store keeps
        its backend, dataset and options; the paths are as this run was given them)."""
        command, _, flag = self.run_mode.command.partition(" ")
        return " ".join(part for part in (
            "decflow", command, shlex.quote(self.contract_path), flag,
            "--store", shlex.quote(self.store_url), "--resume", self.run_id) if part)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSpec:
        values = dict(data)
        if values.get("properties") is not None:
            values["properties"] = tuple(values["properties"])
        values["allow_paths"] = tuple(values.get("allow_paths") or ())
        values.setdefault("rounding_seed", None)
        values.setdefault("created_ns", None)
        return cls(**values)


@lru_cache(maxsize=16)
def _load(path: str, mtime_ns: int) -> LoadedContract:
    from decflow.contracts import load_contract

    return load_contract(path)


def load_contract_cached(path: str) -> LoadedContract:
    """Load (and cache per process) a contract; stages call this instead of re-parsing."""
    try:
        mtime = Path(path).stat().st_mtime_ns
    except OSError:
        raise DecflowError(f"{path}: cannot read contract (file not found)") from None
    return _load(path, mtime)
