"""A credential goes only where the environment allows (issue 21, class 3): a contract that
would send one toward an origin `DECFLOW_ALLOW_CREDENTIALS` does not list stops with exit 2
naming the origin and the setting, before any request — a loopback server counts zero —
so the credential is never sent; `validate` lists every credential and origin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.paths import EXAMPLES
from tests.support.servers.recording import Recorded, RecordingServer, Reply

TOKEN = "ghp-decflow-origin-test-51c2"


def answer(request: Recorded) -> Reply:
    if request.method == "GET":
        return Reply(200, {"data": [{"id": "m"}]})
    body = request.json()
    if not isinstance(body, dict) or "decision" not in body:
        return Reply(404, b"")
    labels = body["decision"]["labels"]
    return Reply(200, {"probabilities": {label: 1.0 / len(labels) for label in labels}})


def write(folder: Path, backend: dict[str, Any], **sections: Any) -> Path:
    contract = yaml.safe_load((EXAMPLES / "refund" / "decguard.yaml").read_text())
    contract["backend"] = backend
    contract.pop("backends", None)
    contract.pop("policy", None)
    contract.update(sections)
    (folder / "cases.jsonl").write_bytes((EXAMPLES / "refund" / "cases.jsonl").read_bytes())
    contract["dataset"] = "cases.jsonl"
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(contract))
    return path


def http_backend(server: RecordingServer, **credentials: Any) -> dict[str, Any]:
    return {"provider": "http", "url": server.url("/decide"), "model": "m",
            "health_url": server.url("/health"), **credentials}


CASES = {
    "bearer token": lambda s: (http_backend(s, bearer_token_env="DF_ORIGIN_TOKEN"), {}),
    "header from the environment": lambda s: (
        http_backend(s, headers_from_env={"X-Token": "DF_ORIGIN_TOKEN"}), {}),
    "openai api key": lambda s: (
        {"provider": "openai", "url": s.url("/v1"), "model": "m",
         "api_key_env": "DF_ORIGIN_TOKEN"}, {}),
    # the paraphrase provider's documented default variable, toward the contract's URL
    "paraphrase default key": lambda s: (
        {"provider": "mock", "default": {"refund": 0.5, "reject": 0.25, "review": 0.25}},
        {"properties": {"paraphrase": {"source": {"provider": "openai", "model": "p",
                                                  "url": s.url("/v1")},
                                       "max_tv_distance": 0.1}}}),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("allowed", [None, "https://api.openai.com", "OTHER_VAR@{origin}"])
def test_a_credential_toward_an_origin_not_allowed_stops_before_any_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, allowed: str | None
) -> None:
    monkeypatch.setenv("DF_ORIGIN_TOKEN", TOKEN)
    monkeypatch.setenv("OPENAI_API_KEY", TOKEN)
    with RecordingServer(answer) as server:
        origin = f"http://127.0.0.1:{server.port}"
        if allowed is None:
            monkeypatch.delenv("DECFLOW_ALLOW_CREDENTIALS", raising=False)
        else:
            monkeypatch.setenv("DECFLOW_ALLOW_CREDENTIALS", allowed.format(origin=origin))
        backend, sections = CASES[case](server)
        contract = write(tmp_path, backend, **sections)
        code, out, err = run_cli("test", "--all", str(contract), "--store",
                                 str(tmp_path / "store"))
        requests = list(server.requests)
    assert code == 2, out + err
    assert origin in err and "DECFLOW_ALLOW_CREDENTIALS" in err, err
    assert requests == []
    assert TOKEN not in out + err


@pytest.mark.parametrize("case", list(CASES))
def test_an_allowed_origin_gets_the_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.setenv("DF_ORIGIN_TOKEN", TOKEN)
    monkeypatch.setenv("OPENAI_API_KEY", TOKEN)
    with RecordingServer(answer) as server:
        variable = "OPENAI_API_KEY" if case.startswith("paraphrase") else "DF_ORIGIN_TOKEN"
        monkeypatch.setenv("DECFLOW_ALLOW_CREDENTIALS",
                           f"https://llm.internal, {variable}@http://127.0.0.1:{server.port}")
        backend, sections = CASES[case](server)
        contract = write(tmp_path, backend, **sections)
        code, out, err = run_cli("validate", str(contract))
        assert code == 0, err
        assert f"{variable} -> http://127.0.0.1:{server.port} (allowed)" in out
        run_cli("test", "--all", str(contract), "--store", str(tmp_path / "store"))
        sent = [r.headers.get("X-Token") or r.headers.get("Authorization", "")
                for r in server.requests]
    assert sent and all(TOKEN in value for value in sent)


def test_validate_lists_every_credential_and_origin_and_says_which_would_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DECFLOW_ALLOW_CREDENTIALS", "http://127.0.0.1:9")
    contract = write(
        tmp_path,
        {"provider": "http", "url": "http://127.0.0.1:9/decide", "model": "m",
         "bearer_token_env": "DF_A", "headers_from_env": {"X-B": "DF_B"}},
        backends={"remote": {"provider": "openai", "url": "https://llm.example/v1",
                             "model": "m", "api_key_env": "DF_C"}},
        properties={"paraphrase": {"source": {"provider": "openai", "model": "p"},
                                   "max_tv_distance": 0.1}},
    )
    code, out, err = run_cli("validate", str(contract))
    assert code == 0, err
    listed = [line.split("credentials", 1)[-1].strip() for line in out.splitlines()
              if "->" in line]
    assert listed == [
        "backend.bearer_token_env: DF_A -> http://127.0.0.1:9 (allowed)",
        "backend.headers_from_env.X-B: DF_B -> http://127.0.0.1:9 (allowed)",
        "backends.remote.api_key_env: DF_C -> https://llm.example (NOT allowed here: a run "
        "stops with exit 2 unless DECFLOW_ALLOW_CREDENTIALS lists it)",
        "properties.paraphrase.source.api_key_env: OPENAI_API_KEY -> https://api.openai.com "
        "(NOT allowed here: a run stops with exit 2 unless DECFLOW_ALLOW_CREDENTIALS lists it)",
    ]


@pytest.mark.parametrize("setting", ["api.openai.com", "https://x.example/v1", "ftp://x",
                                     "https://user@x.example"])
def test_a_malformed_allowlist_is_an_error_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    monkeypatch.setenv("DF_ORIGIN_TOKEN", TOKEN)
    monkeypatch.setenv("DECFLOW_ALLOW_CREDENTIALS", setting)
    contract = write(tmp_path, {"provider": "http", "url": "http://127.0.0.1:9/decide",
                                "model": "m", "bearer_token_env": "DF_ORIGIN_TOKEN"})
    code, _out, err = run_cli("test", str(contract), "--store", str(tmp_path / "store"))
    assert code == 2 and f"DECFLOW_ALLOW_CREDENTIALS: {setting!r} is not an origin" in err
