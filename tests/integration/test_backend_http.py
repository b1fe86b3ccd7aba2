"""The `http` backend against real servers on 127.0.0.1: every row of the outcome table."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import pytest

from decflow import __version__
from decflow.backends.base import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    DecisionRequest,
    DecisionSpec,
    InvalidResponse,
    Prediction,
)
from decflow.backends.engine import check_probabilities
from decflow.backends.http import HttpBackend
from decflow.contracts.providers import HttpSettings
from decflow.errors import ConfigurationError
from tests.support.backends import decide, run
from tests.support.credentials import allow_credentials
from tests.support.paths import ROOT
from tests.support.servers.recording import Recorded, RecordingServer, Reply

SPEC = DecisionSpec("refund_request", "choice", ("refund", "reject", "review"), "Refund?")
GOOD = {"probabilities": {"refund": 0.7, "reject": 0.1, "review": 0.2}}


def make(
    url: str, spec: DecisionSpec = SPEC, model: str | None = "refund-v3", **settings: Any
) -> HttpBackend:
    validated = HttpSettings.model_validate({"url": url, **settings})
    return HttpBackend("default", model, validated, spec)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- success and request shape ------------------------------------------------------------


def test_request_body_and_success() -> None:
    body = {**GOOD, "model": "refund-v3.1", "model_version": "2026-11", "metadata": {"a": 1}}
    with RecordingServer(script=[Reply(200, body)]) as server:
        prediction = decide(make(server.url("/decide")), text={"text": "x", "n": 2})
    assert server.requests[0].method == "POST"
    assert server.requests[0].path == "/decide"
    assert server.requests[0].json() == {
        "protocol": "decguard.http/0.1",
        "case_id": "r1",
        "model": "refund-v3",
        "decision": {"name": "refund_request", "type": "choice",
                     "labels": ["refund", "reject", "review"]},
        "input": {"text": "x", "n": 2},
    }
    assert prediction == Prediction(GOOD["probabilities"], "refund-v3.1", "2026-11", {"a": 1})


def test_model_falls_back_to_contract_model_and_null_model_is_sent() -> None:
    with RecordingServer(script=[Reply(200, GOOD)]) as server:
        prediction = decide(make(server.url(), model=None))
    assert server.requests[0].json()["model"] is None
    assert prediction.model is None and prediction.model_version is None
    with RecordingServer(script=[Reply(200, GOOD)]) as server:
        assert decide(make(server.url())).model == "refund-v3"


def test_labels_are_sent_in_presentation_order() -> None:
    with RecordingServer(script=[Reply(200, GOOD)]) as server:
        decide(make(server.url()), labels=("review", "reject", "refund"))
    assert server.requests[0].json()["decision"]["labels"] == ["review", "reject", "refund"]


# -- invalid bodies ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not valid JSON"),
        (b'{"probabilities": {"refund": NaN, "reject": 0.5, "review": 0.5}}', "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        ({"probs": GOOD["probabilities"]}, "no 'probabilities' object"),
        ({"probabilities": [0.7, 0.1, 0.2]}, "no 'probabilities' object"),
        ({**GOOD, "model": 3}, "'model' must be a string"),
        ({**GOOD, "model_version": ["v"]}, "'model_version' must be a string"),
        ({**GOOD, "metadata": "text"}, "'metadata' must be an object"),
    ],
)
def test_invalid_bodies_are_invalid_response(body: Any, message: str) -> None:
    with RecordingServer(script=[Reply(200, body)]) as server, pytest.raises(
        InvalidResponse
    ) as exc:
        decide(make(server.url()))
    assert message in str(exc.value)
    assert exc.value.kind == "invalid_response"


def test_wrong_keys_are_returned_raw_for_the_engine_to_reject() -> None:
    body = {"probabilities": {"refund": 0.7, "reject": 0.3, "maybe": 0.0}}
    with RecordingServer(script=[Reply(200, body)]) as server:
        prediction = decide(make(server.url()))
    assert dict(prediction.probabilities) == body["probabilities"]
    with pytest.raises(InvalidResponse, match="missing labels \\['review'\\]"):
        check_probabilities(prediction.probabilities, SPEC.labels, 0.001)


# -- statuses and retries -----------------------------------------------------------------


def test_503_twice_then_200_is_retried_with_doubling_backoff() -> None:
    script = [Reply(503), Reply(503), Reply(200, GOOD)]
    with RecordingServer(script=script) as server:
        prediction = decide(make(server.url(), max_retries=2, retry_backoff_s=0.2))
    assert prediction.probabilities == GOOD["probabilities"]
    gaps = [b - a for a, b in zip(server.times, server.times[1:], strict=False)]
    assert len(gaps) == 2
    assert 0.18 <= gaps[0] < 0.35 and 0.38 <= gaps[1] < 0.6


@pytest.mark.parametrize("status", [502, 503, 504])
def test_persistent_unavailable_status(status: int) -> None:
    with RecordingServer(script=[Reply(status)] * 3) as server, pytest.raises(
        BackendUnavailable, match=f"returned HTTP {status}"
    ):
        decide(make(server.url(), max_retries=1, retry_backoff_s=0))
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [500, 400, 401, 404, 429])
def test_other_statuses_are_backend_errors_and_not_retried(status: int) -> None:
    body = b'{"error": "secret internal detail"}'
    with RecordingServer(script=[Reply(status, body)] * 3) as server, pytest.raises(
        BackendError
    ) as exc:
        decide(make(server.url(), max_retries=2, retry_backoff_s=0))
    assert type(exc.value) is BackendError and exc.value.kind == "backend_error"
    assert str(exc.value) == f"returned HTTP {status}"  # the body is never stored
    assert len(server.requests) == 1


def test_redirect_is_not_followed() -> None:
    with RecordingServer(script=[Reply(302, b"", {"Location": "/elsewhere"}), Reply(200, GOOD)]) \
            as server, pytest.raises(BackendError, match="returned HTTP 302"):
        decide(make(server.url("/decide")))
    assert [r.path for r in server.requests] == ["/decide"]


# -- transport failures -------------------------------------------------------------------


def test_connection_refused_is_unavailable_after_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}/decide"
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match=r"cannot connect to .*: ConnectError"):
        decide(make(url, max_retries=2, retry_backoff_s=0.1))
    assert time.monotonic() - started >= 0.3  # 0.1 + 0.2 of backoff


def test_read_timeout_is_timeout_and_never_retried() -> None:
    with RecordingServer(script=[Reply(200, GOOD, delay=1.5)] * 3) as server, pytest.raises(
        BackendTimeout, match=r"timed out after 0\.3s"
    ):
        decide(make(server.url(), timeout_s=0.3, max_retries=2, retry_backoff_s=0))
    assert len(server.requests) == 1


def _saturated_listener() -> tuple[socket.socket, list[socket.socket]]:
    """A listening socket whose accept queue is full: Linux then drops new SYNs, so a
    connect hangs until the client's connect timeout (a loopback stand-in for an
    unroutable address)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(8):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
        fillers.append(filler)
    time.sleep(0.1)
    return listener, fillers


def test_connect_timeout_is_timeout_after_retries() -> None:
    listener, fillers = _saturated_listener()
    try:
        probe = socket.socket()
        probe.settimeout(0.3)
        try:
            probe.connect(listener.getsockname())
            pytest.skip("this kernel accepts connections beyond a full backlog")
        except (TimeoutError, BlockingIOError):
            pass
        finally:
            probe.close()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/decide"
        started = time.monotonic()
        with pytest.raises(BackendTimeout, match=r"connect timed out after 0\.2s"):
            decide(make(url, timeout_s=0.2, max_retries=1, retry_backoff_s=0.1))
        assert time.monotonic() - started >= 0.5  # two connect attempts + backoff
    finally:
        for sock in [*fillers, listener]:
            sock.close()


# -- headers and credentials ----------------------------------------------------------------


def test_headers_user_agent_static_env_and_bearer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DF_TOKEN", "tok-123")
    monkeypatch.setenv("DF_TENANT", "acme")
    settings = {"headers": {"X-Team": "risk"}, "headers_from_env": {"X-Tenant": "DF_TENANT"},
                "bearer_token_env": "DF_TOKEN"}
    with RecordingServer(script=[Reply(200, GOOD)]) as server:
        allow_credentials(monkeypatch, server.url())
        decide(make(server.url(), **settings))
    headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert headers["user-agent"] == f"decflow/{__version__}"
    assert headers["content-type"] == "application/json"
    assert headers["x-team"] == "risk"
    assert headers["x-tenant"] == "acme"
    assert headers["authorization"] == "Bearer tok-123"


@pytest.mark.parametrize("value", [None, ""])
def test_missing_credential_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("DF_MISSING", raising=False)
    else:
        monkeypatch.setenv("DF_MISSING", value)
    with RecordingServer(script=[Reply(200, GOOD)]) as server, pytest.raises(
        ConfigurationError,
        match=r"^http backend 'default': environment variable DF_MISSING is not set$",
    ):
        allow_credentials(monkeypatch, server.url())
        decide(make(server.url(), bearer_token_env="DF_MISSING"))
    assert server.requests == []


def test_secret_never_appears_in_metadata_errors_or_details(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "sk-very-secret-value"
    monkeypatch.setenv("DF_TOKEN", secret)

    def echo(request: Recorded) -> Reply:
        auth = request.headers.get("Authorization", "")
        metadata = {"echo": auth, "nested": [{"Api-Key": "k", "token": auth}], "ok": 1,
                    "Set-Cookie": "c", "deep": {"client_secret": {"x": 1}}}
        return Reply(200, {**GOOD, "metadata": metadata})

    with RecordingServer(echo) as server:
        allow_credentials(monkeypatch, server.url())
        backend = make(server.url("/decide?tenant=7#frag"), bearer_token_env="DF_TOKEN")
        prediction = decide(backend)
    assert prediction.metadata == {
        "echo": "[REDACTED]",
        "nested": [{"Api-Key": "[REDACTED]", "token": "[REDACTED]"}],
        "ok": 1,
        "Set-Cookie": "[REDACTED]",
        "deep": {"client_secret": "[REDACTED]"},
    }
    assert backend.details() == {
        "url": f"http://127.0.0.1:{server.port}/decide",
        "protocol": "decguard.http/0.1",
    }
    with RecordingServer(script=[Reply(401, secret.encode())]) as server, pytest.raises(
        BackendError
    ) as exc:
        allow_credentials(monkeypatch, server.url())
        decide(make(server.url(), bearer_token_env="DF_TOKEN"))
    assert secret not in str(exc.value) and secret not in repr(exc.value)


# -- healthcheck ----------------------------------------------------------------------------


def test_healthcheck(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DF_TOKEN", "tok")
    routes = {"/healthz": 200, "/down": 503}

    def handler(request: Recorded) -> Reply:
        return Reply(routes.get(request.path.split("?")[0], 404), b"ignored")

    with RecordingServer(handler) as server:
        allow_credentials(monkeypatch, server.url())

        def health(path: str | None) -> Any:
            extra = {"health_url": server.url(path)} if path else {}
            backend = make(server.url("/decide"), bearer_token_env="DF_TOKEN", **extra)
            return run(backend, lambda b: b.healthcheck())

        assert health("/healthz").status == "ok"
        assert health("/down").status == "unhealthy"
        assert health("/missing").status == "unhealthy"
        assert health(None).status == "unknown"
    assert server.requests[0].method == "GET"
    assert server.requests[0].headers["Authorization"] == "Bearer tok"
    assert server.requests[0].headers["User-Agent"] == f"decflow/{__version__}"
    refused = make(f"http://127.0.0.1:{free_port()}/d",
                   health_url=f"http://127.0.0.1:{free_port()}/healthz")
    assert run(refused, lambda b: b.healthcheck()).status == "unhealthy"


# -- label_map ------------------------------------------------------------------------------

SPAM = DecisionSpec("spam", "noul", ("spam", "ham"))


def _answer_in_sent_names(request: Recorded) -> Reply:
    sent = request.json()["decision"]["labels"]
    return Reply(200, {"probabilities": {sent[0]: 0.9, sent[1]: 0.1}})


@pytest.mark.parametrize(
    ("shown", "sent"),
    [
        (("spam", "ham"), ["true", "false"]),
        (("ham", "spam"), ["false", "true"]),
        (("SPAM", "HAM"), ["TRUE", "FALSE"]),
        (("Spam", "Ham"), ["True", "False"]),
        (("A) ham", "B) spam"), ["A) false", "B) true"]),
        (("1. spam", "2. ham"), ["1. true", "2. false"]),
        (('"spam"', '"ham"'), ['"true"', '"false"']),
        (("[spam]", "[ham]"), ["[true]", "[false]"]),
        (("junk", "ham"), ["junk", "false"]),  # an alias is sent as shown
    ],
)
def test_label_map_applies_by_meaning_under_label_format(
    shown: tuple[str, str], sent: list[str]
) -> None:
    with RecordingServer(_answer_in_sent_names) as server:
        backend = make(server.url(), spec=SPAM, label_map={"true": "spam", "false": "ham"})
        prediction = run(
            backend,
            lambda b: b.predict(DecisionRequest("c", DecisionSpec("spam", "noul", shown), "x")),
        )
    assert server.requests[0].json()["decision"]["labels"] == sent
    assert dict(prediction.probabilities) == {shown[0]: 0.9, shown[1]: 0.1}


def test_label_map_duplicate_after_mapping_is_invalid() -> None:
    body = {"probabilities": {"true": 0.5, "spam": 0.5}}
    with RecordingServer(script=[Reply(200, body)]) as server, pytest.raises(
        InvalidResponse, match="twice"
    ):
        backend = make(server.url(), spec=SPAM, label_map={"true": "spam", "false": "ham"})
        run(backend, lambda b: b.predict(DecisionRequest("c", SPAM, "x")))


# -- the published OpenAPI description matches what is sent --------------------------------


def test_openapi_describes_the_request_sent() -> None:
    import typing

    import yaml

    from decflow.backends.base import DecisionType

    document = ROOT / "docs" / "openapi" / "decflow-http-0.1.yaml"
    api = yaml.safe_load(document.read_text())
    assert api["openapi"].startswith("3.1")
    schemas = api["components"]["schemas"]
    request_schema, decision_schema = schemas["DecisionRequest"], schemas["Decision"]
    with RecordingServer(script=[Reply(200, GOOD)]) as server:
        decide(make(server.url()))
    sent = server.requests[0].json()
    for schema, body in ((request_schema, sent), (decision_schema, sent["decision"])):
        assert schema["additionalProperties"] is False
        assert set(schema["required"]) == set(schema["properties"]) == set(body)
    assert request_schema["properties"]["protocol"]["const"] == sent["protocol"]
    assert decision_schema["properties"]["labels"]["minItems"] == 2
    assert decision_schema["properties"]["type"]["enum"] == list(typing.get_args(DecisionType))
    post = api["paths"]["/"]["post"]
    assert set(post["responses"]) == {"200", "502", "503", "504", "default"}
    assert api["security"] == [{}, {"bearer": []}]
    assert "get" in api["paths"]["/healthz"]


def test_one_backend_serves_several_event_loops_and_threads() -> None:
    """Shards may run in their own `asyncio.run`, in threads: each loop gets connections."""
    from concurrent.futures import ThreadPoolExecutor

    with RecordingServer(lambda request: Reply(200, GOOD)) as server:
        backend = make(server.url())

        def shard(i: int) -> list[Any]:
            async def calls() -> list[Any]:
                requests = [DecisionRequest(f"{i}-{n}", SPEC, "x") for n in range(5)]
                results = await asyncio.gather(*(backend.predict(r) for r in requests))
                await backend.aclose()
                return results

            return asyncio.run(calls())

        assert len(shard(0)) == 5
        assert len(shard(1)) == 5  # a new loop after the first one closed
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(shard, range(2, 8)))
    assert all(len(r) == 5 for r in results)
    assert len(server.requests) == 40


def test_credential_with_a_line_break_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DF_TOKEN", "abc\r\nX-Injected: 1")
    with RecordingServer(script=[Reply(200, GOOD)]) as server, pytest.raises(
        ConfigurationError, match="DF_TOKEN contains a line break"
    ):
        allow_credentials(monkeypatch, server.url())
        decide(make(server.url(), bearer_token_env="DF_TOKEN"))
    assert server.requests == []


# -- the request body -----------------------------------------------------------------------


@pytest.mark.parametrize("model", ["refund-v3", None, 'mo"del \u00e9'])
@pytest.mark.parametrize("value", [
    "The blender arrived.",
    'quotes " \\ and \u2028, \u00e9\u00e8 \U0001f600, a tab\t and a NUL \x00',
    {"text": "x", "n": [1, 2.5, 1e-07, -0.0, 12345678901234567890], "nested": {"a": None}},
])
def test_the_body_is_the_payload_as_json_byte_for_byte(model: str | None, value: Any) -> None:
    # Parts the same for every request are encoded ahead; the bytes sent are what encoding the
    # whole payload gives, for any input, model and labels (mapped ones too).
    backend = make("http://127.0.0.1:9/decide", model=model,
                   label_map={"REFUND_OK": "refund", "nope": "reject"})
    for shown in (SPEC, DecisionSpec("refund_request", "choice", ("Review", "B) refund"))):
        request = DecisionRequest('case "7" \u00e9', shown, value)
        sent = backend.labels.to_backend(shown.labels)
        expected = json.dumps(backend.payload(request, sent), ensure_ascii=False,
                              separators=(",", ":")).encode()
        assert backend.body(request, sent) == expected
        assert backend.body(request, sent) == expected  # from the kept middle part


def test_the_server_receives_the_payload() -> None:
    with RecordingServer(script=[Reply(200, GOOD)]) as server:
        decide(make(server.url()), text={"text": "\u00e9", "k": 2})
    assert server.requests[0].json() == {
        "protocol": "decguard.http/0.1", "case_id": "r1", "model": "refund-v3",
        "decision": {"name": "refund_request", "type": "choice",
                     "labels": ["refund", "reject", "review"]},
        "input": {"text": "\u00e9", "k": 2}}
