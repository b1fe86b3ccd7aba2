"""Production statistics by hand: drift TV over histogram bins, type-distinct segments,
gate levels and null values, exact sums that merge across partitions."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import yaml

from decflow.contracts import load_contract
from decflow.data.records.reader import RecordReader, RecordSpec
from decflow.metrics.partial_sums import group_sums, to_float
from decflow.metrics.production import arrow_array, stats_frame
from decflow.pipeline.production import statistics
from decflow.pipeline.production.run import check_records
from decflow.pipeline.production.statistics import BatchStats
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "refund"
LABELS = ("refund", "reject", "review")


def _contract(tmp_path: Path, production: dict, bins: int = 10):
    document = yaml.safe_load((EXAMPLE / "decguard.yaml").read_text())
    document["evaluation"] = {"confidence_threshold": 0.8, "calibration_bins": bins}
    document["production"] = production
    document.pop("dataset", None)
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return load_contract(path).contract


def _rec(top: str, p: float, **fields) -> dict:
    rest = (1.0 - p) / 2
    probabilities = {label: (p if label == top else rest) for label in LABELS}
    return {"decision": "refund_request", "probabilities": probabilities, "selected": top,
            **fields}


def _write(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_drift_tv_over_histogram_bins_by_hand(tmp_path: Path) -> None:
    contract = _contract(tmp_path, {"requirements": {"max_confidence_tv_distance": 0.2}}, bins=4)
    # bins (0, .25], (.25, .5], (.5, .75], (.75, 1]
    current = _write(tmp_path / "now.jsonl", [
        _rec("refund", 0.9, outcome="refund"), _rec("refund", 0.9, outcome="reject"),
        _rec("reject", 0.6, outcome="reject"), _rec("review", 0.4, outcome="review"),
    ])
    baseline = _write(tmp_path / "then.jsonl", [
        _rec("refund", 0.9, outcome="refund"), _rec("reject", 0.6, outcome="reject"),
    ])
    report = check_records(contract, current, baseline=baseline)
    assert report["metrics"]["confidence"]["histogram"] == [0, 1, 1, 2]
    assert report["baseline"]["metrics"]["confidence"]["histogram"] == [0, 0, 1, 1]
    # shares [0, .25, .25, .5] vs [0, 0, .5, .5]: TV = (0 + .25 + .25 + 0) / 2
    assert report["drift"]["confidence_tv_distance"] == 0.25
    assert report["drift"]["accuracy_drop"] == 1.0 - 0.75
    assert report["drift"]["confidence_mean_delta"] == pytest.approx(0.7 - 0.75)
    [check] = report["checks"]
    assert check["status"] == "fail"
    assert check["message"] == "confidence_tv_distance 0.25 violates <= 0.2"


def test_drift_gates_without_baseline_fail_with_reason(tmp_path: Path) -> None:
    contract = _contract(tmp_path, {"warnings": {"max_ece_increase": 0.1}})
    report = check_records(contract, _write(tmp_path / "r.jsonl", [_rec("refund", 0.9)]))
    [check] = report["checks"]
    assert check["level"] == "warning" and check["status"] == "warn"
    assert check["message"] == (
        "ece_increase could not be computed "
        "(no baseline was provided or the metric is unavailable)"
    )
    assert report["status"] == "warn" and report["exit_code"] == 0
    strict = check_records(
        contract, _write(tmp_path / "r.jsonl", [_rec("refund", 0.9)]), fail_on_warn=True
    )
    assert strict["exit_code"] == 1


def test_segments_are_distinct_by_type_and_missing_is_one_group(tmp_path: Path) -> None:
    contract = _contract(
        tmp_path, {"segments": ["tier"], "segment_requirements": {"min_accuracy": 0.5}}
    )
    records = [
        _rec("refund", 0.9, outcome="refund", metadata={"tier": 1}),
        _rec("refund", 0.9, outcome="reject", metadata={"tier": "1"}),
        _rec("refund", 0.9, outcome="refund", metadata={"tier": True}),
        _rec("refund", 0.9, outcome="refund", metadata={"tier": None}),
        _rec("refund", 0.9, outcome="reject", metadata={}),
        _rec("refund", 0.9, outcome="refund"),
    ]
    report = check_records(contract, _write(tmp_path / "r.jsonl", records))
    groups = [(s["value"], s["metrics"]["counts"]["total"], s["status"])
              for s in report["segments"]]
    # ordered by type name then repr: NoneType, bool, int, str
    assert groups == [(None, 3, "pass"), (True, 1, "pass"), (1, 1, "pass"), ("1", 1, "fail")]
    assert [type(s["value"]) for s in report["segments"]] == [type(None), bool, int, str]
    gates = [c["gate"] for c in report["checks"]]
    assert gates == [
        "segment[tier=<missing>].min_accuracy",
        "segment[tier=True].min_accuracy",
        "segment[tier=1].min_accuracy",
        "segment[tier=1].min_accuracy",
    ]
    assert report["checks"][0]["message"] == "segment[tier=<missing>].accuracy 0.6667 >= 0.5"
    assert report["status"] == "fail"


def test_int_and_float_segment_values_stay_apart(tmp_path: Path) -> None:
    contract = _contract(tmp_path, {"segments": ["tier"]})
    records = [_rec("refund", 0.9, metadata={"tier": v}) for v in (1, 1.0, 1.5, 1)]
    report = check_records(contract, _write(tmp_path / "r.jsonl", records))
    assert [(s["value"], s["metrics"]["counts"]["total"]) for s in report["segments"]] == [
        (1.0, 1), (1.5, 1), (1, 2)
    ]
    assert [type(s["value"]) for s in report["segments"]] == [float, float, int]


def test_no_gates_pass_and_null_metrics_fail(tmp_path: Path) -> None:
    contract = _contract(tmp_path, {})
    path = _write(tmp_path / "r.jsonl", [_rec("refund", 0.9)])
    report = check_records(contract, path)
    assert (report["status"], report["exit_code"], report["checks"]) == ("pass", 0, [])
    assert report["metrics"]["outcomes"] == {"n": 0, "accuracy": None, "error_rate": None}
    gated = _contract(tmp_path, {"requirements": {"min_accuracy": 0.9, "max_fallback_rate": 0.1}})
    failing = check_records(gated, path)
    assert [c["message"] for c in failing["checks"]] == [
        "accuracy could not be computed (no eligible production records)",
        "fallback_rate could not be computed (no eligible production records)",
    ]
    assert failing["exit_code"] == 1


def test_exact_sums_equal_fsum_in_any_split() -> None:
    rng = np.random.default_rng(7)
    values = rng.random(5000) * 10.0 ** rng.integers(-8, 8, 5000)
    groups = rng.integers(0, 3, values.size)
    whole = group_sums(values, groups, 3)
    halves = [group_sums(values[:1234], groups[:1234], 3),
              group_sums(values[1234:], groups[1234:], 3)]
    for g in range(3):
        expected = math.fsum(values[groups == g].tolist())
        assert to_float(whole[g]) == expected
        assert to_float(halves[0][g] + halves[1][g]) == expected


def test_partitions_merge_to_the_same_bits(tmp_path: Path) -> None:
    contract = _contract(tmp_path, {"segments": ["locale"]})
    rng = random.Random(3)
    records = []
    for i in range(600):
        raw = [rng.random() for _ in LABELS]
        total = sum(raw)
        probabilities = dict(zip(LABELS, [v / total for v in raw], strict=True))
        top = max(LABELS, key=lambda k: probabilities[k])
        records.append({
            "id": f"r{i}", "decision": "refund_request", "probabilities": probabilities,
            "selected": top, "outcome": rng.choice(LABELS),
            "latency_ms": rng.random() * 100, "cost": rng.random(),
            "action": rng.choice(["accept", "fallback", "abstain", "human_review"]),
            "metadata": {"locale": rng.choice(["en", "it", "de"])},
        })
    single = check_records(contract, _write(tmp_path / "all.jsonl", records))
    folder = tmp_path / "parts"
    folder.mkdir()
    for n, start in enumerate(range(0, 600, 170)):
        _write(folder / f"part-{n}.jsonl", records[start:start + 170])
    parts = check_records(contract, str(folder))
    for key in ("metrics", "segments", "checks", "status"):
        assert parts[key] == single[key]
    confidences = [r["probabilities"][r["selected"]] for r in records]
    assert single["metrics"]["confidence"]["mean"] == math.fsum(confidences) / 600
    assert single["metrics"]["confidence"]["p95"] == pytest.approx(
        float(np.percentile(confidences, 95)), rel=1e-15
    )


def test_value_counts_percentiles_match_a_sorted_list_in_any_split() -> None:
    from decflow.metrics.quantiles import ValueCounts

    def reference(values: list[float], q: float) -> float:
        ordered = sorted(values)
        position = (len(ordered) - 1) * q / 100
        low, high = math.floor(position), math.ceil(position)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    rng = np.random.default_rng(11)
    for values in (rng.random(1001).tolist(), rng.integers(0, 5, 999).astype(float).tolist()):
        parts = [ValueCounts.of(values[i:i + 97]) for i in range(0, len(values), 97)]
        merged = parts[0]
        for part in parts[1:]:
            merged = merged.merge(part)
        for q in (0, 50, 95, 100):
            assert merged.percentile(q) == reference(values, q)
        assert merged.n == len(values)


@pytest.mark.parametrize("values,kind", [
    (np.array([3, 1, 2**64 - 1], dtype=np.uint64), None),
    (np.array([1.5, -0.0, np.inf]), None),
    (np.arange(10, dtype=np.int64)[::3], None),  # not contiguous
    (np.array([1, 2, 3], dtype=np.int32), pa.float64()),  # converted
    (np.empty(0), pa.int64()),
])
def test_arrow_arrays_from_numpy_buffers_equal_pyarrows_own(values, kind) -> None:
    expected = pa.array(values, type=kind) if kind is None else pa.array(
        values.astype(kind.to_pandas_dtype()), type=kind)
    assert arrow_array(values, kind).equals(expected)


def test_inlined_records_show_instants_in_utc_whatever_their_year(tmp_path: Path) -> None:
    """An input offset can move a valid instant into year 0 or 10000 in UTC, which Python's
    datetime cannot hold: the report still shows it (it crashed with `internal error`)."""
    contract = _contract(tmp_path, {"requirements": {}})
    stamps = ["0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00",
              "2026-09-24T11:00:00.250+02:00", "2026-09-24T09:00:00Z"]
    records = [{**_rec("refund", 0.9), "id": f"r{i}", "timestamp": t}
               for i, t in enumerate(stamps)]
    report = check_records(contract, _write(tmp_path / "r.jsonl", records))
    assert [r["timestamp"] for r in report["records"]] == [
        "0000-12-31T23:30:00Z", "+10000-01-01T00:30:00Z", "2026-09-24T09:00:00.25Z",
        "2026-09-24T09:00:00Z"]


class _ByHour(BatchStats):
    """A batch's groups split by the hour of its timestamps, as a monitor splits windows."""

    def prefixes(self, table: pl.DataFrame) -> tuple[list[str], np.ndarray]:
        hours = table["timestamp"].dt.hour()
        names = hours.unique(maintain_order=True).to_list()
        numbers = hours.replace_strict(names, list(range(len(names))),
                                       return_dtype=pl.Int64).to_numpy()
        return [f"h{h}\x1e" for h in names], numbers


@pytest.mark.parametrize(("segments", "tabled"), [
    (["locale"], True), (["locale", "tier"], True), (["locale", "tier"], False), ([], True)])
def test_a_prefix_is_one_more_group_column(tmp_path: Path, segments: list[str], tabled: bool,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Statistics split by prefix in one pass equal those of each prefix's records alone,
    bit for bit (combinations renumbered through a table, or by value when there are many)."""
    if not tabled:
        monkeypatch.setattr(statistics, "_TABLED_COMBINATIONS", 1)
    contract = _contract(tmp_path, {"segments": segments} if segments else {})
    rng = random.Random(3)
    records = [
        _rec(rng.choice(LABELS), rng.uniform(0.34, 1.0), id=f"r{i}",
             outcome=rng.choice([*LABELS, None]), latency_ms=rng.uniform(5, 500),
             timestamp=f"2026-11-04T{rng.randrange(3):02d}:{rng.randrange(60):02d}:00Z",
             metadata={"locale": rng.choice(["en", "de", 7]), "tier": rng.choice([1, 2])})
        for i in range(1200)
    ]
    path = _write(tmp_path / "r.jsonl", records)
    spec = RecordSpec.from_contract(contract)
    table = RecordReader(path, spec).read_all()
    plain = BatchStats.of(spec, contract)
    split = _ByHour(plain.spec, plain.n_bins, plain.threshold)(table)
    expected: dict[str, dict] = {}
    for hour in table["timestamp"].dt.hour().unique(maintain_order=True).to_list():
        alone = table.filter(pl.col("timestamp").dt.hour() == hour)
        expected.update({f"h{hour}\x1e{group}": stats for group, stats in plain(alone).items()})
    assert sorted(split) == sorted(expected)
    frame, wanted = stats_frame(split), stats_frame(expected)
    assert frame.sort("group").equals(wanted.sort("group"))


def test_a_sketch_of_parts_equals_the_sketch_of_all_their_values() -> None:
    """Parts bucket their values once and merge: the same buckets and counts as one sketch
    of every value, whichever parts were sketched first (a batch's whole, then a segment)."""
    from decflow.metrics.quantiles import LogSketch, ValueCounts

    rng = np.random.default_rng(8)
    chunks = [rng.random(5000) ** 3, np.zeros(40), rng.integers(1, 400, 3000) / 4,
              np.repeat([0.5, 0.25], 700)]
    parts = [ValueCounts(chunks[0]), ValueCounts(chunks[1]), ValueCounts.of(chunks[2]),
             ValueCounts(chunks[3])]
    some = parts[2].merge(parts[0]).sketch()  # sketched first: its parts keep their buckets
    whole = parts[0].merge(parts[1]).merge(parts[2]).merge(parts[3]).sketch()
    for sketch, values in ((some, [chunks[2], chunks[0]]), (whole, chunks)):
        expected = LogSketch.of(np.concatenate(values))
        assert sketch.zeros == expected.zeros
        assert sketch.buckets.tolist() == expected.buckets.tolist()
        assert sketch.counts.tolist() == expected.counts.tolist()
