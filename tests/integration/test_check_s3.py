"""Records and the store on S3-compatible storage: a local moto server started here, one
configuration (the standard AWS_* environment variables) for fsspec/s3fs and polars."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from decflow.pipeline.production.run import run_check
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "refund"
CONTRACT = str(EXAMPLE / "decguard.yaml")
COMPARED = ("status", "exit_code", "metrics", "drift", "segments", "checks", "records")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "decflow-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "decflow-test-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_REGION", raising=False)
    import boto3

    from decflow.store.remote import filesystem

    for bucket in ("logs", "runs"):
        boto3.client("s3").create_bucket(Bucket=bucket)
    fs, _ = filesystem("s3://logs")
    try:
        yield fs
    finally:
        server.stop()


def test_records_and_store_on_s3_give_the_local_report(s3, tmp_path: Path) -> None:
    lines = (EXAMPLE / "production.jsonl").read_text().splitlines()
    rows = []
    for line in lines[2:]:
        record = json.loads(line)
        record["metadata_json"] = json.dumps(record.pop("metadata"))
        rows.append(record)
    parquet = tmp_path / "b.parquet"
    pl.DataFrame(rows).with_columns(
        pl.col("timestamp").str.to_datetime(time_zone="UTC")
    ).write_parquet(parquet)
    s3.pipe("logs/day=1/a.jsonl", ("\n".join(lines[:2]) + "\n").encode())
    s3.put(str(parquet), "logs/day=2/b.parquet")
    local = tmp_path / "local"
    (local / "day=1").mkdir(parents=True)
    (local / "day=2").mkdir()
    (local / "day=1" / "a.jsonl").write_text("\n".join(lines[:2]) + "\n")
    parquet.rename(local / "day=2" / "b.parquet")

    expected = run_check(CONTRACT, str(local), store=str(tmp_path / "local-store"))
    remote = run_check(CONTRACT, "s3://logs", store=str(tmp_path / "other-store"))
    stored = run_check(CONTRACT, "s3://logs", store="s3://runs/decflow")
    for report in (remote, stored):
        for key in COMPARED:
            assert report[key] == expected[key], key
        assert report["dataset"]["hash"] == expected["dataset"]["hash"]
        assert report["dataset"]["partitions"] == 2
    written = s3.find("runs/decflow/stages")
    assert any("/stages/records/" in p and p.endswith("_manifest.json") for p in written)
    assert any("/stages/aggregates/" in p for p in written)
    # the same check again is answered from the stored stages (a run judges its own summary)
    again = run_check(CONTRACT, "s3://logs", store="s3://runs/decflow")
    assert again["metrics"] == stored["metrics"]
    added = set(s3.find("runs/decflow/stages")) - set(written)
    assert added and all("/stages/summary/" in p for p in added)
    # both checks are runs in the S3 store, like any run
    assert s3.exists(f"runs/decflow/runs/{stored['run']['id']}/report.json")


def test_a_run_on_an_s3_store_holds_a_lease_while_it_works(s3) -> None:
    """No atomic exclusive create on S3: the run's lock is a lease object, held while the run
    works (a second holder is refused), gone once it ends; the run lists as finished."""
    from decflow.pipeline.contract_run.runner import run_contract
    from decflow.pipeline.spec import RunSpec
    from decflow.store.locks import Lock, LockHeld
    from decflow.store.runs import new_run_id, run_path
    from decflow.store.store import Store
    from tests.support.cli import run_cli
    from tests.support.paths import ROOT

    store = Store("s3://runs/decflow")
    spec = RunSpec(contract_path=str(ROOT / "contracts" / "refund" / "decflow.yaml"),
                   store_url=store.url, run_id=new_run_id())
    lease = f"runs/decflow/{run_path(spec.run_id, 'lease.json')}"
    seen: list[bool] = []

    def during(stage: str, _manifest: object) -> None:
        if stage == "results":  # under way: its lease is there, and a second is refused
            seen.append(s3.exists(lease))
            with pytest.raises(LockHeld):
                Lock(store, run_path(spec.run_id), "run").acquire()

    report = run_contract(spec, store, on_stage=during)
    assert report["status"] == "pass" and seen == [True]
    assert not s3.exists(lease)  # released
    code, text, _ = run_cli("runs", "--store", store.url)
    assert code == 0 and text.splitlines()[1].split()[-2] == "pass"
