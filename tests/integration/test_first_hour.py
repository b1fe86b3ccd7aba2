"""A newcomer's first hour: mistakes are one `error:` line saying where and what to do —
an unreachable Prefect server, an unknown `diff -s` key, a JSON record broken mid-line (the
file's line and column), a YAML bracket left open (where it opened, as well as where it was
found)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.paths import ROOT

REFUND = ROOT / "contracts" / "refund"


def test_prefect_without_a_reachable_server_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = {**{k: v for k, v in os.environ.items() if k != "DECFLOW_STORE"},
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api"}
    done = subprocess.run(
        [sys.executable, "-m", "decflow", "test", str(REFUND / "decflow.yaml"), "--prefect",
         "--store", str(tmp_path / "store")], env=env, capture_output=True, text=True,
        timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: no Prefect server answers at http://127.0.0.1:{port}/api (ConnectError); "
        "start one with `prefect server start` and set PREFECT_API_URL to its API "
        "(http://127.0.0.1:4200/api), or run without Prefect: drop --prefect (and unset "
        "PREFECT_API_URL, which selects Prefect too) or pass --no-prefect"]


def test_diff_by_an_unknown_segment_key_names_the_keys(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    reports = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.json"
        assert run_cli("test", str(REFUND / "decflow.yaml"), "--store", store, "-o",
                       str(out))[0] == 0
        reports.append(str(out))
    code, out, err = run_cli("diff", *reports, "-s", "UNKNOWN", "--store", store)
    assert (code, out) == (2, "")
    assert err == ("error: -s/--segment-by: no case of either run has the metadata key "
                   "'UNKNOWN' (keys: locale)\n")
    assert run_cli("diff", *reports, "-s", "locale", "--store", store)[0] == 0


def test_a_broken_json_line_is_placed_in_the_file(tmp_path: Path) -> None:
    lines = (REFUND / "production.jsonl").read_text().splitlines()
    broken = lines[1].rstrip("}") + ', "extra": 1 2}'
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join([lines[0], broken, *lines[2:]]) + "\n")
    code, _, err = run_cli("check", str(REFUND / "decflow.yaml"), "-d", str(records),
                           "--store", str(tmp_path / "store"))
    assert code == 2
    # the check stopped while reading its records: no run is left to resume
    assert err == (f"error: {records}: line 2, column {len(broken) - 1}: invalid JSON: "
                   "Expecting ',' delimiter; nothing of the run was kept: fix that, then run "
                   "the command again\n")
    assert not (tmp_path / "store" / "runs").exists() or \
        not any((tmp_path / "store" / "runs").iterdir())
    listed = tmp_path / "records.json"
    text = json.dumps([json.loads(line) for line in lines], indent=1)
    listed.write_text(text.replace('"cost"', '"cost" 1', 1))
    code, _, err = run_cli("check", str(REFUND / "decflow.yaml"), "-d", str(listed),
                           "--store", str(tmp_path / "store"))
    row = next(i for i, line in enumerate(text.splitlines(), 1) if '"cost"' in line)
    assert code == 2 and err.startswith(f"error: {listed}: line {row}, column ")


def test_an_unclosed_bracket_names_where_it_opened(tmp_path: Path) -> None:
    contract = tmp_path / "c.yaml"
    contract.write_text('schema_version: "0.1"\ndecision:\n  name: x\n  type: noul\n'
                        "  labels: [yes, no\nbackend: {provider: mock}\n")
    code, _, err = run_cli("validate", str(contract))
    assert code == 2
    assert err == (f"error: {contract}: invalid contract:\n  invalid YAML: line 6, column 8: "
                   "did not find expected ',' or ']'; the '[' opened at line 5, column 11 is "
                   "not closed\n")
