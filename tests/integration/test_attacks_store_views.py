"""Attacks on the store and the views, and first-hour mistakes, through the command line.

Each table row is one attack or mistake and its documented outcome: the exit code, one
`error:` line and no traceback, and nothing outside the store touched (a sentinel folder
beside every store must survive every command; the store attacks aim at one). In order:
control and bidi characters in every view; run records leading out of the store (`runs gc`,
`verify`, `accept`, `rm`); option errors; probe runs' report.html; a resumed run's
progress; `--resume RUN -b/-d` and typos that leave no run; a damaged report's advice.
(`decflow serve`'s names apart from `decflow deploy`'s need a Prefect server:
tests/orchestration/test_orchestration.py.)
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from decflow.store.locks import Lock
from decflow.store.runs import run_path
from decflow.store.store import Store
from decflow.views.artifacts import report_artifact
from tests.support.cli import run_cli
from tests.support.paths import ROOT

REFUND = ROOT / "contracts" / "refund" / "decflow.yaml"

# ESC/BEL (an OSC title), a C1 CSI, bidi override and isolate, a line separator.
HOSTILE = "refund \x1b]0;pwned\x07 \x9b31m \u202egnp.exe \u2066isolate\u2069 \u2028end"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\u2069", "\u2028")

CONTRACT = """\
schema_version: "0.1"
decision: {{name: refund_request, type: choice, options: [refund, reject, review]}}
dataset: {dataset}
backend:
  provider: mock
  model: {model}
  position_bias: 0.3
  rules:
    - {{contains: refund, probabilities: {{refund: 0.2, reject: 0.7, review: 0.1}}}}
requirements: {{min_accuracy: 0.9}}
properties:
  option_order: {{max_tv_distance: 0.01}}
"""


def write_contract(folder: Path, *, model: str = "base", name: str = "c.yaml",
                   dataset: str = "cases.jsonl") -> Path:
    cases = [{"id": "c1", "input": HOSTILE, "expected": "refund"},
             {"id": "c2", "input": {"text": HOSTILE}, "expected": "refund"}]
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    path = folder / name
    path.write_text(CONTRACT.format(model=json.dumps(model), dataset=dataset))
    return path


@pytest.fixture(autouse=True)
def sentinel(tmp_path: Path) -> Any:
    """A folder beside every store of these tests that no command may touch."""
    folder = tmp_path / "sentinel"
    folder.mkdir()
    (folder / "keep.txt").write_text("untouched")
    yield
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]
    assert (folder / "keep.txt").read_text() == "untouched"


def assert_one_error(code: int, err: str, expected_code: int = 2) -> str:
    """Exit `expected_code`, exactly one `error:` line on stderr and no traceback; returns
    the line."""
    assert code == expected_code, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    assert "Error:" not in err.replace("error:", ""), err  # no typer box either
    return lines[0]


# -- views: control and bidi characters shown escaped in every format ---------------------

VIEW_FILES = ("--html", "--markdown", "--junit")


@pytest.fixture(scope="module")
def hostile_views(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every view of a failing run whose inputs and backend model are hostile text."""
    folder = tmp_path_factory.mktemp("views")
    contract = write_contract(folder, model=HOSTILE)
    store = folder / "store"
    files = {option: folder / f"view{option[1:]}" for option in VIEW_FILES}
    code, out, err = run_cli("test", "--all", str(contract), "--store", str(store),
                             *[str(part) for option, path in files.items()
                               for part in (option, path)])
    assert code == 1, err
    views = {option: path.read_text() for option, path in files.items()}
    (run_dir,) = (store / "runs").iterdir()
    views["stored report.html"] = (run_dir / "report.html").read_text()
    report = json.loads((run_dir / "report.json").read_text())
    views["Prefect artifact"] = report_artifact(report, {"report.json": HOSTILE})
    views["terminal"] = out
    return views


@pytest.mark.parametrize("view", [*VIEW_FILES, "stored report.html", "Prefect artifact",
                                  "terminal"])
def test_views_show_control_and_bidi_characters_escaped(hostile_views: dict[str, str],
                                                        view: str) -> None:
    text = hostile_views[view]
    assert [char for char in RAW if char in text] == []
    # Still visible, as escapes (Markdown doubles the backslash in its source).
    if view != "--junit":  # JUnit has no case inputs, only the model in its properties
        assert "\\u202egnp.exe" in text.replace("\\\\", "\\")
    assert "\\u2066isolate\\u2069" in text.replace("\\\\", "\\")


# -- the store: nothing outside it is touched; gc, rm and accept refuse what is damaged -------


@dataclass(frozen=True)
class Place:
    """A copy of a store of two finished runs (`first` older than `second`), beside a
    sentinel folder outside it that every command must leave as it is."""

    store: Path
    outside: Path
    first: str
    second: str
    source: Path  # the store this one copies: the commands its runs recorded name it

    def record(self, folder: str) -> dict[str, Any]:
        return dict(json.loads((self.store / "runs" / folder / "run.json").read_text()))

    def write_record(self, folder: str, **changes: Any) -> None:
        (self.store / "runs" / folder / "run.json").write_text(
            json.dumps({**self.record(folder), **changes}))

    def stage_folders(self, run_id: str) -> set[Path]:
        return {self.store / "stages" / m["stage"] / m["key"]
                for m in self.record(run_id)["stages"].values()}

    def cli(self, *args: str) -> tuple[int, str, str]:
        return run_cli(*[a.format(first=self.first, second=self.second) for a in args],
                       "--store", str(self.store))

    def outside_files(self) -> dict[str, bytes]:
        """Every file of the sentinel folder outside the store, by path, with its bytes."""
        return {str(p.relative_to(self.outside)): p.read_bytes()
                for p in sorted(self.outside.rglob("*")) if p.is_file()}

    def assert_outside_untouched(self) -> None:
        assert (self.outside / "victim" / "keep.txt").read_text() == "still here"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    store = tmp_path_factory.mktemp("runs") / "store"
    ids = []
    for _ in range(2):
        out = store.parent / "out.json"
        code, _, err = run_cli("test", str(REFUND), "--store", str(store), "-o", str(out))
        assert code == 0, err
        ids.append(json.loads(out.read_text())["run"]["id"])
    return store, sorted(ids)


@pytest.fixture
def place(two_runs: tuple[Path, list[str]], tmp_path: Path) -> Place:
    source, (first, second) = two_runs
    store = tmp_path / "store"
    shutil.copytree(source, store)
    outside = tmp_path / "outside"  # `stages/../../outside` seen from the store
    (outside / "victim").mkdir(parents=True)
    (outside / "victim" / "keep.txt").write_text("still here")
    return Place(store, outside, first, second, source)


def edit_stage(name: str, **changes: Any) -> Callable[[Place], None]:
    def edit(place: Place) -> None:
        stages = place.record(place.first)["stages"]
        stages[name] = {**stages[name], **changes}
        place.write_record(place.first, stages=stages)
    return edit


def edit_part(place: Place) -> None:
    stages = place.record(place.first)["stages"]
    stages["results"]["parts"][0]["path"] = "stages/results/../../../outside/victim/keep.txt"
    place.write_record(place.first, stages=stages)


def edit_file(name: str) -> Callable[[Place], None]:
    def edit(place: Place) -> None:
        path = place.store / "runs" / place.first / name
        path.write_bytes(path.read_bytes().replace(b"PASS", b"FAIL", 1) + b" ")
    return edit


def link_stages_outside(place: Place) -> None:
    """`stages/cases` a symbolic link to a folder outside the store that holds the runs'
    cases artifact: removing `stages/cases/<key>` would remove it there."""
    cases = place.store / "stages" / "cases"
    cases.rename(place.outside / "victim" / "cases")
    cases.symlink_to(place.outside / "victim" / "cases", target_is_directory=True)


@dataclass(frozen=True)
class StoreAttack:
    name: str
    damage: Callable[[Place], None]
    command: tuple[str, ...]
    error: str  # in the one `error:` line


STORE_ATTACKS = [
    StoreAttack("gc with a stage entry leading out", edit_stage(
        "cases", stage="../../outside", key="victim"), ("runs", "gc", "--keep", "0"),
        "stage entry '../../outside' (key 'victim') does not name a folder of the store"),
    StoreAttack("gc --dry-run with a stage entry leading out", edit_stage(
        "cases", stage="../../outside", key="victim"),
        ("runs", "gc", "--keep", "0", "--dry-run"), "nothing was removed"),
    StoreAttack("gc with a computing entry leading out",
                lambda p: p.write_record(p.first, computing={"stage": "..",
                                                             "key": "../outside"}),
                ("runs", "gc", "--keep", "0"), "'computing' names stage '..'"),
    StoreAttack("gc with a run id leading out",
                lambda p: p.write_record(p.first, run_id="../../outside/victim"),
                ("runs", "gc", "--keep", "0"), "it names run '../../outside/victim'"),
    StoreAttack("gc through a symbolic link", link_stages_outside,
                ("runs", "gc", "--keep", "0"), "(a symbolic link); nothing was removed"),
    StoreAttack("verify with a part leading out", edit_part, ("runs", "verify"),
                "1 of 2 runs are damaged"),
    StoreAttack("verify with a file name leading out",
                lambda p: p.write_record(p.first, files={"../../../outside/victim/keep.txt":
                                                         "sha256:" + "0" * 64}),
                ("runs", "verify"), "1 of 2 runs are damaged"),
    StoreAttack("accept with a decision leading out",
                lambda p: p.write_record(p.first, decision="../../outside"),
                ("runs", "accept", "{first}"), "is not a name, so the run cannot be a baseline"),
    StoreAttack("accept an edited report.json", edit_file("report.json"),
                ("runs", "accept", "{first}"), "is damaged: report.json no longer match"),
    StoreAttack("accept --force an edited report.html", edit_file("report.html"),
                ("runs", "accept", "{first}", "--force"), "is damaged: report.html no longer"),
    StoreAttack("rm a run id leading out", lambda p: None,
                ("runs", "rm", "../outside/victim"), "no run '../outside/victim'"),
    StoreAttack("show a run id leading out", lambda p: None,
                ("runs", "show", "../outside/victim"), "no run '../outside/victim'"),
]


@pytest.mark.parametrize("attack", STORE_ATTACKS, ids=lambda a: a.name)
def test_store_attacks_touch_nothing_outside_the_store(place: Place,
                                                       attack: StoreAttack) -> None:
    attack.damage(place)
    before = place.outside_files()
    code, out, err = place.cli(*attack.command)
    line = assert_one_error(code, err)
    assert attack.error in line, line
    assert "would remove stage" not in out and "removed stage" not in out
    assert place.outside_files() == before
    place.assert_outside_untouched()
    assert (place.store / "runs" / place.second / "report.json").exists()


def test_rm_removes_a_damaged_run_alone(place: Place) -> None:
    edit_stage("cases", stage="../../outside", key="victim")(place)
    code, out, err = place.cli("runs", "rm", "{first}")
    assert code == 0, err
    assert out.splitlines() == [f"removed run {place.first}", "removed 1 run and 0 stage artifacts"]
    assert err == ("note: its record cannot be read, so the stage folders it named are left "
                   "in place\n")
    place.assert_outside_untouched()
    assert place.cli("runs", "gc", "--keep", "5")[0] == 0  # gc works again
    assert place.cli("runs", "verify")[0] == 0


def test_rm_names_what_it_removes_and_keeps_shared_stages(place: Place) -> None:
    only_first = place.stage_folders(place.first) - place.stage_folders(place.second)
    shared = place.stage_folders(place.first) & place.stage_folders(place.second)
    assert only_first and shared
    named = sorted(str(folder.relative_to(place.store)) for folder in only_first)
    code, out, err = place.cli("runs", "rm", "{first}", "--dry-run")
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"would remove run {place.first}",
                                *(f"would remove stage artifact {f}" for f in named),
                                f"would remove 1 run and {len(named)} stage artifacts"]
    assert all(folder.exists() for folder in only_first)
    code, out, err = place.cli("runs", "rm", "{first}")
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == f"removed 1 run and {len(named)} stage artifacts"
    assert not (place.store / "runs" / place.first).exists()
    assert not any(folder.exists() for folder in only_first)
    assert all(folder.exists() for folder in shared)
    code, out, _ = place.cli("runs", "verify")
    assert code == 0 and out.split()[0] == place.second
    place.assert_outside_untouched()


def test_rm_an_accepted_or_continued_or_running_run(place: Place) -> None:
    assert place.cli("runs", "accept", "{first}")[0] == 0
    line = assert_one_error(*place.cli("runs", "rm", "{first}")[::2])
    assert line == (f"error: runs rm: run {place.first} is the accepted baseline of "
                    "refund_request (backend default); accept another run first, or pass "
                    "--force to remove it and its accepted entry")
    accepted = place.store / "accepted" / "refund_request" / "default.json"
    code, out, err = place.cli("runs", "rm", "{first}", "--force")
    assert code == 0, err
    assert out.splitlines()[:2] == [f"removed run {place.first}",
                                    "removed accepted entry accepted/refund_request/default.json"]
    assert "has no accepted baseline any more" in err
    assert not accepted.exists()

    code, _, err = run_cli("test", str(REFUND), "--store", str(place.store), "--resume",
                           place.second)
    assert code == 0, err
    line = assert_one_error(*place.cli("runs", "rm", "{second}")[::2])
    assert "(continues it); remove that run first, or pass --force" in line

    held = Lock(Store(str(place.store)), run_path(place.second), "run")
    held.acquire()
    place.write_record(place.second, status="running")
    try:
        line = assert_one_error(*place.cli("runs", "rm", "{second}", "--force")[::2])
    finally:
        held.release()
    assert f"run {place.second} is running (held by pid" in line
    assert (place.store / "runs" / place.second / "run.json").exists()


# -- option errors: one `error:` line naming the closest option, exit 2 ---------------------

USAGE_ERRORS = [
    (("test", str(REFUND), "--stor", "s"),
     "error: decflow test: no such option --stor; the closest is --store (see `decflow test "
     "-h`)"),
    (("runs", "gc", "--kep", "3"), "no such option --kep; the closest is --keep"),
    (("fuzz", str(REFUND), "--al"), "no such option --al; the closest is --alpha"),
    (("test", str(REFUND), "--max-concurrency", "0"),
     "invalid value for '--max-concurrency': Input should be greater than or equal to 1"),
    (("test", str(REFUND), "--seed", "3"), "invalid value for --seed: applies only with --all"),
    (("tset", str(REFUND)), "error: decflow: no such command 'tset'. Did you mean 'test'?"),
    (("runs", "rm"), "error: decflow runs rm: missing argument"),
    # nothing like it: no suggestion of an unrelated option (was "the closest is --dataset")
    (("validate", str(REFUND), "--store", "s"),
     "error: decflow validate: no such option --store (see `decflow validate -h`)"),
    (("test", str(REFUND), "-Z"), "error: decflow test: no such option -Z (see `decflow test"),
    # an option missing its value names its command (was "decflow: …")
    (("report", "RUN", "--html"),
     "error: decflow report: option '--html' requires an argument (see `decflow report -h`)"),
    (("runs", "gc", "--keep"), "error: decflow runs gc: option '--keep' requires an argument"),
]


@pytest.mark.parametrize(("args", "expected"), USAGE_ERRORS, ids=lambda v: " ".join(v)[-30:])
def test_option_errors_are_one_error_line(args: tuple[str, ...], expected: str) -> None:
    code, out, err = run_cli(*args)
    line = assert_one_error(code, err)
    assert expected in line, line
    assert (out, err) == ("", line + "\n")


# -- probe runs keep report.html like every stored run --------------------------------------


def test_a_probe_run_keeps_its_html_report(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    module = f"hostile_agent_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(
        "def agent(text):\n"
        f"    return 'allow' if text == 'abc' else {HOSTILE!r}\n")  # the modal answer
    (tmp_path / "seeds.txt").write_text("hello\nworld\nabc\nfoo bar\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [str(tmp_path), *__import__("sys").path])
    store = tmp_path / "store"
    code, _, err = run_cli("probe", "--agent", f"{module}:agent", "--inputs", "seeds.txt",
                           "--store", str(store))
    assert code in (0, 1), err
    (run_dir,) = (store / "runs").iterdir()
    html = (run_dir / "report.html").read_text()
    assert err.endswith(f"(HTML report: {run_dir}/report.html)\n")
    assert "RERUN STABILITY METER" in html and "\\u202egnp.exe" in html
    assert [char for char in RAW if char in html] == []
    code, out, _ = run_cli("runs", "verify", "--store", str(store))
    assert code == 0 and f"{run_dir.name} ok" in out  # its sha256 is recorded


# -- a resumed run's progress counts what is left -------------------------------------------


def interrupt_after(store: Path, run_id: str, kept: int) -> None:
    """Leave finished run `run_id` as a run killed in its call stage after `kept` results:
    its calls' folder unpublished with the first `kept` results, its record `interrupted`."""
    import polars as pl

    record = json.loads((store / "runs" / run_id / "run.json").read_text())
    calls = record["stages"]["results"]
    folder = store / "stages" / "results" / calls["key"]
    (folder / "_manifest.json").unlink()
    for chunk in folder.glob("chunk-*.parquet"):
        frame = pl.read_parquet(chunk)
        chunk.unlink()
        frame.head(kept).write_parquet(chunk)
        kept = max(kept - frame.height, 0)
    for name in ("report.json", "report.html"):
        (store / "runs" / run_id / name).unlink()
    record.update(status="interrupted", computing={"stage": "results", "key": calls["key"]},
                  stages={k: v for k, v in record["stages"].items() if k in ("cases",
                                                                             "requests")})
    record.pop("files", None)
    (store / "runs" / run_id / "run.json").write_text(json.dumps(record))


def test_a_resumed_run_counts_the_calls_left(tmp_path: Path) -> None:
    from tests.support.servers.counting import counting_service
    from tests.support.servers.counting import write_contract as counting_contract

    store = tmp_path / "store"
    with counting_service(delay_s=0.0) as service:
        contract = counting_contract(tmp_path, service.url, 60, max_concurrency=4)
        code, _, err = run_cli("test", str(contract), "--store", str(store), "-o",
                               str(tmp_path / "first.json"))
        assert code == 0, err
        run_id = json.loads((tmp_path / "first.json").read_text())["run"]["id"]
        interrupt_after(store, run_id, 25)
        before = service.total_received()
        code, _, err = run_cli("test", str(contract), "--store", str(store), "--resume", run_id)
        sent = service.total_received() - before
    assert code == 0, err
    assert sent == 35
    assert "35/35 calls (100%)" in err and "/60 calls" not in err, err


# -- --resume after a mistyped -b/-d; a typo leaves no run -----------------------------------


def as_errors(store: Path, run_id: str) -> None:
    """Turn the recorded results of stopped run `run_id` into errors (the backend never
    answered), as a run recorded `failed` on every case by an earlier version."""
    import polars as pl

    record = json.loads((store / "runs" / run_id / "run.json").read_text())
    folder = store / "stages" / "results" / record["computing"]["key"]
    for chunk in folder.glob("chunk-*.parquet"):
        frame = pl.read_parquet(chunk).with_columns(
            pl.lit(None, pl.List(pl.Float64)).alias("probabilities"),
            pl.lit(None, pl.String).alias("selected"), pl.lit(None, pl.Float64).alias("confidence"),
            pl.lit("http_error").alias("error_kind"), pl.lit("HTTP 500").alias("error_message"))
        chunk.unlink()
        frame.write_parquet(chunk)
    record.update(status="failed", error="backend 'default' failed on every case")
    (store / "runs" / run_id / "run.json").write_text(json.dumps(record))


@pytest.fixture
def service_contract(tmp_path: Path) -> Any:
    """A counting service and a contract on it with a second backend `other` (the same
    service) and a second dataset file `more.jsonl` (the same cases)."""
    import yaml

    from tests.support.servers.counting import counting_service
    from tests.support.servers.counting import write_contract as counting_contract

    with counting_service(delay_s=0.0) as service:
        path = counting_contract(tmp_path, service.url, 30, max_concurrency=4)
        document = yaml.safe_load(path.read_text())
        document["backends"] = {"other": {**document["backend"], "model": "other"}}
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        (tmp_path / "more.jsonl").write_text((tmp_path / "cases.jsonl").read_text())
        yield service, path


def stopped_run(store: Path, contract: Path, kept: int, *, answered: bool) -> str:
    out = store.parent / "first.json"
    code, _, err = run_cli("test", str(contract), "--store", str(store), "-o", str(out))
    assert code == 0, err
    run_id = str(json.loads(out.read_text())["run"]["id"])
    interrupt_after(store, run_id, kept)
    if not answered:
        as_errors(store, run_id)
    return run_id


@pytest.mark.parametrize(("answered", "flags", "code", "expected"), [
    (False, (), 0, "sent again"),
    (False, ("-b", "other"), 0, "backend other"),
    (False, ("-d", "{folder}/more.jsonl"), 0, "dataset more.jsonl"),
    (True, ("-b", "other"), 2, "the run has answers from backend 'default', which --resume "
     "keeps (one run never mixes two); drop -b other to finish it, or start a new run "
     "without --resume to use it"),
    (True, ("-d", "{folder}/more.jsonl"), 2, "the run has answers from the contract's dataset"),
    (True, ("-b", "default"), 0, "the stored backend"),
], ids=["errors only", "-b on errors", "-d on errors", "-b on answers", "-d on answers",
        "-b same"])
def test_resume_replaces_a_backend_or_dataset_that_never_answered(
        service_contract: Any, tmp_path: Path, answered: bool, flags: tuple[str, ...],
        code: int, expected: str) -> None:
    service, contract = service_contract
    store = tmp_path / "store"
    run_id = stopped_run(store, contract, 10, answered=answered)
    before = service.total_received()
    given = [flag.format(folder=tmp_path) for flag in flags]
    got, out, err = run_cli("test", str(contract), "--store", str(store), "--resume", run_id,
                            *given, "-f", "json")
    sent = service.total_received() - before
    if code == 2:
        line = assert_one_error(got, err)
        assert expected in line, line
        assert sent == 0
        return
    assert got == 0, err
    report = json.loads(out)
    assert report["run"]["id"] == run_id
    assert sent == (20 if answered else 30)  # errors are sent again, answers kept
    record = json.loads((store / "runs" / run_id / "run.json").read_text())
    assert record["spec"]["backend"] == ("other" if "other" in flags else "default")
    assert record["spec"]["dataset"] == (given[1] if "-d" in flags else None)
    assert report["backend"]["name"] == record["spec"]["backend"]


@pytest.mark.parametrize("typo", [("-b", "stagin"), ("-d", "nope.jsonl"),
                                  ("--max-concurrency", "0")])
def test_a_typo_leaves_no_run(service_contract: Any, tmp_path: Path,
                              typo: tuple[str, str]) -> None:
    service, contract = service_contract
    store = tmp_path / "store"
    code, _, err = run_cli("test", str(contract), "--store", str(store), *typo)
    line = assert_one_error(code, err)
    assert "--resume" not in line
    assert service.total_received() == 0
    assert not (store / "runs").exists() or not list((store / "runs").iterdir())
    assert not list((store / "stages" / "results").glob("*")) if (
        store / "stages" / "results").exists() else True
    assert run_cli("runs", "--store", str(store))[0] == 0


def test_a_backend_that_never_answered_leaves_no_run(tmp_path: Path) -> None:
    from tests.support.servers.counting import counting_service
    from tests.support.servers.counting import write_contract as counting_contract

    store = tmp_path / "store"
    with counting_service(delay_s=0.0, failing=True) as service:
        contract = counting_contract(tmp_path, service.url, 10, max_concurrency=2)
        code, _, err = run_cli("test", str(contract), "--store", str(store))
        line = assert_one_error(code, err)
    assert "failed on every case" in line and line.endswith(
        "nothing of the run was kept: fix that, then run the command again")
    assert service.total_received() == 10
    assert list((store / "runs").iterdir()) == []
    assert list((store / "stages" / "results").iterdir()) == []


# -- a damaged report's advice is a command that works ---------------------------------------


@pytest.mark.parametrize(("edited", "command"), [
    ("report.json", ("report", "{first}")),
    ("report.json", ("report", "{first}", "-c", str(REFUND))),
    ("report.json", ("diff", "{first}", "{second}")),
    ("report.html", ("runs", "accept", "{first}")),
], ids=["report", "report -c", "diff", "accept"])
def test_a_damaged_reports_advice_works(place: Place, edited: str,
                                        command: tuple[str, ...]) -> None:
    import shlex

    edit_file(edited)(place)
    line = assert_one_error(*place.cli(*command)[::2])
    advice = line.split("`")[1].replace(str(place.source), str(place.store))
    assert advice.endswith(f"--resume {place.first} --from-stage summary"), line
    removal = line.split("`")[3]
    assert removal == f"decflow runs rm {place.first} --force", line
    code, _, err = run_cli(*shlex.split(advice)[1:])
    assert code == 0, err
    fresh = err.split("this is a new run ")[1].split()[0]
    code, _, err = place.cli("report", fresh)
    assert code == 0, err
    assert place.cli("runs", "accept", fresh)[0] == 0
    code, _, err = run_cli(*shlex.split(removal)[1:], "--store", str(place.store))
    assert code == 0, err  # the damaged run goes
    assert place.cli("runs")[0] == place.cli("runs", "verify")[0] == 0
