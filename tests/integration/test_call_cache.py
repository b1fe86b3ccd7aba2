"""The call cache, counted at a real decision service on 127.0.0.1 (`counting_service`,
whose answers are all different, as a sampled model's): a second identical run sends
nothing and writes the same report, reruns replayed one by one; one more rerun sends one
request per case; read-only never writes, refresh asks again; errors are never stored;
noise reruns are always sent; a diff says how many answers each side took from the cache;
the packs are artifacts `runs` sizes and `runs rm`/`gc` remove with their last run."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.compare import normalized
from tests.support.servers.counting import CountingService, counting_service, write_contract

CASES = 6
REPEATS = 3


@pytest.fixture
def service() -> Any:
    with counting_service(delay_s=0.0, noisy=True) as running:
        yield running


def contract(folder: Path, service: CountingService, repeats: int | None = REPEATS) -> Path:
    """Stability reruns (`repeats` draws per case, none when None) and option orders."""
    path = write_contract(folder, service.url, CASES, 4)
    document = yaml.safe_load(path.read_text())
    if repeats is not None:
        document["diagnostics"] = {"stability": {"repeats": repeats, "epsilon": 0.5}}
    document["properties"] = {"option_order": {"samples": 2, "max_tv_distance": 0.9}}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def run(service: CountingService, path: Path, store: Path, *args: str
        ) -> tuple[dict[str, Any], Counter[str]]:
    """`test --all` with `args`: (its report, what the service received meanwhile)."""
    before, _ = service.snapshot()
    out = store.parent / f"report-{len(list(store.parent.glob('report-*')))}.json"
    code, _, err = run_cli("test", "--all", str(path), "--store", str(store), "-o", str(out),
                           *args)
    assert code in (0, 1), err
    after, _ = service.snapshot()
    return json.loads(out.read_text()), after - before


def packs(store: Path) -> list[str]:
    folder = store / "stages" / "calls"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def masked(report: dict[str, Any]) -> dict[str, Any]:
    """What two runs of the same answers share: no ids, times, latencies or cache marks."""
    shown = normalized(report, [])
    shown.pop("call_cache", None)
    # stages keyed by the run or fed by its results (whose rows name the entries served)
    artifacts = shown["run"]["artifacts"]
    shown["run"]["artifacts"] = {name: artifacts[name]["rows"] for name in artifacts}
    for item in shown["results"]:
        (item["result"] or {}).pop("cache_entry", None)
    for item in shown["failures"]:
        item.pop("cache_entry", None)
    return shown


def test_a_second_identical_run_sends_nothing_and_reports_the_same(
    tmp_path: Path, service: CountingService,
) -> None:
    path, store = contract(tmp_path, service), tmp_path / "store"
    first, sent = run(service, path, store, "--call-cache", "read-write")
    requests = CASES * (1 + (REPEATS - 1) + 2)  # originals, reruns, option orders
    assert sum(sent.values()) == requests and max(sent.values()) == 1
    assert first["call_cache"]["requests_sent"] == requests
    assert first["call_cache"]["served_from_cache"] == 0
    assert all("cache_entry" not in item["result"] for item in first["results"])

    second, sent = run(service, path, store, "--call-cache", "read-write")
    assert sum(sent.values()) == 0
    assert second["call_cache"]["requests_sent"] == 0
    assert second["call_cache"]["served_from_cache"] == requests
    assert second["call_cache"]["backend_seconds_saved"] > 0
    # each rerun got its own answer back (a collapsed cache would give a stable meter)
    assert masked(second) == masked(first)
    assert first["diagnostics"]["stability"] == second["diagnostics"]["stability"]
    assert all(item["result"]["cache_entry"] in packs(store) for item in second["results"])
    assert "Call cache read-write: 0 requests sent to the backend" in run_cli(
        "report", second["run"]["id"], "--store", str(store))[1]
    record = json.loads(run_cli("runs", "show", second["run"]["id"], "--store",
                                str(store))[1])
    assert record["spec"]["call_cache"] == "read-write"


def test_one_more_rerun_sends_one_request_per_case(
    tmp_path: Path, service: CountingService,
) -> None:
    store = tmp_path / "store"
    run(service, contract(tmp_path, service), store, "--call-cache", "read-write")
    _, sent = run(service, contract(tmp_path, service, repeats=REPEATS + 1), store,
                  "--call-cache", "read-write")
    assert sent == Counter({f"stability/c{i:04d}/{REPEATS}": 1 for i in range(CASES)})


def test_read_only_never_writes_and_refresh_asks_again(
    tmp_path: Path, service: CountingService, monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, store = contract(tmp_path, service), tmp_path / "store"
    report, sent = run(service, path, store, "--call-cache", "read-only")
    total = sum(sent.values())
    assert total and packs(store) == [] and report["call_cache"]["served_from_cache"] == 0
    monkeypatch.setenv("DECFLOW_CALL_CACHE", "refresh")  # the environment's mode
    report, sent = run(service, path, store)
    assert sum(sent.values()) == total and report["call_cache"]["mode"] == "refresh"
    written = packs(store)
    assert written
    _, sent = run(service, path, store, "--call-cache", "refresh")
    assert sum(sent.values()) == total and len(packs(store)) == 2 * len(written)
    monkeypatch.delenv("DECFLOW_CALL_CACHE")
    report, sent = run(service, path, store, "--call-cache", "read-only")
    assert sum(sent.values()) == 0 and len(packs(store)) == 2 * len(written)
    # the newest answers are served: those of the second refresh
    newest = {json.loads((store / "stages" / "calls" / p / "_manifest.json").read_text())[
        "extra"]["written_at"]: p for p in packs(store)}
    assert {item["result"]["cache_entry"] for item in report["results"]} <= {
        newest[when] for when in sorted(newest)[len(written):]}
    report, sent = run(service, path, store)  # the default is off
    assert sum(sent.values()) == total and "call_cache" not in report


def test_errors_are_never_stored(tmp_path: Path, service: CountingService) -> None:
    path, store = contract(tmp_path, service), tmp_path / "store"
    service.failing_ids = {"c0001", "stability/c0002/1"}
    first, _ = run(service, path, store, "--call-cache", "read-write")
    assert first["metrics"]["counts"]["errored"] == 1
    service.failing_ids = set()
    _, sent = run(service, path, store, "--call-cache", "read-write")
    # the errored original and rerun are asked again, with the variants of c0001 that
    # were never sent because their original failed
    assert set(sent) == {"c0001", "stability/c0002/1", *(
        f"{prefix}/c0001/{k}" for prefix, ks in (("stability", (1, 2)),
                                                 ("option_order", (0, 1))) for k in ks)}


def test_noise_reruns_are_sent_and_a_diff_counts_each_sides_cached_answers(
    tmp_path: Path, service: CountingService,
) -> None:
    # the baseline's stability reruns store answers under the keys a noise run's reruns
    # have; the candidate has none, so the diff measures its noise with a noise run
    store = tmp_path / "store"
    baseline, _ = run(service, contract(tmp_path, service), store, "--call-cache", "read-write")
    candidate, sent = run(service, contract(tmp_path, service, repeats=None), store,
                          "--call-cache", "read-write")
    assert sum(sent.values()) == 0
    before, _ = service.snapshot()
    out = tmp_path / "diff.json"
    code, text, err = run_cli("diff", baseline["run"]["id"], candidate["run"]["id"],
                              "--store", str(store), "--noise-reruns", "2", "-o", str(out))
    assert code in (0, 1), err
    after, _ = service.snapshot()
    noise = after - before
    # two draws per case (the original request again and its first rerun): the cache holds
    # answers under both keys, yet every draw is sent
    assert noise == Counter({name: 1 for i in range(CASES)
                             for name in (f"c{i:04d}", f"stability/c{i:04d}/1")})
    diff = json.loads(out.read_text())
    assert diff["baseline"]["call_cache"]["served_from_cache"] == 0
    assert diff["candidate"]["call_cache"] == {
        "mode": "read-write", "requests_sent": 0,
        "served_from_cache": candidate["call_cache"]["served_from_cache"]}
    assert f"{candidate['call_cache']['served_from_cache']} answers from the call cache, 0 sent" \
        in text


def test_packs_are_sized_kept_by_their_readers_and_removed_with_the_last(
    tmp_path: Path, service: CountingService,
) -> None:
    path, store = contract(tmp_path, service), tmp_path / "store"
    writer, _ = run(service, path, store, "--call-cache", "read-write")
    reader, _ = run(service, path, store, "--call-cache", "read-only")
    written = packs(store)
    listing = run_cli("runs", "--store", str(store))[1]
    assert f"call cache: {writer['call_cache']['requests_sent']} answers in " \
           f"{len(written)} pack" in listing
    code, _, err = run_cli("runs", "verify", "--store", str(store))
    assert code == 0, err
    assert run_cli("runs", "rm", writer["run"]["id"], "--store", str(store))[0] == 0
    assert packs(store) == written  # the reader served its answers from them
    assert run_cli("runs", "rm", reader["run"]["id"], "--store", str(store))[0] == 0
    assert packs(store) == []


def test_a_sequential_run_counts_its_calls_without_the_cached_answers(
    tmp_path: Path, service: CountingService,
) -> None:
    path, store = contract(tmp_path, service), tmp_path / "store"
    flags = ("--sequential", "--order-seed", "3", "--batch", "2", "--call-cache", "read-write")
    first, sent = run(service, path, store, *flags)
    assert first["sequential"]["calls_made"] == sum(sent.values()) > 0
    second, sent = run(service, path, store, *flags)
    assert sum(sent.values()) == 0 and second["sequential"]["calls_made"] == 0
    assert second["sequential"]["calls_from_cache"] == first["sequential"]["calls_made"]
    assert second["call_cache"]["served_from_cache"] == first["sequential"]["calls_made"]


def variant(folder: Path, service: CountingService, name: str, query: str = "",
            headers: dict[str, str] | None = None) -> Path:
    """The contract with `?query` on its URL and static `headers`, as `name`."""
    document = yaml.safe_load(contract(folder, service, repeats=None).read_text())
    document["backend"]["url"] += query
    if headers is not None:
        document["backend"]["headers"] = headers
    path = folder / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.mark.parametrize("changes", [
    ({"query": "?variant=q-secret-a"}, {"query": "?variant=q-secret-b"}),
    ({"headers": {"X-Variant": "h-secret-a"}}, {"headers": {"X-Variant": "h-secret-b"}}),
], ids=["query", "headers"])
def test_another_query_or_static_header_is_another_request(
    tmp_path: Path, service: CountingService, changes: tuple[dict[str, Any], ...],
) -> None:
    store = tmp_path / "store"
    first, second = (variant(tmp_path, service, f"decflow-{side}.yaml", **change)
                     for side, change in zip("ab", changes, strict=True))
    report, sent = run(service, first, store, "--call-cache", "read-write")
    requests = CASES * (1 + 2)  # originals, option orders
    assert sum(sent.values()) == requests
    report, sent = run(service, second, store, "--call-cache", "read-write")
    assert sum(sent.values()) == requests
    assert report["call_cache"]["served_from_cache"] == 0
    _, sent = run(service, second, store, "--call-cache", "read-write")
    assert sum(sent.values()) == 0  # the same request again is served
    # the stored identity and the report keep neither the query nor a header value
    run_id = report["run"]["id"]
    stored = (store / "runs" / run_id / "call-identity.json").read_text()
    code, shown, _ = run_cli("runs", "show", run_id, "--store", str(store))
    assert code == 0 and "secret" not in stored + shown + json.dumps(report)
