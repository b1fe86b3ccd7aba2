"""The `results` stage of a sequential run (`--sequential`): cases in a seeded random order,
decided batch by batch, until the run's status can no longer change.

The order (`sequential.seed`) and the batches (`sequential.batch`, default the concurrency
window) are fixed before the first call and are part of the stage key, so `--resume`
replays the same batches and sends only requests without a recorded result. After each
batch the gates' evidence is updated (`sequential.gates.advance`); the run stops when
`settled` says so or `max_cases` cases are sent. The stage publishes the results of the
sent cases, and narrowed `cases` and `requests` tables holding only those cases, which the
runner adopts for the later stages (`sent_inputs`); its manifest carries the record the
summary judges the run from.
"""

from __future__ import annotations

import hashlib
import io
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from decflow.backends.results_schema import RESULTS_SCHEMA
from decflow.contracts.gates import GOLDEN_GATES
from decflow.contracts.properties import PROPERTY_GATES
from decflow.errors import DecflowError
from decflow.gates import golden_checks
from decflow.gates.checks import Check
from decflow.metrics.columns import probability_matrix
from decflow.metrics.compare import compare
from decflow.pipeline.contract_run import results
from decflow.pipeline.contract_run.calls import ORIGINAL_ERROR
from decflow.pipeline.contract_run.derive import (
    DIAGNOSTIC_PROPERTIES,
    counterfactual_config,
    selected_properties,
    stability_config,
)
from decflow.pipeline.contract_run.diagnostic_rows import (
    REQUEST_COLUMNS,
    WANTED,
    diagnostic_rows,
    stored_pair_table,
)
from decflow.pipeline.contract_run.golden_section import originals
from decflow.pipeline.contract_run.sequential.diagnostics import (
    DiagnosticInputs,
    diagnostic_tracked,
    repeated_inputs,
)
from decflow.pipeline.contract_run.sequential.gates import (
    Design,
    GateState,
    Tracked,
    advance,
    golden_tracked,
    property_tracked,
    settled,
    suite_only,
)
from decflow.pipeline.contract_run.sequential.record import RECORD
from decflow.pipeline.contract_run.transformed import COMPARISON_COLUMNS, relation_direction
from decflow.pipeline.spec import RunSpec, load_contract_cached
from decflow.pipeline.stage import ProgressFactory, RunContext
from decflow.properties.generate import relation_of, transformed_properties
from decflow.properties.summary import property_checks
from decflow.store.store import Manifest, Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

SETTINGS = ("alpha", "max_cases", "batch", "seed", "zero_limit")


def case_order(cases: pl.DataFrame, seed: int) -> list[str]:
    """The suite's case ids in the order a sequential run takes them."""
    permutation = np.random.default_rng(seed).permutation(cases.height)
    return [str(c) for c in cases["case_id"].gather(permutation).to_list()]


def batch_bounds(cases: int, batch: int) -> list[int]:
    """Cases sent after each batch."""
    return [*range(batch, cases, batch), cases] if cases else []


def planned_checks(contract: Contract, spec: RunSpec) -> list[Check]:
    """The checks the run will make, as templates (gate, level, comparison, threshold):
    golden gates in test/all, property rates in fuzz/all, and the diagnostics' (stability,
    blindness, two per persona axis)."""
    checks: list[Check] = []
    mode = spec.run_mode
    if mode.fills("golden_gates"):
        blank: dict[str, Any] = {"counts": {}, "classification": {}, "calibration": {},
                                 "selective": None,
                 "latency": {}}
        checks += golden_checks(blank, contract.requirements, contract.warnings,
                                contract.decision.type)
    properties = selected_properties(spec, contract) if mode.fills("properties") else []
    for prop, config in properties:
        if prop in transformed_properties():
            checks += property_checks(None, prop, config, relation_of(prop))
    stability = stability_config(spec, contract)
    if stability is not None:
        checks.append(_template("stability.verdict", stability.level, "<=", stability.epsilon))
    blindness = contract.diagnostics.blindness if contract.diagnostics is not None else None
    if blindness is not None and mode.fills("diagnostics"):
        checks.append(_template("blindness.max_skew", blindness.level, "<",
                                blindness.threshold))
    persona = counterfactual_config(spec, contract)
    if persona is not None:
        for axis in persona.dimensions:
            checks.append(_template(f"counterfactual.{axis}.max_error_rate", "requirement",
                                    "<=", 0.0))
            checks.append(_template(f"counterfactual.{axis}.max_flip_rate", persona.level,
                                    "<=", persona.max_flip_rate))
    return checks


def _template(gate: str, level: str, comparison: str, threshold: float) -> Check:
    return Check(gate, level, gate, comparison, threshold, None, "fail", "")  # type: ignore[arg-type]


def comparison_rows(contract: Contract, joined: pl.DataFrame) -> pl.DataFrame:
    """Comparisons (COMPARISON_COLUMNS) of evaluated transformed requests that carry their
    `probabilities` and `original_probabilities`."""
    width = len(contract.decision.labels)
    configs = dict(contract.properties.enabled())
    frames = []
    for prop in joined["property"].unique(maintain_order=True).to_list():
        rows = joined.filter(pl.col("property") == prop)
        found = compare(
            probability_matrix(rows["original_probabilities"], width),
            probability_matrix(rows["probabilities"], width),
            relation=relation_of(prop), decision_type=contract.decision.type,
            direction=relation_direction(configs.get(prop)),
        )
        columns = found.columns()
        if columns["level_delta"] is None:
            columns["level_delta"] = [None] * rows.height
        frames.append(pl.DataFrame(
            {"request_id": rows["request_id"], "case_id": rows["case_id"],
             "property": rows["property"], **columns}, schema=COMPARISON_COLUMNS))
    return pl.concat(frames) if frames else pl.DataFrame(schema=COMPARISON_COLUMNS)


@dataclass(frozen=True)
class Sent:
    """The cases a sequential run sent, in the order sent, and what its gates read of them."""

    order: list[str]
    table: pl.DataFrame  # each case with its original's result, in the order sent
    transformed: pl.DataFrame  # (request_id, case_id, property, error_kind) of the variants
    comparisons: pl.DataFrame  # the evaluated variants' comparisons
    diagnostics: DiagnosticInputs | None  # None: the run has no diagnostic gate


def tracked_gates(contract: Contract, spec: RunSpec, checks: list[Check], sent: Sent,
                  design: Design) -> list[Tracked]:
    """Every check with its per-case values over the sent cases."""
    order = sent.order
    golden = [c for c in checks if c.gate in GOLDEN_GATES]
    rates = [c for c in checks if c.gate.partition(".")[0] in transformed_properties()
             and c.gate.partition(".")[2] in PROPERTY_GATES]
    diagnostic = [c for c in checks if c.gate.startswith(DIAGNOSTIC_GATES)]
    rest = [c for c in checks if c not in golden and c not in rates and c not in diagnostic]
    tracked = {id(t.check): t for t in [
        *golden_tracked(contract, sent.table, golden, design),
        *property_tracked(contract, rates, order, sent.transformed, sent.comparisons, design),
        *(diagnostic_tracked(contract, spec, diagnostic, order, sent.diagnostics, design)
          if sent.diagnostics is not None else suite_only(diagnostic, len(order))),
        *suite_only(rest, len(order)),
    ]}
    return [tracked[id(c)] for c in checks]


DIAGNOSTIC_GATES = ("stability.", "blindness.", "counterfactual.")


class SequentialCalls:
    """One sequential run's calls: the batches it sends and the evidence after each."""

    def __init__(self, context: RunContext, key: str) -> None:
        spec, store = context.spec, context.store
        self.context, self.key, self.spec, self.store = context, key, spec, store
        self.contract = context.loaded.contract
        settings = dict(spec.sequential or {})
        self.cases = store.read(context.manifests["cases"])
        self.requests_manifest = context.manifests["requests"]
        self.requests = store.read(self.requests_manifest, results.CALL_COLUMNS)
        self.order = case_order(self.cases, int(settings["seed"]))
        window = spec.max_concurrency or self.contract.evaluation.max_concurrency
        self.batch = int(settings.get("batch") or window)
        cap = settings.get("max_cases")
        self.limit = min(len(self.order), int(cap)) if cap else len(self.order)
        self.bounds = batch_bounds(self.limit, self.batch)
        metamorphic = self.requests.filter(
            (pl.col("property") != "") & ~pl.col("property").is_in(DIAGNOSTIC_PROPERTIES))
        variants = metamorphic.group_by("property", "case_id").len().group_by("property").agg(
            pl.col("len").max())
        self.design = Design(len(self.order), float(settings["alpha"]),
                             float(settings["zero_limit"]),
                             {p: int(n) for p, n in variants.iter_rows()},
                             repeated_inputs(self.cases))
        self.checks = planned_checks(self.contract, spec)
        self.diagnostic_requests: pl.DataFrame | None = None
        self.pairs: pl.DataFrame | None = None
        if any(c.gate.startswith(DIAGNOSTIC_GATES) for c in self.checks):
            self.diagnostic_requests = store.read(self.requests_manifest, REQUEST_COLUMNS,
                                                  where=pl.col("property").is_in(WANTED))
            self.pairs = stored_pair_table(store, self.requests_manifest)
        self._session: results.CallSession | None = None
        self.answers: list[pl.DataFrame] = []
        self.comparisons: list[pl.DataFrame] = []
        self.states: dict[str, GateState] = {}
        self.sent = 0
        self.batches = 0  # batches judged so far (sent, or read back)
        self.requests_sent = 0
        self.seconds = 0.0
        self.stop_reason: str | None = None
        total = self.requests.height
        self.update = context.progress("calls", total) if context.progress else None

    def group_ends(self) -> list[int]:
        """Batch indices ending each group of batches of about a shard of requests (a
        Prefect task runs a group; never a task per case)."""
        per_case = self.requests.group_by("case_id").len()
        counts = dict(zip(per_case["case_id"].to_list(), per_case["len"].to_list(),
                          strict=True))
        ends, size, start = [], 0, 0
        for index, bound in enumerate(self.bounds):
            size += sum(counts.get(case, 0) for case in self.order[start:bound])
            start = bound
            if size >= self.spec.shard_size:
                ends.append(index + 1)
                size = 0
        if not ends or ends[-1] != len(self.bounds):
            ends.append(len(self.bounds))
        return ends

    @property
    def session(self) -> results.CallSession:
        """The results recorded before this process sends its first batch (loaded then, so
        batches another process recorded since this one began are never sent again)."""
        if self._session is None:
            parts = results.RequestParts(self.store, self.requests_manifest)
            self._session = results.CallSession.load_with(self.store, parts, self.key)
        return self._session

    def run(self, upto: int | None = None, *, send: bool = True) -> None:
        """Send batches (the first `upto`; recorded ones are read back, not sent) until the
        status is settled or the cases allowed are sent. With `send=False` nothing is sent:
        the batches other processes recorded are read back and judged (the Prefect flow
        after its tasks; a request missing then is reported by `finish`)."""
        last = len(self.bounds) if upto is None else upto
        for index, bound in enumerate(self.bounds[:last]):
            if self.stop_reason is not None:
                return
            self.run_batch(index, bound, send=send)
        if self.sent == len(self.order):
            # The whole suite decides every gate exactly (the summary judges it).
            self.stop_reason = "every case of the suite sent"
        elif self.stop_reason is None and last == len(self.bounds):
            self.stop_reason = f"max_cases {self.limit} sent"

    def run_batch(self, index: int, bound: int, *, send: bool = True) -> None:
        started = time.perf_counter()
        batch_cases = self.order[self.sent:bound]
        rows = self.requests.filter(pl.col("case_id").is_in(batch_cases))
        for phase in results.PHASES if send else ():
            phase_rows = results.phase_rows(rows, phase)
            if phase_rows.height:
                results.call_rows(self.spec, self.store, self.key, phase_rows, phase, index,
                                  session=self.session)
        self.seconds += time.perf_counter() - started
        self.answers.append(self._batch_results(index))
        self.sent = bound
        self.batches = index + 1
        self.requests_sent += rows.height
        if self.update:
            self.update(self.requests_sent, self.requests.height)
        if bound < len(self.order):
            self._judge()

    def _batch_results(self, index: int) -> pl.DataFrame:
        """Every result recorded under batch `index` (this attempt's and earlier ones')."""
        folder = self.store.stage_prefix("results", self.key)
        names = [name for name in self.store.list_dir(folder)
                 if name.endswith(".parquet") and name[len(results.CHUNK) + 1:].startswith(
                     f"{index:06d}-")]
        frames = [pl.read_parquet(io.BytesIO(self.store.read_bytes(f"{folder}/{name}")))
                  for name in sorted(names)]
        if not frames:
            return pl.DataFrame(schema=dict(RESULTS_SCHEMA))
        return pl.concat(frames).unique("request_id", keep="first", maintain_order=True)

    def _judge(self) -> None:
        answers = pl.concat(self.answers)
        sent_cases = self.order[:self.sent]
        position = pl.DataFrame({"case_id": sent_cases, "_order": range(len(sent_cases))})
        cases = self.cases.join(position, on="case_id").sort("_order").drop("_order")
        table = originals(cases, answers)
        sent_requests = self.requests.filter(pl.col("case_id").is_in(sent_cases))
        transformed = sent_requests.filter(
            (pl.col("property") != "") & ~pl.col("property").is_in(DIAGNOSTIC_PROPERTIES)
        ).select("request_id", "case_id", "property").join(
            answers.select("request_id", "probabilities", "error_kind"), on="request_id",
            how="left")
        newest = self.answers[-1]["request_id"]
        fresh = transformed.filter(pl.col("request_id").is_in(newest.implode())
                                   & pl.col("error_kind").is_null())
        if fresh.height:
            joined = fresh.join(table.select("case_id", original_probabilities="probabilities"),
                                on="case_id", how="left")
            self.comparisons.append(comparison_rows(self.contract, joined))
        comparisons = (pl.concat(self.comparisons) if self.comparisons
                       else pl.DataFrame(schema=COMPARISON_COLUMNS))
        diagnostics = None
        if self.diagnostic_requests is not None:
            rows = diagnostic_rows(self.diagnostic_requests.filter(
                pl.col("case_id").is_in(sent_cases)), answers)
            diagnostics = DiagnosticInputs(
                rows, self.pairs, [b for b in self.bounds if b <= self.sent])
        tracked = tracked_gates(self.contract, self.spec, self.checks,
                                Sent(sent_cases, table, transformed, comparisons, diagnostics),
                                self.design)
        self.states = advance(self.states, tracked, self.sent, self.design)
        self.stop_reason = settled(self.states, tracked)

    def finish(self, health: dict[str, str] | None) -> Manifest:
        """Publish the sent cases, their requests and results, and the run's record."""
        sent = self.order[:self.sent]
        if not sent:
            raise DecflowError(f"run {self.spec.run_id}: the suite has no case to send")
        full_cases, full_requests = self.context.manifests["cases"], self.requests_manifest
        kept_cases = self.store.read(full_cases).filter(pl.col("case_id").is_in(sent))
        kept_requests = self.store.read(full_requests).filter(pl.col("case_id").is_in(sent))
        cases = self.store.publish("cases", self._key("cases"), kept_cases,
                                   extra=dict(full_cases.extra))
        requests = self.store.publish("requests", self._key("requests"), kept_requests,
                                      extra=dict(full_requests.extra))
        results.check_originals(self.spec, self.store, requests, self.key)
        record = {
            "settings": {**dict(self.spec.sequential or {}), "batch": self.batch},
            "design": self.design.to_dict(),
            "order": sent,
            "bounds": [b for b in self.bounds if b <= self.sent],
            "stop_reason": self.stop_reason,
            "calls_made": self.calls_made(),
            "calls_full": full_requests.rows,
            "calls_from_cache": self._served(),
            "call_seconds": round(self.seconds, 4),
            "cases": cases.to_dict(),
            "requests": requests.to_dict(),
        }
        return results.finish_results(self.spec, self.store, requests, self.key, health,
                                      extra={RECORD: record})

    def calls_made(self, cases: int | None = None) -> int:
        """Calls the backend received for the first `cases` cases of the order (default:
        every case sent so far)."""
        kept = self.requests.filter(
            pl.col("case_id").is_in(self.order[:self.sent if cases is None else cases]))
        return kept.height - self._not_sent(kept)

    def _not_sent(self, requests: pl.DataFrame) -> int:
        """Requests among `requests` that never reached the backend: their generation
        failed, their case's original errored (recorded as errors, not calls), or the call
        cache served them."""
        answers = pl.concat(self.answers, how="diagonal_relaxed") if self.answers else \
            pl.DataFrame(schema=dict(RESULTS_SCHEMA))
        served = (pl.col("cache_entry").is_not_null() if "cache_entry" in answers.columns
                  else pl.lit(False))
        blocked = answers.filter(((pl.col("error_kind") == ORIGINAL_ERROR) | served)
                                 & pl.col("request_id").is_in(requests["request_id"].implode()))
        return int(requests["pre_error_kind"].is_not_null().sum()) + blocked.height

    def _served(self) -> int:
        """Answers of the sent cases the call cache served (never sent to the backend)."""
        return sum(int(frame["cache_entry"].is_not_null().sum()) for frame in self.answers
                   if "cache_entry" in frame.columns)

    def _key(self, name: str) -> str:
        return hashlib.sha256(f"{name}:{self.key}:{self.sent}".encode()).hexdigest()


def sequential_call_stage(context: RunContext, key: str) -> Manifest:
    """The results stage of a sequential run: in this process, or (with the Prefect flow's
    `shards`) the health check and one task per group of batches, after which the batches
    they recorded are read back here, never sent, to publish: each request is sent once,
    by the process that runs its batch."""
    if context.shards is None:
        health = results.prepare_calls(context.spec)
        calls = SequentialCalls(context, key)
        calls.run()
        return calls.finish(health)
    runner = context.shards(context, key, results.RequestParts(
        context.store, context.manifests["requests"]))
    health = runner.health()
    calls = SequentialCalls(context, key)
    start = end = 0
    for end in calls.group_ends():
        if runner.sequential_group(start, end)["stopped"]:
            break
        start = end
    calls.run(upto=end, send=False)
    return calls.finish(health)


def sequential_group(spec: RunSpec, store: Store, cases_key: str, requests_key: str, key: str,
                     start: int, end: int,
                     progress: ProgressFactory | None = None) -> dict[str, Any]:
    """The batches of a sequential run from batch `start` up to batch `end` (those
    recorded, the earlier ones among them, are read back; the rest sent), stopping when
    the gates are settled: what a Prefect task runs. Returns the batches judged in all
    (`batches`), the calls the backend received for this group's batches (`calls`) and in
    all (`calls_made`, as the run's record counts them), the requests judged, and why it
    stopped (`stop_reason`, None while more batches may follow)."""
    manifests = {}
    for stage, stage_key in (("cases", cases_key), ("requests", requests_key)):
        found = store.manifest(stage, stage_key)
        if found is None:
            raise DecflowError(f"store {store.url}: no published {stage} stage {stage_key}")
        manifests[stage] = found
    context = RunContext(spec, store, load_contract_cached(spec.contract_path), manifests,
                         progress=progress)
    calls = SequentialCalls(context, key)
    calls.run(upto=end)
    before = calls.calls_made(calls.bounds[start - 1] if start else 0)
    made = calls.calls_made()
    return {"sent": calls.sent, "requests_sent": calls.requests_sent,
            "batches": calls.batches, "calls": made - before, "calls_made": made,
            "stop_reason": calls.stop_reason, "stopped": calls.stop_reason is not None}
