"""A pipeline defined outside decflow, as a new run kind would be: three stages over a
count, declared out of order (the pipeline orders them by `upstream`).

`numbers` fans out: one unit per chunk of `0 … n-1`, each published and cached under its
own key, then merged; `squares` squares them; `total` (the verdict stage, keyed by run)
judges their sum against `limit` and stores a small report beside the run. Used by
tests/unit/test_pipeline_driver.py (in this process) and tests/orchestration/
test_pipeline_flow.py (as a Prefect flow, one task per stage and per unit).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from decflow.pipeline.pipeline import Pipeline
from decflow.pipeline.stage import FanOut, Stage, StageContext, UnitOutcome
from decflow.store.runs import write_report
from decflow.store.store import Manifest


@dataclass(frozen=True)
class CountSpec:
    contract_path: str
    store_url: str
    run_id: str
    n: int = 10
    chunk: int = 4
    limit: int = 1000
    parent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CountSpec:
        return cls(**data)

    def resume_command(self) -> str:
        return f"count --store {shlex.quote(self.store_url)} --resume {self.run_id}"


Context = StageContext[CountSpec]


def _chunks(context: Context) -> list[range]:
    spec = context.spec
    return [range(start, min(start + spec.chunk, spec.n)) for start in range(0, spec.n, spec.chunk)]


def _count(context: Context, chunk: range, key: str) -> UnitOutcome:
    frame = pl.DataFrame({"n": list(chunk)}, schema={"n": pl.Int64})
    return UnitOutcome(chunk.start // context.spec.chunk,
                       context.store.publish("chunk", key, frame))


def _merge(context: Context, key: str) -> Manifest:
    parts = [context.store.read(o.manifest) for o in context.unit_outcomes
             if o.manifest is not None]
    return context.store.publish("numbers", key, pl.concat(parts))


def _unit_hashes(context: Context) -> list[str]:
    return [o.manifest.sha256 for o in context.unit_outcomes if o.manifest is not None]


def _square(context: Context, key: str) -> Manifest:
    numbers = context.store.read(context.manifests["numbers"])
    return context.store.publish("squares", key, numbers.select(pl.col("n") ** 2))


def _judge(context: Context, key: str) -> Manifest:
    total = int(context.store.read(context.manifests["squares"])["n"].sum())
    status = "pass" if total <= context.spec.limit else "fail"
    headline = f"{status.upper()}: total {total} {'<=' if status == 'pass' else '>'} " \
               f"{context.spec.limit}"
    report = {"kind": "count", "status": status, "exit_code": int(status == "fail"),
              "headline": headline, "total": total}
    context.outputs["report"] = report
    verdict = {"status": status, "exit_code": report["exit_code"], "headline": headline,
               "report": write_report(context.store, context.spec.run_id, report)}
    return context.store.publish("total", key, pl.DataFrame({"total": [total]}), extra=verdict)


def _limit(context: Context) -> dict[str, Any]:
    return {"limit": context.spec.limit}


TOTAL: Stage[CountSpec] = Stage("total", "1", ("squares",), _judge, params=_limit,
                                cached=False, keyed_by_run=True, verdict=True,
                                title="judge the sum of the squares")
SQUARES: Stage[CountSpec] = Stage("squares", "1", ("numbers",), _square,
                                  title="square the numbers")
NUMBERS: Stage[CountSpec] = Stage(
    "numbers", "1", (), _merge, inputs=_unit_hashes, restart_input=True,
    fan_out=FanOut("chunk", _chunks, lambda chunk: {"from": chunk.start, "to": chunk.stop},
                   _count, lambda chunk: f"count {chunk.start} to {chunk.stop - 1}"),
    title="count, chunk by chunk")


def _describe(spec: CountSpec, _manifests: Mapping[str, Manifest]) -> dict[str, Any]:
    return {"kind": "count", "backend": "numbers", "mode": "count"}


COUNT: Pipeline[CountSpec] = Pipeline("count", f"{__name__}:COUNT", CountSpec.from_dict,
                                      (TOTAL, SQUARES, NUMBERS), None, _describe)
