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


# -- diagnostics: rerun flips and persona bias, through an HTTP backend ----------------------

FLAKY, BIASED, BAD = "flaky", "biased", "zzbad"
# A biased case's answer turns over when its persona volunteers at one of these places, so
# cross-group religion pairs that straddle them flip and within-group placebos never do.
TURNING_PLACES = ("mosque", "synagogue", "gurdwara")


def planted_answer(request_id: str, text: str, labels: list[str]) -> dict[str, float]:
    """The planted model: the expected label (`zzbad` in the text: bad, else good) at 0.9,
    the other one for `zzwrong`; a `flaky` case answers at 0.55 and turns over on every odd
    rerun (each of its disjoint rerun pairs flips, all or nothing; TV 0.1); a `biased`
    case's persona arm turns over at 0.95 when the persona volunteers at a turning place
    (TV 0.85, far above the rerun noise floor)."""
    right = "bad" if BAD in text else "good"
    other = {"good": "bad", "bad": "good"}
    answer = other[right] if WRONG in text else right
    sure = 0.9
    if FLAKY in text:
        sure = 0.55
        if request_id.startswith("stability/") and int(request_id.rsplit("/", 1)[1]) % 2:
            answer = other[answer]
    if BIASED in text and any(place in text for place in TURNING_PLACES):
        answer, sure = other[answer], 0.95
    return {label: sure if label == answer else 1.0 - sure for label in labels}


def planted_diagnostics_contract(
    folder: Path, cases: int, url: str, *, wrong: float, flaky: float, biased: float,
    seed: int = 0, epsilon: float = 0.05, flip_limit: float = 0.05, repeats: int = 4,
    pairs: int = 4, requirements: dict[str, float] | None = None,
) -> Path:
    """Write `cases.jsonl` (half expected `bad`; round(share·cases) cases wrong, flaky and
    biased, placed by `seed`) and `decflow.yaml` for the HTTP backend at `url`: min_accuracy
    0.85 (or `requirements`), stability (`repeats`, ε), blindness, and the religion persona
    axis with `pairs` pairs per case against `flip_limit`; returns the contract."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    tags: list[list[str]] = [[BAD] if i % 2 else [] for i in range(cases)]
    for tag, share in ((WRONG, wrong), (FLAKY, flaky), (BIASED, biased)):
        for i in rng.sample(range(cases), round(share * cases)):
            tags[i].append(tag)
    with (folder / "cases.jsonl").open("w", encoding="utf-8") as out:
        for i, case_tags in enumerate(tags):
            expected = "bad" if BAD in case_tags else "good"
            out.write(json.dumps({"id": f"c{i:05d}", "input": f"case {i} {' '.join(case_tags)}",
                                  "expected": expected}) + "\n")
    contract = {
        "schema_version": "0.1",
        "decision": {"name": "planted", "type": "noul", "labels": ["good", "bad"]},
        "backend": {"provider": "http", "url": url, "model": "planted"},
        "dataset": "cases.jsonl",
        "requirements": requirements or {"min_accuracy": 0.85},
        "diagnostics": {"stability": {"repeats": repeats, "epsilon": epsilon,
                                      "level": "requirement"},
                        "blindness": {"threshold": 0.9, "level": "requirement"}},
        "properties": {"counterfactual": {"dimensions": ["religion"],
                                          "num_pairs_per_dimension": pairs,
                                          "max_flip_rate": flip_limit}},
    }
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(contract, sort_keys=False), encoding="utf-8")
    return path
