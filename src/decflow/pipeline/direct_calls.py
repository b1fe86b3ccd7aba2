"""Deciding a handful of ad-hoc requests (minimisation candidates, replayed cases) through
the shared call engine, on one event loop that lives as long as the decider."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from decflow.backends.base import Backend
from decflow.backends.engine import RemoteCaller, decide_in_process
from decflow.backends.registry import build_backend, decision_spec
from decflow.data.golden_dataset import compact_json
from decflow.interrupts import run_until_complete
from decflow.metrics.columns import probability_matrix
from decflow.pipeline.schemas import REQUESTS_SCHEMA

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

Candidate = tuple[Any, Any]  # (input, presentation or None)


class CandidateDecider:
    def __init__(
        self,
        contract: Contract,
        backend_name: str,
        max_concurrency: int | None,
        backend: Backend | None = None,
    ) -> None:
        self.backend = backend or build_backend(contract, backend_name)
        self.decision = decision_spec(contract)
        self.tolerance = contract.evaluation.probability_tolerance
        self.concurrency = max_concurrency or contract.evaluation.max_concurrency
        self.loop = asyncio.new_event_loop()
        self.calls = 0

    def decide(self, candidates: list[Candidate], ids: list[str] | None = None) -> pl.DataFrame:
        """Results rows (engine schema) in candidate order; `ids` are sent as case ids."""
        labels = self.decision.labels
        index = {label: i for i, label in enumerate(labels)}
        rows = []
        for position, (value, presentation) in enumerate(candidates):
            shown = [s for s, _ in presentation] if presentation else list(labels)
            order = (
                [index[c] for _, c in presentation] if presentation else list(range(len(labels)))
            )
            rows.append({
                "request_id": ids[position] if ids else f"candidate/{self.calls}",
                "case_id": "", "property": "candidate", "sample": 0,
                "input_text": value if isinstance(value, str) else None,
                "input_json": None if isinstance(value, str) else compact_json(value),
                "shown_labels": shown, "label_order": order, "steps_json": None,
                "pre_error_kind": None, "pre_error_message": None,
            })
            self.calls += 1
        frame = pl.DataFrame(rows, schema=REQUESTS_SCHEMA)
        if self.backend.supports_batch:
            return decide_in_process(self.backend, frame, labels, self.tolerance)
        chunks: list[pl.DataFrame] = []
        caller = RemoteCaller(self.backend, self.decision, self.tolerance, self.concurrency)
        run_until_complete(self.loop, caller.run(frame, labels, chunks.append))
        order_frame = frame.select("request_id").with_row_index("position")
        return order_frame.join(pl.concat(chunks), on="request_id").sort("position").drop(
            "position"
        )

    def __call__(self, candidates: list[Candidate]) -> list[np.ndarray | None]:
        """Probabilities per candidate (None for an error): the minimiser's `decide`."""
        results = self.decide(candidates)
        matrix = probability_matrix(results["probabilities"], len(self.decision.labels))
        return [None if kind is not None else matrix[i]
                for i, kind in enumerate(results["error_kind"])]

    def health(self) -> Any:
        return run_until_complete(self.loop, self.backend.healthcheck())

    def close(self) -> None:
        try:
            run_until_complete(self.loop, self.backend.aclose())
        finally:
            self.loop.close()
