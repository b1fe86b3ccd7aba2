"""Paraphrase providers: identity, file, an OpenAI-compatible server on 127.0.0.1, plugins."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from decflow.errors import ConfigurationError
from decflow.properties.generate import generate
from decflow.properties.paraphrasers import Paraphraser, PluginParaphraser, build_paraphraser
from tests.support.console import install_plugin
from tests.support.credentials import allow_credentials
from tests.support.properties import property_config

LABELS = ["refund", "reject", "review"]


def _paraphrase(
    value: Any, paraphraser: Paraphraser | None, *, case_id: str = "c1", samples: int = 1
):
    return generate(
        "paraphrase",
        property_config("paraphrase", samples=samples),
        seed=5,
        case_id=case_id,
        input=value,
        labels=LABELS,
        decision_type="choice",
        text_field="text" if isinstance(value, dict) else None,
        paraphraser=paraphraser,
    )


def test_identity_is_kept_and_marked_as_rerun_evidence() -> None:
    found = _paraphrase(
        "Same text.", build_paraphraser({"provider": "identity"}, base_dir=Path("."), seed=5)
    )
    (only,) = found.transformed
    assert only.input == "Same text." and only.steps == [{"text": "Same text."}]
    assert only.rerun_evidence
    assert found.provenance == {"provider": "identity"}
    assert _paraphrase("Same text.", None).transformed[0].rerun_evidence


def test_file_provider_matches_by_id_first_then_by_input(tmp_path: Path) -> None:
    rows = [
        {"id": "c1", "paraphrases": ["By id one.", "By id two.", "By id one."]},
        {"input": "Original.", "paraphrases": ["By input."]},
    ]
    path = tmp_path / "para.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    provider = build_paraphraser(
        {"provider": "file", "path": "para.jsonl"}, base_dir=tmp_path, seed=5
    )
    by_id = _paraphrase("Original.", provider, samples=3)
    assert [t.input for t in by_id.transformed] == ["By id one.", "By id two."]  # duplicate dropped
    assert not any(t.rerun_evidence for t in by_id.transformed)
    assert by_id.provenance == {
        "provider": "file",
        "path": "para.jsonl",
        "sha256": "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest(),
    }
    by_input = _paraphrase({"text": "Original.", "n": 1}, provider, case_id="c2")
    assert by_input.transformed[0].input == {"text": "By input.", "n": 1}
    nothing = _paraphrase("Other.", provider, case_id="c3")
    assert nothing.skip_reason == "paraphrase provider 'file' gave none"


def test_file_provider_errors_name_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "paraphrases": ["x"]}\n{oops\n')
    with pytest.raises(ConfigurationError, match=r"bad\.jsonl:2: invalid JSON"):
        build_paraphraser({"provider": "file", "path": "bad.jsonl"}, base_dir=tmp_path, seed=0)
    with pytest.raises(ConfigurationError, match="cannot read paraphrase file"):
        build_paraphraser({"provider": "file", "path": "missing.jsonl"}, base_dir=tmp_path, seed=0)


class _ChatServer:
    """A tiny OpenAI-compatible chat-completions server with scripted answers."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.reply: tuple[int, Any] = (200, {})
        self.delay = 0.0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                server.requests.append({"path": self.path, **json.loads(self.rfile.read(length))})
                server.headers.append(dict(self.headers))
                time.sleep(server.delay)
                status, body = server.reply
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def answer(self, content: str) -> None:
        self.reply = (
            200,
            {
                "model": "para-mini-2026",
                "system_fingerprint": "fp_123",
                "choices": [{"message": {"role": "assistant", "content": content}}],
            },
        )


@pytest.fixture
def chat() -> Iterator[_ChatServer]:
    server = _ChatServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


def _openai(url: str, **extra: Any) -> Paraphraser:
    source = {"provider": "openai", "model": "para-mini", "url": url, "api_key_env": None, **extra}
    return build_paraphraser(source, base_dir=Path("."), seed=5)


def test_openai_provider_sends_the_seed_and_records_the_model(chat: _ChatServer) -> None:
    chat.answer('```json\n["A first rewording.", "A second rewording.", "Extra."]\n```')
    found = _paraphrase("Original text.", _openai(chat.url), samples=2)
    assert [t.input for t in found.transformed] == ["A first rewording.", "A second rewording."]
    (sent,) = chat.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["seed"] == 5 and sent["model"] == "para-mini" and sent["temperature"] == 0.0
    assert sent["messages"][-1] == {"role": "user", "content": "Original text."}
    assert "2" in sent["messages"][0]["content"]
    assert "authorization" not in {k.lower() for k in chat.headers[0]}
    assert found.provenance == {
        "provider": "openai",
        "model": "para-mini",
        "url": chat.url,
        "temperature": 0.0,
        "response_model": "para-mini-2026",
        "system_fingerprint": "fp_123",
    }


def test_openai_provider_sends_the_key_from_the_environment(
    chat: _ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARA_KEY", "sk-test-secret")
    allow_credentials(monkeypatch, chat.url)
    chat.answer('["Reworded."]')
    provider = _openai(chat.url, api_key_env="PARA_KEY")
    found = _paraphrase("Original.", provider)
    assert chat.headers[0]["Authorization"] == "Bearer sk-test-secret"
    assert "sk-test-secret" not in json.dumps(found.provenance)
    monkeypatch.delenv("PARA_KEY")
    with pytest.raises(ConfigurationError, match="PARA_KEY is not set"):
        _openai(chat.url, api_key_env="PARA_KEY")


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        ((500, {"error": "boom"}), "paraphrase_error"),
        ((200, b"not json"), "paraphrase_error"),
        ((200, {"choices": []}), "paraphrase_error"),
    ],
)
def test_openai_provider_failures_become_errored_cases(
    chat: _ChatServer, reply: tuple[int, Any], kind: str
) -> None:
    chat.reply = reply
    found = _paraphrase("Original.", _openai(chat.url))
    assert found.transformed == [] and found.skip_reason is None
    assert found.failure is not None and found.failure.kind == kind


def test_openai_provider_answer_that_is_not_an_array(chat: _ChatServer) -> None:
    chat.answer('{"paraphrases": "nope"}')
    found = _paraphrase("Original.", _openai(chat.url))
    assert found.failure is not None and found.failure.kind == "paraphrase_error"


def test_openai_provider_network_failures(chat: _ChatServer) -> None:
    chat.answer('["late"]')
    chat.delay = 0.5
    slow = _paraphrase("Original.", _openai(chat.url, timeout_s=0.1))
    assert slow.failure is not None and slow.failure.kind == "timeout"
    chat.httpd.shutdown()
    chat.httpd.server_close()
    gone = _paraphrase("Original.", _openai(chat.url))
    assert gone.failure is not None and gone.failure.kind == "unavailable"


REVERSER = """\
    from decflow.properties.paraphrasers import Paraphraser

    class Reverser(Paraphraser):
        provider = "reverser"

        def __init__(self, settings, *, base_dir, seed):
            self.settings = settings

        def paraphrase(self, text, *, n, case_id):
            return [" ".join(reversed(text.split()))][:n]

        def provenance(self):
            return {"provider": self.provider, "settings": self.settings}
    """


def test_plugins_come_from_the_entry_point_group_and_run_in_a_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = install_plugin(tmp_path, "df_reverser", REVERSER,
                          {"decflow.paraphrasers": {"reverser": "df_reverser:Reverser"}})
    monkeypatch.syspath_prepend(str(site))
    provider = build_paraphraser({"provider": "reverser", "flavour": 1}, base_dir=Path("."), seed=0)
    assert isinstance(provider, PluginParaphraser)
    assert provider.provenance() == {"provider": "reverser",
                                     "settings": {"provider": "reverser", "flavour": 1}}
    assert _paraphrase("one two", provider).transformed[0].input == "two one"
    provider.close()
    with pytest.raises(ConfigurationError, match="unknown provider 'nope'"):
        build_paraphraser({"provider": "nope"}, base_dir=Path("."), seed=0)


def test_openai_client_is_closed(chat: _ChatServer) -> None:
    provider = _openai(chat.url)
    provider.close()
    assert provider.loop.is_closed()  # type: ignore[attr-defined]
