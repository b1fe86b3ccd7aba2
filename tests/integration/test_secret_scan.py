"""A credential never reaches any artifact, report or output (issue 21, class 5).

A real decguard.http/0.1 server on 127.0.0.1 echoes the bearer token back wherever an
answer can carry text: the model name and version, answer metadata, unknown labels, error
bodies. After a full `test --all` with every report view, then `report RUN` in both
formats, `report RUN -c` (a re-gate), `runs` and `runs show`, every byte under the store,
every report file and everything printed is scanned for the secret.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.credentials import allow_credentials
from tests.support.paths import EXAMPLES
from tests.support.servers.recording import Recorded, RecordingServer, Reply

SECRET = "sk-decflow-test-7f3c9a1e55"


def answer(request: Recorded) -> Reply:
    auth = request.headers.get("Authorization", "")
    assert auth == f"Bearer {SECRET}"  # the credential is sent…
    body = request.json()
    if "whitespace" in body["case_id"]:
        return Reply(500, f"internal error for {auth}".encode())  # …and echoed in errors
    labels = body["decision"]["labels"]
    probabilities = {label: 1.0 / len(labels) for label in labels}
    if "label_format" in body["case_id"]:  # …in a label the engine refuses, naming it
        probabilities = {f"{label} {auth}": p for label, p in probabilities.items()}
    return Reply(200, {"probabilities": probabilities, "model": f"echo/{auth}",
                       "model_version": f"v1 ({auth})",
                       "metadata": {"seen": auth, "headers": {"authorization": auth},
                                    "note": f"called with {auth}"}})


def test_secret_appears_nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DECFLOW_TEST_TOKEN", SECRET)
    with RecordingServer(answer) as server:
        allow_credentials(monkeypatch, server.url())
        contract = yaml.safe_load((EXAMPLES / "refund" / "decguard.yaml").read_text())
        contract["backend"] = {"provider": "http", "url": server.url("/decide"),
                               "bearer_token_env": "DECFLOW_TEST_TOKEN", "model": "m"}
        (tmp_path / "cases.jsonl").write_bytes((EXAMPLES / "refund" / "cases.jsonl").read_bytes())
        contract["dataset"] = "cases.jsonl"
        path = tmp_path / "contract.yaml"
        path.write_text(yaml.safe_dump(contract))
        outputs = tmp_path / "out"
        code, out, err = run_cli(
            "test", "--all", str(path), "--store", str(tmp_path / "store"), "--no-healthcheck",
            "-o", str(outputs / "report.json"), "--html", str(outputs / "report.html"),
            "--markdown", str(outputs / "report.md"), "--junit", str(outputs / "junit.xml"),
        )
        requests = len(server.requests)
    assert requests > 11  # originals and transformed cases were really sent
    assert code in (0, 1), err
    report = json.loads((outputs / "report.json").read_text())
    assert report["metrics"]["counts"]["succeeded"] == 11
    assert any(s["n_errors"] for s in report["properties"]["summaries"])  # echoed errors
    assert report["backend"]["model"] == "m"
    models = {r["result"]["model"] for r in report["results"] if r.get("result")}
    assert models == {"echo/Bearer [REDACTED]"}  # the echo is cut out, the rest kept
    run_id = report["run"]["id"]
    store = str(tmp_path / "store")
    for command in (["report", run_id], ["report", run_id, "-f", "json"],
                    ["report", run_id, "-c", str(path)], ["runs"], ["runs", "show", run_id]):
        code_, out_, err_ = run_cli(*command, "--store", store)
        assert code_ in (0, 1), (command, err_)
        out, err = out + out_, err + err_
    scanned = 0
    for file in [*(tmp_path / "store").rglob("*"), *outputs.rglob("*")]:
        if file.is_file():
            assert SECRET.encode() not in file.read_bytes(), file
            scanned += 1
    assert scanned > 10
    assert SECRET not in out and SECRET not in err
