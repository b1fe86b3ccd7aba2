"""A decflow contract written from a probe: the agent's answers as a recording.

Contracts cannot name Python code, so the backend is a `mock` whose rules reproduce what
the agent answered: one rule per probe input (its verdict frequencies over the meter's
draws, or the mean of its probabilities), plus one per follow-up the mock would not
otherwise tell apart (accent-stripped texts). The dataset is the probe inputs with the
most frequent answer as `expected` — a record of behaviour, not ground truth, so review
it. Properties are the built-in relations that changed at least one input (a property that
transforms nothing fails as not exercised); the diagnostics carry the probe's k, ε and
blindness threshold. To test the agent itself, swap the backend for its real endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import yaml

from decflow.contracts.loader import parse_yaml
from decflow.contracts.parse import parse_contract
from decflow.errors import DecflowError
from decflow.probe.analyse import keys
from decflow.properties.normalization import collapse_whitespace

CONTRACT_FILE = "decflow.yaml"
DATASET_FILE = "cases.jsonl"
# Built-in relations with a contract property of the same meaning.
PROPERTIES = {"case_swap": "case_swap", "whitespace": "whitespace",
              "normalization": "normalization"}


def _match_key(text: str) -> str:
    """How the mock compares texts: whitespace runs collapsed, case folded."""
    return collapse_whitespace(text).casefold()


def _distribution(rows: pl.DataFrame, labels: Sequence[str]) -> np.ndarray | None:
    """Mean reported probabilities when every answer had them, else verdict frequencies;
    None without any answer (every call errored)."""
    rows = rows.filter(pl.col("text").is_not_null())  # a failed call has no verdict
    if rows.is_empty():
        return None
    index = {label: i for i, label in enumerate(labels)}
    vector = np.zeros(len(labels))
    if rows["probabilities"].null_count() == 0:
        for value in rows["probabilities"]:
            for label, p in json.loads(value).items():
                vector[index[label]] += p
    else:
        for key in keys(rows, "verdict"):
            vector[index[str(key)]] += 1.0
    distribution: np.ndarray = vector / vector.sum()
    return distribution


def _pooled(result: Any, labels: Sequence[str]) -> np.ndarray:
    """Over every answered call: the mock's default for texts no rule matches."""
    pooled = _distribution(result.observations, labels)
    if pooled is None:
        raise DecflowError("the probe has no answered call to record")
    return pooled


def _rounded(vector: np.ndarray, labels: Sequence[str]) -> dict[str, float]:
    return {label: round(float(p), 6) for label, p in zip(labels, vector, strict=True)}


def _rules(result: Any, labels: Sequence[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """(mock rules longest text first, expected label per input)."""
    frame = result.observations.filter(pl.col("text").is_not_null())
    meter = frame.filter(pl.col("kind") == "meter")
    pooled = _pooled(result, labels)
    rules: list[tuple[str, np.ndarray]] = []
    expected = []
    for index, text in enumerate(result.inputs):
        vector = _distribution(meter.filter(pl.col("input_index") == index), labels)
        if vector is not None:
            rules.append((collapse_whitespace(text) or text, vector))
        # np.argmax keeps the first maximum, as the engine does when it selects a label; an
        # input the agent never answered gets the default (pooled) answer.
        expected.append(labels[int(np.argmax(pooled if vector is None else vector))])
    known = {_match_key(text) for text in result.inputs}
    followups = frame.filter(pl.col("side") == "followup")
    for sent in followups["sent"].unique(maintain_order=True):
        if _match_key(sent) in known or not sent.strip():
            continue
        known.add(_match_key(sent))
        rows = followups.filter(pl.col("sent").map_elements(_match_key, return_dtype=pl.String)
                                == _match_key(sent))
        vector = _distribution(rows, labels)
        if vector is not None:
            rules.append((collapse_whitespace(sent), vector))
    # Rules match by substring, first match wins: a longer text goes before any text it
    # contains, so every input finds its own rule.
    ordered = sorted(rules, key=lambda rule: -len(rule[0]))
    return [{"contains": c, "probabilities": _rounded(v, labels)} for c, v in ordered], expected


def _labels(result: Any, labels: Sequence[str] | None) -> list[str]:
    found = list(result.labels)
    chosen = list(labels) if labels is not None else found
    missing = [label for label in found if label not in chosen]
    if missing:
        raise DecflowError(f"labels: the agent also answered {missing}; include every answer")
    if len(chosen) < 2:
        raise DecflowError(
            f"the agent only ever answered {chosen}; a contract needs at least two labels: "
            "pass labels=[...] with the answers it could give"
        )
    return chosen


def contract_document(result: Any, *, name: str = "probed_agent", dataset: str = DATASET_FILE,
                      labels: Sequence[str] | None = None) -> dict[str, Any]:
    chosen = _labels(result, labels)
    rules = _rules(result, chosen)[0]
    pooled = _pooled(result, chosen)
    settings = result.settings
    exercised = [r.name for r in result.relation_results if r.exercised and r.name in PROPERTIES]
    document: dict[str, Any] = {
        "schema_version": "0.1",
        "decision": {
            "name": name,
            "description": f"Recorded from probing {settings.agent}.",
            "type": "choice",
            "options": chosen,
        },
        "backend": {
            "provider": "mock",
            "model": f"recording of {settings.agent}",
            "rules": rules,
            "default": _rounded(pooled, chosen),
        },
        "dataset": dataset,
        "diagnostics": {
            "stability": {"repeats": settings.repeats, "epsilon": settings.epsilon},
            "blindness": {"threshold": settings.blindness_threshold},
        },
    }
    if exercised:
        document["properties"] = {PROPERTIES[n]: {"max_flip_rate": 0.0} for n in exercised}
    return document


def dataset_rows(result: Any, labels: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The probe inputs as golden cases, `expected` = the answer the recording selects."""
    expected = _rules(result, _labels(result, labels))[1]
    width = len(str(len(result.inputs)))
    return [
        {"id": f"probe-{i + 1:0{width}d}", "input": text, "expected": label}
        for i, (text, label) in enumerate(zip(result.inputs, expected, strict=True))
    ]


def _header(result: Any) -> str:
    unmapped = [r.name for r in result.relation_results if r.name not in PROPERTIES]
    lines = [
        f"Written by `decflow probe` from {result.calls} calls to {result.settings.agent}"
        + (f" (run {result.run_id})." if result.run_id else "."),
        "The mock backend is a recording of what the agent answered; `expected` is its most",
        "frequent answer, not ground truth: review both, then point `backend` at the real",
        "service (http, openai or a plugin) to test the agent itself.",
    ]
    if unmapped:
        lines.append(f"Relations without a contract property (not carried over): "
                     f"{', '.join(unmapped)}.")
    return "".join(f"# {line}\n" for line in lines)


def contract_yaml(result: Any, document: dict[str, Any]) -> str:
    text = _header(result) + str(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
    # The contract is checked by the same loader `decflow test` uses before anyone sees it.
    parse_contract(parse_yaml(text, "probe contract"), "probe contract")
    return text


def write_contract(result: Any, directory: Path, *, name: str = "probed_agent",
                   labels: Sequence[str] | None = None) -> Path:
    document = contract_document(result, name=name, dataset=DATASET_FILE, labels=labels)
    text = contract_yaml(result, document)
    rows = dataset_rows(result, labels)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / DATASET_FILE).write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
        )
        target = directory / CONTRACT_FILE
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise DecflowError(f"{directory}: cannot write the contract ({exc.strerror or exc})"
                           ) from None
    return target
