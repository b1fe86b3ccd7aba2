"""The production check at scale, on small inputs: units (files, Parquet row groups) give the
single-pass report bit for bit, ids are unique across units, a rewritten input is never a
stale cache hit, and the percentile sketch keeps its stated bound on adversarial inputs."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import decflow.data.records.units as record_units
import decflow.metrics.quantiles as quantiles
from decflow.contracts import load_contract
from decflow.errors import DatasetError
from decflow.metrics.quantiles import RELATIVE_ERROR, Distribution, LogSketch, ValueCounts
from decflow.pipeline.production.run import check_records
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "refund"
LABELS = ("refund", "reject", "review")
COMPARED = ("status", "exit_code", "metrics", "drift", "segments", "checks", "percentiles")


@pytest.fixture(scope="module")
def contract():
    return load_contract(EXAMPLE / "decguard.yaml").contract


def _records(n: int, seed: int = 3, start: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        raw = rng.random(3) ** 3
        probs = (raw / raw.sum()).tolist()
        out.append({
            "id": f"r{start + i}", "decision": "refund_request",
            "probabilities": dict(zip(LABELS, probs, strict=True)),
            "selected": LABELS[int(np.argmax(probs))],
            "outcome": LABELS[int(rng.integers(0, 3))],
            "latency_ms": float(rng.random() * 300) if i % 7 else 0.0,
            "cost": float(rng.integers(0, 5)),
            "metadata": {"locale": ["en", "it", "de"][int(rng.integers(0, 3))]},
        })
    return out


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _parquet(path: Path, records: list[dict], row_group_size: int) -> Path:
    rows = []
    for record in records:
        row = dict(record)
        row["metadata_json"] = json.dumps(row.pop("metadata"))
        rows.append(row)
    pl.DataFrame(rows).write_parquet(path, row_group_size=row_group_size)
    return path


@pytest.mark.parametrize("exact_limit", [100_000, 40])
def test_units_give_the_single_pass_report_bit_for_bit(
    contract, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exact_limit: int
) -> None:
    """The same 600 records as one file (one unit), as 7 files, and as one Parquet file of
    row groups split into units: equal reports, exact or sketched percentiles alike."""
    monkeypatch.setattr(quantiles, "EXACT_LIMIT", exact_limit)
    records = _records(600)
    single = check_records(contract, str(_jsonl(tmp_path / "all.jsonl", records)))
    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(0, 600, 90):
        _jsonl(folder / f"p{i:03d}.jsonl", records[i:i + 90])
    monkeypatch.setattr(record_units, "UNIT_ROWS", 120)
    parquet = _parquet(tmp_path / "all.parquet", records, row_group_size=50)
    plans = [check_records(contract, str(folder)), check_records(contract, str(parquet))]
    # one JSONL file split at line boundaries into units of about 30 kB
    monkeypatch.setattr(record_units, "_READ_BYTES", 10_000)
    monkeypatch.setattr(record_units, "UNIT_BYTES", 30_000)
    plans.append(check_records(contract, str(tmp_path / "all.jsonl")))
    for other in plans:
        for key in COMPARED:
            assert other[key] == single[key], key
    sketched = single["percentiles"]["sketched"]
    assert ("confidence" in sketched) == (exact_limit < 600)
    from decflow.views.outputs import render_text

    said = "within 0.1 % of the exact value" in render_text(single)
    assert said == (exact_limit < 600)
    if exact_limit < 600:
        exact = sorted(max(r["probabilities"].values()) for r in records)
        p95 = single["metrics"]["confidence"]["p95"]
        assert p95 != float(np.percentile(exact, 95))
        assert abs(p95 - np.percentile(exact, 95)) <= RELATIVE_ERROR * np.percentile(exact, 95)


def test_duplicate_ids_across_units_are_found(
    contract, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(record_units, "UNIT_ROWS", 100)
    records = _records(300)
    records[250]["id"] = records[20]["id"]
    parquet = _parquet(tmp_path / "r.parquet", records, row_group_size=100)
    with pytest.raises(DatasetError, match=r"r.parquet: row 251: duplicate record id 'r20' "
                                           r"\(first at row 21\)"):
        check_records(contract, str(parquet))
    # a bad record in a later unit than a duplicate: the duplicate comes first in file order
    folder = tmp_path / "parts"
    folder.mkdir()
    _jsonl(folder / "a.jsonl", _records(50))
    _jsonl(folder / "b.jsonl", [*_records(3, start=100), _records(1)[0]])
    bad = _records(2, start=200)
    bad[1]["selected"] = "nope"
    _jsonl(folder / "c.jsonl", bad)
    with pytest.raises(DatasetError, match=r"b.jsonl: line 4: duplicate record id 'r0' "
                                           r"\(first at line 1 of .*a.jsonl\)"):
        check_records(contract, str(folder))
    # and the first bad record in file order wins over a later unit's
    (folder / "b.jsonl").write_text(json.dumps({**_records(1, start=300)[0], "cost": -1}) + "\n")
    with pytest.raises(DatasetError, match=r"b.jsonl: line 1: invalid production record"):
        check_records(contract, str(folder))


def test_a_large_jsonl_file_is_split_at_lines_and_errors_keep_their_line(
    contract, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from decflow.data.records.units import plan_source

    monkeypatch.setattr(record_units, "_READ_BYTES", 10_000)
    monkeypatch.setattr(record_units, "UNIT_BYTES", 30_000)
    records = _records(600)
    path = _jsonl(tmp_path / "r.jsonl", [*records[:100], *records[100:]])
    units = plan_source(str(path)).units
    assert len(units) > 3
    assert sum(u.n_records for u in units) == 600
    firsts = [u.parts[0].first_row for u in units]
    assert firsts == [1 + sum(u.n_records for u in units[:k]) for k in range(len(units))]
    lines = path.read_text().splitlines()
    lines[450] = lines[450].replace('"decision": "refund_request"', '"decision": "x"')
    lines.insert(300, "   ")  # a blank line: line numbers and positions part ways
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=r"r.jsonl: line 452: decision 'x' does not match"):
        check_records(contract, str(path))


def test_default_ids_count_positions_across_units(
    contract, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(record_units, "UNIT_ROWS", 10)
    records = [{k: v for k, v in r.items() if k != "id"} for r in _records(30)]
    records[25]["id"] = "record-4"  # the 4th record has no id, so it is `record-4`
    parquet = _parquet(tmp_path / "r.parquet", records, row_group_size=10)
    with pytest.raises(DatasetError, match=r"row 26: duplicate record id 'record-4' "
                                           r"\(first at row 4\)"):
        check_records(contract, str(parquet))


def test_a_rewritten_input_never_hits_a_stale_cache(contract, tmp_path: Path) -> None:
    """Same size, same modification time, different bytes: a new key, new numbers."""
    from decflow.pipeline.production.run import run_check

    path = _jsonl(tmp_path / "r.jsonl", _records(50))
    store = str(tmp_path / "store")
    contract_path = str(EXAMPLE / "decguard.yaml")
    first = run_check(contract_path, str(path), store=store)
    stat = path.stat()
    text = path.read_text()
    rewritten = text.replace('"cost": 1.0', '"cost": 2.0', 1)
    assert rewritten != text and len(rewritten) == len(text)
    path.write_text(rewritten)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    second = run_check(contract_path, str(path), store=store)
    assert second["dataset"]["hash"] != first["dataset"]["hash"]
    assert second["metrics"]["cost"]["total"] == first["metrics"]["cost"]["total"] + 1
    again = run_check(contract_path, str(path), store=store)
    assert again["metrics"] == second["metrics"]


def test_blank_lines_through_the_store_count_records_exactly(
    contract, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored check plans a JSONL file by its lines; blank lines make it plan again,
    exactly, so default ids after them count records, not lines."""
    from decflow.pipeline.production.run import run_check

    monkeypatch.setattr(record_units, "_READ_BYTES", 10_000)
    monkeypatch.setattr(record_units, "UNIT_BYTES", 30_000)
    # not inlined in the report, so never read again for it: only the stages decide
    monkeypatch.setattr("decflow.pipeline.production.summary.INLINE_RECORDS", 0)
    records = [{k: v for k, v in r.items() if k != "id"} for r in _records(600)]
    lines = [json.dumps(r) for r in records]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([*lines[:100], "", " ", *lines[100:]]) + "\n")
    contract_path = str(EXAMPLE / "decguard.yaml")
    stored = run_check(contract_path, str(path), store=str(tmp_path / "store"))
    single = check_records(contract, str(path))
    for key in COMPARED:
        assert stored[key] == single[key], key
    # the 550th record (line 552) has the default id record-550: repeat it at the end
    path.write_text(path.read_text() + json.dumps({**records[0], "id": "record-550"}) + "\n")
    with pytest.raises(DatasetError, match=r"line 603: duplicate record id 'record-550' "
                                           r"\(first at line 552\)"):
        run_check(contract_path, str(path), store=str(tmp_path / "store"))


def test_a_stored_check_reads_blocks_side_by_side_with_the_single_pass_errors(
    contract, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored check reads a JSONL unit's blocks as separate tasks: the same report, and
    the first problem in file order, as one pass."""
    import decflow.data.records.reader as records_module
    from decflow.pipeline.production.run import run_check

    monkeypatch.setattr(record_units, "_READ_BYTES", 10_000)
    monkeypatch.setattr(records_module, "JSONL_CHUNK_BYTES", 10_000)
    monkeypatch.setattr(record_units, "UNIT_BYTES", 30_000)
    monkeypatch.setattr("decflow.pipeline.production.summary.INLINE_RECORDS", 0)
    records = _records(600)
    path = _jsonl(tmp_path / "r.jsonl", records)
    contract_path = str(EXAMPLE / "decguard.yaml")

    def stored() -> dict:
        return run_check(contract_path, str(path), store=str(tmp_path / "store"))

    single = check_records(contract, str(path))
    report = stored()
    for key in COMPARED:
        assert report[key] == single[key], key
    bad = [*records[:451], {**records[451], "selected": "nope"}, *records[452:]]
    _jsonl(path, bad)
    with pytest.raises(DatasetError, match=r"r.jsonl: line 452: selected 'nope'"):
        stored()
    _jsonl(path, [*records[:499], {**records[499], "id": "r20"}, *records[500:]])
    with pytest.raises(DatasetError, match=r"line 500: duplicate record id 'r20' "
                                           r"\(first at line 21\)"):
        stored()
    # a duplicate in an earlier block than a bad record comes first, a later one after it
    _jsonl(path, [*bad[:299], {**bad[299], "id": "r20"}, *bad[300:]])
    with pytest.raises(DatasetError, match=r"line 300: duplicate record id 'r20'"):
        stored()
    _jsonl(path, [*bad[:499], {**bad[499], "id": "r20"}, *bad[500:]])
    with pytest.raises(DatasetError, match=r"line 452: selected 'nope'"):
        stored()


def test_a_cached_unit_keeps_the_default_ids_of_its_place(
    contract, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file's cached statistics are not reused once the records before it change in
    number: its default ids (`record-<n>`) count them."""
    from decflow.pipeline.production.run import run_check

    monkeypatch.setattr("decflow.pipeline.production.summary.INLINE_RECORDS", 0)
    folder = tmp_path / "parts"
    folder.mkdir()
    _jsonl(folder / "a.jsonl", _records(10))
    _jsonl(folder / "b.jsonl", [{k: v for k, v in r.items() if k != "id"}
                                for r in _records(5, start=100)])  # record-11 … record-15
    contract_path = str(EXAMPLE / "decguard.yaml")
    store = str(tmp_path / "store")
    assert run_check(contract_path, str(folder), store=store)["dataset"]["n_records"] == 15
    # one more record in a.jsonl: b.jsonl's records become record-12 … record-16
    _jsonl(folder / "a.jsonl", [*_records(10), {**_records(1)[0], "id": "record-16"}])
    with pytest.raises(DatasetError, match=r"b.jsonl: line 5: duplicate record id "
                                           r"'record-16' \(first at line 11 of "):
        run_check(contract_path, str(folder), store=store)


def _adversarial(rng: np.random.Generator) -> dict[str, np.ndarray]:
    gamma = (1 + quantiles._ALPHA) / (1 - quantiles._ALPHA)
    edges = gamma ** np.arange(-2000, 2000, dtype=np.float64)
    return {
        "ascending": np.arange(1, 200_001, dtype=np.float64),
        "descending": np.arange(200_000, 0, -1, dtype=np.float64),
        "bucket edges": np.repeat(edges, 50),
        "bucket edges, nudged": np.nextafter(np.repeat(edges, 50), np.inf),
        "two far clusters": np.concatenate([np.full(150_000, 1e-300), np.full(50_001, 1e300)]),
        "subnormals and zeros": np.concatenate([np.zeros(60_000), np.full(70_000, 5e-324),
                                                rng.random(80_000) * 1e-310]),
        "one value": np.full(150_001, 0.7),
        "heavy tail": rng.pareto(0.5, 200_000),
        "log-uniform": np.exp(rng.uniform(-700, 700, 200_000)),
        "ties at the p95 rank": np.concatenate([np.full(190_000, 1.0), np.full(10_001, 2.0)]),
        "confidences": rng.random(300_000) ** 0.2,
    }


@pytest.mark.parametrize("q", [0, 1, 5, 25, 50, 75, 95, 99, 99.9, 100])
def test_the_sketch_bound_holds_on_adversarial_inputs(q: float) -> None:
    rng = np.random.default_rng(20261201)
    for name, values in _adversarial(rng).items():
        sketched = Distribution.of(values)
        assert not sketched.is_exact, name
        exact = ValueCounts.of(values).percentile(q)
        got = sketched.percentile(q)
        assert got is not None and exact is not None
        assert abs(got - exact) <= RELATIVE_ERROR * abs(exact), (name, q, got, exact)


def test_sketches_merge_to_the_same_bits_in_any_split() -> None:
    rng = np.random.default_rng(7)
    values = rng.lognormal(0, 3, 250_001)
    whole = Distribution.of(values)
    for cuts in (rng.integers(0, values.size, 9), np.array([10, 99_999, 100_002])):
        pieces = np.split(rng.permutation(values), np.sort(cuts))
        merged = Distribution.of(pieces[0])
        for piece in pieces[1:]:
            merged = merged.merge(Distribution.of(piece))
        for q in (50, 95, 99):
            assert merged.percentile(q) == whole.percentile(q)
        assert merged.n == whole.n


def test_statistics_read_back_from_the_store_as_they_were(tmp_path: Path) -> None:
    """Exact values (once each, or with counts), sketches and empty distributions keep
    their percentiles through the stored table; every count and exact sum too."""
    from dataclasses import fields

    from decflow.metrics.production import GroupStats, stats_frame, stats_from_frame

    rng = np.random.default_rng(5)
    groups = {
        "": GroupStats(total=7, bin_count=[1, 2], brier_sum=3 << 1100, bin_confidence=[5, -1],
                       confidence=Distribution.of(rng.random(1000)),
                       latency=Distribution(exact=ValueCounts.of([1.0, 1.0, 2.5])),
                       cost=Distribution.of(rng.random(quantiles.EXACT_LIMIT + 1))),
        "locale\x1fstr:'it'": GroupStats(total=1),
    }
    path = tmp_path / "stats.parquet"
    stats_frame(groups).write_parquet(path)
    back = stats_from_frame(pl.read_parquet(path))
    assert list(back) == list(groups)
    for name, stats in groups.items():
        for f in fields(stats):
            mine, theirs = getattr(stats, f.name), getattr(back[name], f.name)
            if isinstance(mine, Distribution):
                assert (theirs.n, theirs.is_exact) == (mine.n, mine.is_exact), f.name
                for q in (0, 50, 95, 100):
                    assert theirs.percentile(q) == mine.percentile(q), (f.name, q)
            else:
                assert theirs == mine, f.name


def test_exact_up_to_the_limit() -> None:
    values = np.random.default_rng(1).random(quantiles.EXACT_LIMIT)
    half = quantiles.EXACT_LIMIT // 2
    merged = Distribution.of(values[:half]).merge(Distribution.of(values[half:]))
    assert merged.is_exact
    assert merged.percentile(95) == pytest.approx(float(np.percentile(values, 95)), rel=1e-15)
    assert not merged.merge(Distribution.of([0.5])).is_exact
    assert LogSketch.of([0.0, 0.0]).percentile(50) == 0.0
    assert math.isclose(LogSketch.of([3.0]).percentile(50), 3.0, rel_tol=RELATIVE_ERROR)


def test_worker_processes_give_the_threads_report(
    contract, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large Parquet inputs are read by spawned worker processes: the same report as
    threads. (JSONL units always use threads: Arrow's parser runs without the GIL.)"""
    import decflow.pipeline.production.workers as check_units
    from decflow.data.records.units import plan_source

    folder = tmp_path / "parts"
    folder.mkdir()
    records = _records(300)
    _parquet(folder / "p000.parquet", records[:100], row_group_size=50)
    _parquet(folder / "p100.parquet", records[100:200], row_group_size=50)
    _jsonl(folder / "p200.jsonl", records[200:])
    threads = check_records(contract, str(folder))
    monkeypatch.setattr(check_units, "PROCESS_RECORDS", 1)
    assert check_units.in_processes(plan_source(str(folder)).units)
    assert not check_units.in_processes(plan_source(str(folder / "p200.jsonl")).units)
    assert not check_units.spawn_is_safe()  # pytest's main: the SDK's rule gives threads
    monkeypatch.setattr(check_units, "spawn_is_safe", lambda: True)  # pytest's main is guarded
    processes = check_records(contract, str(folder))
    for key in COMPARED:
        assert processes[key] == threads[key], key
    records[250]["id"] = records[5]["id"]
    _jsonl(folder / "p200.jsonl", records[200:])
    with pytest.raises(DatasetError, match=r"p200.jsonl: line 51: duplicate record id 'r5'"):
        check_records(contract, str(folder))
