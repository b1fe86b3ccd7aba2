"""Call-cache keys and model identities: what enters a key (the rollout, the request as
sent, the served model) and what never does (credentials); what each kind of server's
`/models` answer says about the model, and when that identity counts as verified; the
contract's `evaluation.call_cache`."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from decflow.backends.base import DecisionRequest, DecisionSpec
from decflow.backends.call_keys import call_key, identity_digest
from decflow.backends.http import HttpBackend
from decflow.backends.model_identity import is_llama_cpp, served_identity
from decflow.backends.openai import OpenAIBackend
from decflow.contracts.canonical import canonical_dict
from decflow.contracts.parse import parse_contract
from decflow.contracts.providers import OpenAISettings
from decflow.pipeline.contract_run.call_cache import call_cache_mode, fresh_answers_mode
from tests.support.contracts import edited

DECISION = DecisionSpec("refund", "choice", ("refund", "reject"), None)

# /v1/models of the servers decflow talks to (shapes as they answer)
LLAMA_CPP_PYTHON = {"object": "list", "data": [
    {"id": "/models/SmolLM2.gguf", "object": "model", "owned_by": "me", "permissions": []}]}
LLAMA_CPP = {"object": "list", "data": [{
    "id": "smollm2", "object": "model", "created": 1765000000, "owned_by": "llamacpp",
    "meta": {"vocab_type": 2, "n_vocab": 49152, "n_params": 134515008, "size": 90310656}}]}
VLLM = {"object": "list", "data": [
    {"id": "smol", "object": "model", "created": 1, "owned_by": "vllm",
     "root": "HuggingFaceTB/SmolLM2-135M-Instruct", "max_model_len": 8192},
    {"id": "other", "object": "model", "root": "x/y"}]}
PINNED = {"data": [{"id": "smol", "digest": "sha256:ab12"}]}


def http_backend(token_env: str | None = None, url: str = "http://127.0.0.1:1/decide",
                 headers: dict[str, str] | None = None) -> HttpBackend:
    settings = SimpleNamespace(
        url=url, health_url=None, timeout_s=5, max_retries=0,
        retry_backoff_s=0.1, headers=headers or {}, headers_from_env={},
        bearer_token_env=token_env, label_map=None)
    return HttpBackend("default", "m", settings, DECISION)


def key(backend: HttpBackend, request_id: str, text: str = "hello",
        labels: tuple[str, ...] = ("refund", "reject")) -> str:
    identity = identity_digest(backend.call_identity(), {}, backend.cache_format)
    shown = DecisionSpec(DECISION.name, DECISION.type, labels, None)
    return call_key(identity, backend.request_sent(DecisionRequest(request_id, shown, text)),
                    request_id)


def test_reruns_presentations_and_inputs_have_keys_of_their_own() -> None:
    backend = http_backend()
    keys = {key(backend, "stability/c1/1"), key(backend, "stability/c1/2"),
            key(backend, "c1"), key(backend, "c1", text="hello!"),
            key(backend, "c1", labels=("reject", "refund"))}
    assert len(keys) == 5
    assert key(backend, "c1") == key(http_backend(), "c1")  # stable across processes


def test_credentials_never_enter_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_A", "secret-a")
    monkeypatch.setenv("TOKEN_B", "secret-b")
    one, other = http_backend("TOKEN_A"), http_backend("TOKEN_A")
    other.caller.headers()  # the token read, as after a first call
    assert key(one, "c1") == key(other, "c1")
    assert "secret" not in repr(one.call_identity()) + repr(other.call_identity())


def test_the_query_and_static_headers_enter_a_key_as_digests() -> None:
    base = "http://127.0.0.1:1/decide"
    keys = {key(http_backend(url=f"{base}?v=a"), "c1"), key(http_backend(url=f"{base}?v=b"), "c1"),
            key(http_backend(headers={"X-V": "a"}), "c1"),
            key(http_backend(headers={"X-V": "b"}), "c1"), key(http_backend(), "c1")}
    assert len(keys) == 5
    # the fragment is never sent; header order is not part of the request's meaning
    assert key(http_backend(url=f"{base}#top"), "c1") == key(http_backend(), "c1")
    assert key(http_backend(headers={"X-A": "1", "X-B": "2"}), "c1") == key(
        http_backend(headers={"X-B": "2", "X-A": "1"}), "c1")
    identity = repr(http_backend(url=f"{base}?v=hidden", headers={"X-V": "hidden"})
                    .call_identity())
    assert "hidden" not in identity and "X-V" not in identity
    chat = [OpenAIBackend("default", "m", OpenAISettings.model_validate({"url": url}), DECISION)
            for url in ("http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1?v=hidden")]
    assert chat[0].call_identity() != chat[1].call_identity()
    assert "hidden" not in repr(chat[1].call_identity())


def test_a_served_model_change_changes_the_identity() -> None:
    smol = served_identity(LLAMA_CPP_PYTHON, "smollm2-135m")
    gemma = served_identity({"data": [{"id": "/models/gemma.gguf"}]}, "smollm2-135m")
    backend = {"provider": "openai", "model": "smollm2-135m"}
    assert identity_digest(backend, smol.reported, "1") != identity_digest(
        backend, gemma.reported, "1")
    assert identity_digest(backend, smol.reported, "1") != identity_digest(
        backend, smol.reported, "2")  # another request format


def test_what_each_server_reports() -> None:
    python = served_identity(LLAMA_CPP_PYTHON, "smollm2-135m")
    assert python.reported == {"id": "/models/SmolLM2.gguf"} and not python.verified
    assert python.note.startswith("unverified")
    native = served_identity(LLAMA_CPP, "smollm2", {"build_info": "b6100-1a2b3c",
                                                    "model_path": "/m/smol.gguf"})
    assert native.reported["meta"]["n_params"] == 134515008
    assert native.reported["build_info"] == "b6100-1a2b3c"
    assert "created" not in native.reported  # llama.cpp sets it to the time of the request
    assert not native.verified and is_llama_cpp(LLAMA_CPP) and not is_llama_cpp(VLLM)
    vllm = served_identity(VLLM, "smol")
    assert vllm.reported == {"id": "smol", "root": "HuggingFaceTB/SmolLM2-135M-Instruct",
                             "max_model_len": 8192}
    pinned = served_identity(PINNED, "anything")
    assert pinned.verified and "sha256:ab12" in pinned.note
    unknown = served_identity(VLLM, "missing")
    assert unknown.reported == {} and "none is named 'missing'" in unknown.note
    assert not served_identity({"error": "no"}, "x").verified


def test_the_contract_setting_and_the_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    unset = parse_contract(edited("refund", {}), "refund")
    assert "call_cache" not in canonical_dict(unset)["evaluation"]  # DecGuard's hash kept
    off = edited("refund", {"evaluation.call_cache": False})  # YAML 1.1 reads `off` so
    assert parse_contract(off, "refund").evaluation.call_cache == "off"
    contract = parse_contract(edited("refund", {"evaluation.call_cache": "read-only"}),
                              "refund")
    assert canonical_dict(contract)["evaluation"]["call_cache"] == "read-only"
    monkeypatch.delenv("DECFLOW_CALL_CACHE", raising=False)
    assert call_cache_mode(None, contract) == "read-only"
    assert call_cache_mode(None, unset) == "off"
    monkeypatch.setenv("DECFLOW_CALL_CACHE", "refresh")
    assert call_cache_mode(None, contract) == "refresh"
    assert call_cache_mode("off", contract) == "off"
    monkeypatch.setenv("DECFLOW_CALL_CACHE", "yes")
    with pytest.raises(Exception, match="DECFLOW_CALL_CACHE: 'yes' is not a call-cache mode"):
        call_cache_mode(None, contract)
    assert [fresh_answers_mode(m) for m in ("off", "read-write", "read-only", "refresh")] == [
        "off", "refresh", "off", "refresh"]
