"""A run's own rerun noise: the placebo a regression diff attributes flips against.

A model that is not perfectly repeatable differs from itself, so a diff needs to know how
much. Two sources, read from the store:

- the run's own stability reruns (`diagnostics.stability`): the requests of property
  `stability`, each an unchanged re-send of a case's original request;
- noise runs: `decflow diff … --noise-reruns K` re-sends the candidate run's stored original
  requests K times to its backend, as a child run `<run>-noise<K>` of kind `noise` (a
  `stability` run over the parent's stored cases, with the parent's contract, backend and
  backend plan). It is resumable like any run (its calls are keyed by its id) and lives in
  its own directory: the parent's artifacts, which may be an accepted baseline, are never
  touched, and `runs accept` refuses a noise run.

`Reruns` holds, per case, the decided reruns' probabilities (contract label order); errored
reruns give no placebo pair and are left out.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from decflow.errors import DecflowError
from decflow.metrics.columns import probability_matrix
from decflow.pipeline.contract_run import backend_plan
from decflow.pipeline.contract_run.derive import RERUN
from decflow.pipeline.contract_run.results import phase_result_parts
from decflow.pipeline.contract_run.runner import CONTRACT_RUN, describe_run, keep_plan
from decflow.pipeline.driver import drive
from decflow.pipeline.pipeline import Pipeline
from decflow.pipeline.spec import RunSpec
from decflow.pipeline.stage import ProgressFactory
from decflow.pipeline.stored.contracts import stored_contract
from decflow.report.modes import ModeName
from decflow.store.runs import (
    FINISHED,
    NOISE_KIND,
    has_run,
    noise_run_id,
    noise_runs_of,
    read_run_record,
)
from decflow.store.store import Manifest, Store

NOISE_MODE: ModeName = "stability"
MAX_NOISE_RERUNS = 50


def describe_noise(spec: RunSpec, manifests: Mapping[str, Manifest]) -> dict[str, Any]:
    """A noise run's record: a contract run's, of kind `noise`."""
    return {**describe_run(spec, manifests), "kind": NOISE_KIND}


def noise_resume(spec: RunSpec) -> str:
    """A noise run is finished by the diff that makes it, run again."""
    reruns = spec.repeats or 0
    parent = spec.run_id.removesuffix(noise_run_id("", reruns))
    return (f"decflow diff BASELINE {parent} --noise-reruns {reruns} --store "
            f"{shlex.quote(spec.store_url)}")


# A noise run: the contract run's stages in `stability` mode over the parent's stored cases
# (handed in as `inherited`), with the parent's contract, backend and backend plan.
NOISE: Pipeline[RunSpec] = Pipeline(
    "noise", f"{__name__}:NOISE", RunSpec.from_dict, CONTRACT_RUN.stages,
    "decflow.report.run_report:RunReport",
    describe_noise, resume=noise_resume)


@dataclass(frozen=True)
class Reruns:
    """Decided reruns per case id (k × labels arrays) and where they came from."""

    by_case: dict[str, np.ndarray] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    def merged(self, other: Reruns) -> Reruns:
        cases = dict(self.by_case)
        for case_id, rows in other.by_case.items():
            cases[case_id] = np.vstack([cases[case_id], rows]) if case_id in cases else rows
        return Reruns(cases, self.sources + other.sources)


def _stage(record: dict[str, Any], name: str) -> Manifest | None:
    stored = (record.get("stages") or {}).get(name)
    return None if stored is None else Manifest.from_dict(stored)


def _draws(store: Store, run_id: str, *, with_originals: bool, width: int) -> Reruns:
    """The decided draws of a run: its stability reruns, and its originals too when every
    one of its requests is a re-send (a noise run)."""
    record = read_run_record(store, run_id)
    requests, results = _stage(record, "requests"), _stage(record, "results")
    if requests is None or results is None:
        return Reruns()
    wanted = ["", RERUN] if with_originals else [RERUN]
    asked = store.read(requests, ["request_id", "case_id", "property"],
                       where=pl.col("property").is_in(wanted))
    if not asked.height:
        return Reruns()
    columns = ["request_id", "probabilities", "error_kind"]
    parts = [store.read(phase_result_parts(results, "transformed"), columns,
                        pl.col("request_id").str.starts_with(f"{RERUN}/"))]
    if with_originals:
        parts.append(store.read(phase_result_parts(results, "originals"), columns))
    answers = pl.concat([p for p in parts if p.width], how="vertical")
    decided = asked.join(answers, on="request_id", how="inner").filter(
        pl.col("error_kind").is_null()).sort("case_id", maintain_order=True)
    if not decided.height:
        return Reruns()
    matrix = probability_matrix(decided["probabilities"], width)
    case_ids = decided["case_id"].to_numpy()
    starts = np.flatnonzero(np.r_[True, case_ids[1:] != case_ids[:-1]])
    ends = np.r_[starts[1:], case_ids.size]
    by_case = {str(case_ids[s]): matrix[s:e] for s, e in zip(starts, ends, strict=True)}
    what = f"noise run {run_id}" if with_originals else f"stability reruns of run {run_id}"
    return Reruns(by_case, (f"{what} ({decided.height} draws)",))


def run_reruns(store: Store, run_id: str | None, width: int) -> Reruns:
    """Every rerun the store holds for run `run_id`: its own stability reruns and its
    finished noise runs. Empty when the run is not in the store."""
    if run_id is None or not has_run(store, run_id):
        return Reruns()
    found = _draws(store, run_id, with_originals=False, width=width)
    for child in noise_runs_of(store, run_id):
        if read_run_record(store, child).get("status") in FINISHED:
            found = found.merged(_draws(store, child, with_originals=True, width=width))
    return found


def make_noise_run(
    store: Store,
    parent_report: dict[str, Any],
    parent_id: str,
    reruns: int,
    *,
    progress: ProgressFactory | None = None,
) -> str:
    """Re-send the parent run's original requests `reruns` times to its backend, as the
    child run `<parent>-noise<reruns>` (resumed when an earlier attempt was interrupted,
    reused when it finished). Returns the child's run id."""
    if not 1 <= reruns <= MAX_NOISE_RERUNS:
        raise DecflowError(f"--noise-reruns: expected 1 to {MAX_NOISE_RERUNS}, got {reruns}")
    child = noise_run_id(parent_id, reruns)
    if has_run(store, child) and read_run_record(store, child).get("status") in FINISHED:
        return child
    record = read_run_record(store, parent_id)
    cases = _stage(record, "cases")
    contract = stored_contract(parent_report, store)
    if cases is None or contract is None:
        raise DecflowError(
            f"run {parent_id} keeps no stored cases or contract copy in the store "
            f"{store.url}, so its requests cannot be re-sent; measure the noise with a "
            "`diagnostics.stability` section in the contract instead"
        )
    parent_spec = RunSpec.from_dict(record["spec"])
    spec = RunSpec(contract_path=str(Path(contract)), store_url=store.url, run_id=child,
                   mode=NOISE_MODE, backend=parent_spec.backend,
                   max_concurrency=parent_spec.max_concurrency,
                   healthcheck=parent_spec.healthcheck, shard_size=parent_spec.shard_size,
                   repeats=reruns)
    if backend_plan.stored_plan(store, child) is None:
        # The same readout as the parent's answers (the openai backend's tokenizer probe).
        keep_plan(store, parent_id, child)
    drive(NOISE, spec, store, inherited={"cases": cases}, progress=progress,
          identity={"noise_of": parent_id})
    return child
