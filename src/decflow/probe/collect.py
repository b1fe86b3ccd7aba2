"""Calling the agent: the meter's reruns, then blindness, then each relation's pairs.

Every call becomes one row of the observations table, in call order. With call reuse (the
default) the meter's first draw per input is also the blindness sample and the source side
of every relation, so a run costs n·k + (follow-ups sent) calls instead of
n·k + n + 2·(follow-ups sent). A follow-up is sent only when the transform changed the
input; the relation's outcome is recorded on the follow-up's row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import polars as pl

from decflow.probe.agents import AgentCaller
from decflow.probe.observation import Observation
from decflow.probe.relations import Relation

SCHEMA: dict[str, Any] = {
    "call": pl.Int64,
    "input_index": pl.Int64,
    "input": pl.String,
    "kind": pl.String,  # meter | blindness | relation
    "repeat": pl.Int64,  # meter draws only
    "relation": pl.String,  # relation calls only
    "side": pl.String,  # source | followup (relation calls only)
    "sent": pl.String,  # what the agent was asked
    "verdict": pl.String,
    "text": pl.String,
    "tools": pl.List(pl.String),
    "probabilities": pl.String,  # JSON object in the agent's label order
    "error": pl.String,
    "outcome": pl.String,  # held | violated | error (follow-up rows only)
}


class _Recorder:
    def __init__(self, agent: AgentCaller) -> None:
        self.agent = agent
        self.rows: list[dict[str, Any]] = []

    def call(self, index: int, source: str, sent: str, kind: str, **where: Any) -> (
        Observation | None
    ):
        # the agent's own failure is evidence, not a crash (`AgentCaller.ask`)
        observation, error = self.agent.ask(sent)
        row: dict[str, Any] = dict.fromkeys(SCHEMA)
        row.update(call=len(self.rows), input_index=index, input=source, kind=kind,
                   sent=sent, error=error, **where)
        if observation is not None:
            row.update(
                verdict=observation.verdict,
                text=observation.text,
                tools=list(observation.tools),
                probabilities=None if observation.probabilities is None
                else json.dumps(dict(observation.probabilities)),
            )
        self.rows.append(row)
        return observation


def _judge(relation: Relation, source: Observation | None, followup: Observation | None) -> (
    tuple[str, str | None]
):
    if source is None or followup is None:
        return "error", None
    try:
        return ("held" if relation.check(source, followup) else "violated"), None
    except Exception as exc:  # a check that cannot judge this pair counts as an error
        return "error", f"check failed: {type(exc).__name__}: {exc}"


def collect(
    agent: AgentCaller,
    inputs: Sequence[str],
    relations: Sequence[Relation],
    *,
    repeats: int,
    reuse_calls: bool,
) -> pl.DataFrame:
    recorder = _Recorder(agent)
    first: list[Observation | None] = []
    for index, text in enumerate(inputs):
        draws = [recorder.call(index, text, text, "meter", repeat=r) for r in range(repeats)]
        first.append(draws[0])
    if not reuse_calls:
        for index, text in enumerate(inputs):
            recorder.call(index, text, text, "blindness")
    for relation in relations:
        for index, text in enumerate(inputs):
            followup_text = relation.transform(text)
            if not isinstance(followup_text, str):
                raise TypeError(f"relation {relation.name!r}: transform returned "
                                f"{type(followup_text).__name__}, not str")
            if followup_text == text:
                continue
            where = {"relation": relation.name}
            source = (
                first[index] if reuse_calls
                else recorder.call(index, text, text, "relation", side="source", **where)
            )
            followup = recorder.call(index, text, followup_text, "relation", side="followup",
                                     **where)
            outcome, problem = _judge(relation, source, followup)
            row = recorder.rows[-1]
            row["outcome"] = outcome
            if problem is not None:
                row["error"] = problem
    return pl.DataFrame(recorder.rows, schema=SCHEMA)
