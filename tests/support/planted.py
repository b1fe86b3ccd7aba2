"""A suite with planted rates for sequential runs: a noul contract on the mock backend where
a share of cases is answered wrong (accuracy) and a share sits on a near tie that the mock's
position bias turns over when `option_order` shows the labels reversed (flip rate)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import yaml

WRONG, TIE, PLAIN = "zzwrong", "tiecase", "plain"


def planted_contract(
    folder: Path, cases: int, *, wrong: float, flips: float, seed: int = 0,
    accuracy: float = 0.85, flip_limit: float = 0.05, extra: dict[str, Any] | None = None,
) -> Path:
    """Write `cases.jsonl` (round(wrong·cases) wrong answers, round(flips·cases) tie cases,
    placed by `seed`) and `decflow.yaml` (min_accuracy `accuracy`, option_order
    max_flip_rate `flip_limit`, plus `extra` top-level sections); returns the contract."""
    folder.mkdir(parents=True, exist_ok=True)
    rank = list(range(cases))
    random.Random(seed).shuffle(rank)
    n_wrong, n_tie = round(wrong * cases), round(flips * cases)
    with (folder / "cases.jsonl").open("w", encoding="utf-8") as out:
        for i, r in enumerate(rank):
            tag = WRONG if r < n_wrong else TIE if r < n_wrong + n_tie else PLAIN
            out.write(json.dumps({"id": f"c{i:05d}", "input": f"case {i} {tag}",
                                  "expected": "good"}) + "\n")
    contract = {
        "schema_version": "0.1",
        "decision": {"name": "planted", "type": "noul", "labels": ["good", "bad"]},
        "backend": {
            "provider": "mock", "position_bias": 0.1,
            "rules": [
                {"contains": WRONG, "probabilities": {"good": 0.1, "bad": 0.9}},
                {"contains": TIE, "probabilities": {"good": 0.53, "bad": 0.47}},
            ],
            "default": {"good": 0.9, "bad": 0.1},
        },
        "dataset": "cases.jsonl",
        "requirements": {"min_accuracy": accuracy},
        "properties": {"option_order": {"max_flip_rate": flip_limit}},
        **(extra or {}),
    }
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(contract, sort_keys=False), encoding="utf-8")
    return path
