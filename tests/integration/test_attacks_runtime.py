"""What a stranger's pull request can send decflow at run time, through the command line.

Each row is one attack from issue 31 (part A): a contract folder built for it, a decflow
command run as a process of its own against it (and against the hostile server of
`tests/support/servers/hostile.py` where it needs one), and its documented outcome: exit 2
with exactly one `error:` line naming the place, or a finished run whose cases record the
typed error. Whatever the outcome: no traceback, no `internal error`, the peak RSS of the
command (`os.wait4`) and its wall time bounded, and nothing outside the store touched (every
other file of the folder, and a neighbour folder, unchanged).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.console import install_plugin, with_path
from tests.support.servers.counting import counting_service, write_contract
from tests.support.servers.hostile import HostileServer, hostile_server

LABELS = ["refund", "reject", "review"]
CASE = {"id": "r1", "input": "The blender arrived damaged.", "expected": "refund"}


@dataclass(frozen=True)
class Attack:
    """`prepare(folder, server)` writes the attack's files and returns the command's
    arguments (run in `folder`, `--store store` added when the command `stores`)."""

    name: str
    prepare: Callable[[Path, HostileServer], list[str]]
    exit_code: int
    error: str | None = None  # what the one `error:` line says (a regex); None: no error line
    kinds: tuple[str, ...] = ()  # error kinds the stored run's cases record
    max_rss_mb: float = 400
    max_s: float = 30
    also: Callable[[HostileServer], None] | None = field(default=None)
    stores: bool = True  # the command takes --store
    says: str | None = None  # a regex the rest of stderr matches (a contract's problem line)
    file_size: int | None = None  # the command's file-size limit in bytes (`ulimit -f`)
    needs_permissions: bool = False  # file modes must bind (not under root)
    stdout: str = os.devnull


def contract(folder: Path, **sections: Any) -> Path:
    """A refund contract on the mock backend over a one-case dataset, with `sections`
    (which may replace the backend or the dataset)."""
    document: dict[str, Any] = {
        "schema_version": "0.1",
        "decision": {"name": "refund_request", "type": "choice", "options": LABELS},
        "backend": {"provider": "mock", "default": {"refund": 0.8, "reject": 0.1,
                                                     "review": 0.1}},
        "dataset": "cases.jsonl",
        "requirements": {"min_accuracy": 0.5},
        **sections,
    }
    if not (folder / "cases.jsonl").exists():
        (folder / "cases.jsonl").write_text(json.dumps(CASE) + "\n")
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def paraphrased_by(mode: str) -> Callable[[Path, HostileServer], list[str]]:
    """`fuzz` with the openai paraphrase provider on the hostile server's `mode`."""
    def prepare(folder: Path, server: HostileServer) -> list[str]:
        source = {"provider": "openai", "model": "m", "url": f"{server.url}/{mode}",
                  "api_key_env": None, "timeout_s": 2}
        contract(folder, properties={"paraphrase": {"source": source,
                                                    "max_tv_distance": 0.0}})
        return ["fuzz", "decflow.yaml"]
    return prepare


def answered_by(mode: str) -> Callable[[Path, HostileServer], list[str]]:
    """`test` with the http backend on the hostile server's `mode`."""
    def prepare(folder: Path, server: HostileServer) -> list[str]:
        contract(folder, backend={"provider": "http", "url": f"{server.url}/{mode}/decide",
                                  "timeout_s": 30})
        return ["test", "decflow.yaml"]
    return prepare


RECORD = {"decision": "refund_request", "selected": "refund",
          "probabilities": {"refund": 0.8, "reject": 0.1, "review": 0.1}}


def repeated_megabyte(table: dict[str, Any]) -> Any:
    """`table` plus an `input` column repeating one 1 MB text in each of its 3,000 rows, as
    a Parquet dictionary (a few kilobytes on disk, 3 GB once decoded)."""
    import pyarrow as pa

    rows = 3000
    columns = {name: [value] * rows for name, value in table.items()}
    repeated = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()),
                                              pa.array(["x" * 1_000_000]))
    return pa.table({**columns, "input": repeated})


def golden_parquet(folder: Path, _server: HostileServer) -> list[str]:
    import pyarrow.parquet as pq

    contract(folder, dataset="cases.parquet")
    table = repeated_megabyte({"expected": "refund"})
    pq.write_table(table.append_column("id", [[f"c{i}" for i in range(table.num_rows)]]),
                   folder / "cases.parquet", compression="zstd", store_schema=False)
    return ["validate", "decflow.yaml"]


def records_parquet(folder: Path, _server: HostileServer) -> list[str]:
    import pyarrow.parquet as pq

    contract(folder)
    pq.write_table(repeated_megabyte(RECORD), folder / "records.parquet", compression="zstd",
                   store_schema=False)
    return ["check", "decflow.yaml", "-d", "records.parquet"]


def surrogate_case(folder: Path, _server: HostileServer) -> list[str]:
    contract(folder)
    (folder / "cases.jsonl").write_text(
        '{"id": "r1", "input": "broken \\ud800 text", "expected": "refund"}\n')
    return ["test", "decflow.yaml"]


def surrogate_record(folder: Path, _server: HostileServer) -> list[str]:
    contract(folder)
    record = json.dumps(RECORD)[:-1] + ', "model": "m\\ud800"}'
    (folder / "records.jsonl").write_text(record + "\n")
    return ["check", "decflow.yaml", "-d", "records.jsonl"]


def contract_with(**sections: Any) -> Callable[[Path, HostileServer], list[str]]:
    """`test` on the contract with `sections` (an invalid one: the run never starts)."""
    def prepare(folder: Path, _server: HostileServer) -> list[str]:
        contract(folder, **sections)
        return ["test", "decflow.yaml"]
    return prepare


HTTP = {"provider": "http", "url": "http://127.0.0.1:9/decide"}
INVALID = r"^error: decflow\.yaml: invalid contract:$"


def many_calls(folder: Path, server: HostileServer) -> list[str]:
    """`test` of 2,000 cases on a well-behaved http backend (the calls are journalled)."""
    (folder / "cases.jsonl").write_text("".join(
        json.dumps({"id": f"c{i}", "input": f"Request {i}", "expected": "refund"}) + "\n"
        for i in range(2000)))
    return answered_by("decide")(folder, server)


def read_only_output(folder: Path, _server: HostileServer) -> list[str]:
    contract(folder)
    (folder / "ro").mkdir()
    (folder / "ro").chmod(0o555)
    return ["test", "decflow.yaml", "--html", "ro/report.html"]


def no_compression_asked(server: HostileServer) -> None:
    (head,) = [h for h in server.heads if h.startswith("POST /gzip/")]
    assert "accept-encoding" not in head.lower()


ATTACKS = [
    Attack("paraphraser trickles its answer", paraphrased_by("trickle"), 1,
           kinds=("timeout",)),
    Attack("paraphraser sends a gzip bomb", paraphrased_by("gzip"), 1,
           kinds=("paraphrase_error",), also=no_compression_asked),
    Attack("paraphraser answer 200k deep", paraphrased_by("deep"), 1,
           kinds=("paraphrase_error",)),
    Attack("paraphrase content 200k deep", paraphrased_by("deep-content"), 1,
           kinds=("paraphrase_error",)),
    Attack("paraphraser answer with NaN", paraphrased_by("nan"), 1,
           kinds=("paraphrase_error",)),
    Attack("paraphraser answer with 1e999", paraphrased_by("huge-number"), 1,
           kinds=("paraphrase_error",)),
    Attack("paraphraser answer with a duplicate key", paraphrased_by("duplicate"), 1,
           kinds=("paraphrase_error",)),
    Attack("golden Parquet repeating a 1 MB input", golden_parquet, 2,
           error=r"^error: cases\.parquet: row \d+: the dataset passes 256 MiB here",
           stores=False),
    Attack("records Parquet repeating a 1 MB input", records_parquet, 2,
           error=r"^error: records\.parquet: row \d+: row group 1 passes 512 MiB here .*; "
                 r"nothing of the run was kept"),
    Attack("backend answer of 21M empty lists", answered_by("metadata-lists"), 2,
           error=r"first error: invalid_response: response is not read: up to [\d,]+ JSON "
                 r"values; at most 1,048,576"),
    Attack("lone surrogate in a dataset line", surrogate_case, 2,
           error=r"^error: cases\.jsonl: line 1: input is not valid Unicode: a lone "
                 r"surrogate \\ud800 at character 8; nothing of the run was kept"),
    Attack("lone surrogate in a check record", surrogate_record, 2,
           error=r"^error: records\.jsonl: line 1: model is not valid Unicode: .*; nothing of "
                 r"the run was kept"),
    Attack("lone surrogate in an answer's model", answered_by("surrogate-model"), 2,
           error=r"first error: invalid_response: model is not valid Unicode"),
    Attack("NUL byte in dataset:", contract_with(dataset="cases\0.jsonl"), 2, error=INVALID,
           says=r"^  line \d+: dataset: 'cases\\x00\.jsonl' holds a NUL byte"),
    Attack("NUL byte in a paraphrase path:", contract_with(properties={"paraphrase": {
        "source": {"provider": "file", "path": "para\0.jsonl"}, "max_tv_distance": 0.0}}),
        2, error=INVALID, says=r"properties\.paraphrase\.source\.path: .* holds a NUL byte"),
    Attack("name ending in a newline", contract_with(decision={
        "name": "refund_request\n", "type": "choice", "options": LABELS}), 2,
        error=INVALID, says=r"decision\.name: 'refund_request\\n' is not a valid name"),
    Attack("header name ending in a newline", contract_with(
        backend={**HTTP, "headers": {"X-A\n": "v"}}), 2,
        error=INVALID, says=r"'X-A\\n' is not a valid HTTP header name"),
    Attack("a file-size limit under the call journal", many_calls, 2, file_size=48 << 10,
           error=r"failed: store: cannot write \S+/chunk-\S+\.journal \(File too large\); "
                 r"the file-size limit \(`ulimit -f`\) is too small"),
    Attack("stdout on a full device", lambda folder, server: [
        *contract_with()(folder, server), "-f", "json"], 2, stdout="/dev/full",
        error=r"^error: /dev/full: cannot write the command's output \(No space left"),
    Attack("an output file in a read-only folder", read_only_output, 2,
           error=r"^error: ro/report\.html: cannot write the HTML report \(Permission "
                 r"denied\)$", needs_permissions=True),
    Attack("environment variable name with a newline", contract_with(
        backend={**HTTP, "bearer_token_env": "TOKEN\nX"}), 2,
        error=INVALID, says=r"'TOKEN\\nX' is not an environment variable name"),
]


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    with hostile_server() as running:
        yield running


def snapshot(folder: Path, skip: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file under `folder` outside `skip`."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*") if p.is_file() and skip not in p.parents}


@dataclass
class Outcome:
    code: int
    stderr: str
    seconds: float
    peak_rss_mb: float


# Starts the command from a small process and writes its peak RSS (KiB) and exit code: a
# child forked from the test process would count the test process's memory as its own
# (Linux keeps the larger of the peaks before and after exec).
LAUNCHER = """
import os, resource, sys
report, file_size, *command = sys.argv[1:]
pid = os.fork()
if pid == 0:
    if file_size != "-":  # `ulimit -f`
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(file_size), int(file_size)))
    os.execv(sys.executable, [sys.executable, "-m", "decflow", *command])
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as measured:
    measured.write(f"{usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


def run_measured(args: list[str], cwd: Path, out: Path, attack: Attack) -> Outcome:
    """`python -m decflow ARGS` in `cwd` as `attack` says (file-size limit, stdout); its
    exit code, stderr, wall time and peak RSS (its own, from wait4), killed past twice the
    attack's time bound."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "DECFLOW_STORE")}
    measured = out / "measured"
    limit_s = attack.max_s * 2
    size = "-" if attack.file_size is None else str(attack.file_size)
    with (out / "stderr").open("wb") as err, open(attack.stdout, "wb") as stdout:
        started = time.monotonic()
        launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(measured), size, *args],
                                    cwd=cwd, env=env, stdout=stdout, stderr=err,
                                    start_new_session=True)
        try:
            launcher.wait(limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
            raise AssertionError(f"decflow {' '.join(args)} ran past {limit_s:g}s") from None
        seconds = time.monotonic() - started
    peak_kib, code = measured.read_text().split()
    return Outcome(int(code), (out / "stderr").read_text(), seconds, int(peak_kib) / 1024)


def recorded_kinds(store: Path) -> set[str]:
    """Error kinds the run's report records for its cases."""
    (report,) = store.glob("runs/*/report.json")
    found = json.loads(report.read_text())
    failures = found.get("properties", {}).get("failures", [])
    return {f["error"]["kind"] for f in failures if f.get("error")}


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_an_attack_ends_as_documented_within_bounds(
    attack: Attack, server: HostileServer, tmp_path: Path
) -> None:
    if attack.needs_permissions and os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    folder, out, neighbour = tmp_path / "work", tmp_path / "out", tmp_path / "neighbour"
    for made in (folder, out, neighbour):
        made.mkdir()
    (neighbour / "keep.txt").write_text("untouched")
    args = attack.prepare(folder, server)
    store = folder / "store"
    before = snapshot(tmp_path, store)

    if attack.stores:
        args += ["--store", str(store)]
    outcome = run_measured(args, folder, out, attack)

    errors = [line for line in outcome.stderr.splitlines() if line.startswith("error:")]
    assert outcome.code == attack.exit_code, outcome.stderr
    assert "Traceback" not in outcome.stderr and "internal error" not in outcome.stderr
    if attack.error is None:
        assert errors == [], outcome.stderr
    else:
        assert len(errors) == 1 and re.search(attack.error, errors[0]), outcome.stderr
    if attack.says is not None:
        assert re.search(attack.says, outcome.stderr, re.MULTILINE), outcome.stderr
    if attack.kinds:
        assert recorded_kinds(store) == set(attack.kinds)
    assert outcome.peak_rss_mb < attack.max_rss_mb
    assert outcome.seconds < attack.max_s
    written = snapshot(out, store)
    assert snapshot(tmp_path, store) == {**before, **{f"out/{name}": seen
                                                      for name, seen in written.items()}}
    if attack.also is not None:
        attack.also(server)


def test_a_closed_pipe_ends_the_command_quietly_with_its_exit_code(tmp_path: Path) -> None:
    """`decflow test … 2>&1 | head -1`: the reader leaves after the first progress line (5 s
    into the calls); what is written after is dropped, the run ends as it would have (pass,
    exit 0), never `failed: internal error: BrokenPipeError`."""
    store = tmp_path / "store"
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "DECFLOW_STORE")}
    with counting_service(delay_s=0.1) as service:
        contract_path = write_contract(tmp_path, service.url, 240, 4)
        child = subprocess.Popen(
            [sys.executable, "-m", "decflow", "test", str(contract_path), "--store", str(store)],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert child.stdout is not None
        first = child.stdout.readline().decode()
        child.stdout.close()
        code = child.wait(timeout=60)
        sent = service.total_received()
    assert re.match(r"\d+/240 calls \(\d+%\)", first), first
    assert (code, sent) == (0, 240)
    (record,) = store.glob("runs/*/run.json")
    assert json.loads(record.read_text())["status"] == "pass"


WORKER_PLUGIN = """\
    import os
    import re
    import sys

    from decflow.backends.base import Backend, Prediction

    class Worker(Backend):
        provider = "worker"

        @classmethod
        def from_config(cls, config, *, name, decision):
            backend = cls(name, "w-1")
            backend.marker = config.get("marker")
            return backend

        async def predict(self, request):
            if request.input == "leak":  # a full line whose 2,000-byte cut splits the token
                token = os.environ["LEAK_TOKEN"]
                print("x" * 1990 + token + "y" * 20, flush=True)
            if request.input == "stuck":  # C code that never lets the GIL go
                open(self.marker, "w").close()
                re.match(r"(a+)+$", "a" * 64 + "b")
            return Prediction({label: float(label == "refund")
                               for label in request.decision.labels})
    """
TOKEN = "tok-0123456789abcdef-ZYXW"


def worker_run(tmp_path: Path, text: str, **backend: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of `decflow test` on the worker plugin with one
    case of `text`."""
    site = install_plugin(tmp_path / "site", "worker_plugin", WORKER_PLUGIN,
                          {"decflow.backends": {"worker": "worker_plugin:Worker"}})
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "cases.jsonl").write_text(json.dumps({"id": "c1", "input": text,
                                                    "expected": "refund"}) + "\n")
    contract(folder, backend={"provider": "worker", "token_env": "LEAK_TOKEN", **backend})
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "DECFLOW_STORE")}
    env.update(with_path(site), LEAK_TOKEN=TOKEN)
    command = [sys.executable, "-m", "decflow", "test", str(folder / "decflow.yaml"),
               "--store", str(tmp_path / "store")]
    return command, env


def test_a_token_across_the_workers_line_cut_shows_neither_half(tmp_path: Path) -> None:
    command, env = worker_run(tmp_path, "leak")
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, timeout=120)
    err = done.stderr.decode()
    assert done.returncode == 0, err
    shown = [line for line in err.splitlines() if line.startswith("backend plugin")]
    assert len(shown) == 2 and "[REDACTED]" in shown[1], err[-3000:]
    for half in (TOKEN[:12], TOKEN[12:]):
        assert half not in err


def _children(pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines()
                          if ":\t" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(pid):
            found.append(int(status.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_worker_holding_the_gil_dies_with_a_killed_decflow(tmp_path: Path) -> None:
    """SIGKILL `decflow test` while its plugin worker is stuck in C code holding the GIL
    (its reader thread cannot run to notice the closed pipe): the kernel ends the worker."""
    marker = tmp_path / "stuck"
    command, env = worker_run(tmp_path, "stuck", marker=str(marker))
    parent = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert parent.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        workers = _children(parent.pid)
        assert workers
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in workers)
    finally:
        parent.kill()
        for pid in workers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
