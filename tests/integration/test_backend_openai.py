"""The `openai` backend against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest

from decflow.backends.base import (
    BackendUnavailable,
    DecisionSpec,
    InvalidResponse,
)
from decflow.backends.openai import (
    SYSTEM_MESSAGE,
    OpenAIBackend,
    first_token_collisions,
    parse_answer,
)
from decflow.contracts.providers import OpenAISettings
from decflow.errors import ConfigurationError
from tests.support.backends import decide, run
from tests.support.servers.fake_openai import SERVED_MODEL, FakeOpenAI
from tests.support.servers.recording import RecordingServer, Reply

TEAM = DecisionSpec("support_team", "choice", ("billing", "shipping", "technical"),
                    "Which team should handle this ticket?")


def make(server: RecordingServer, spec: DecisionSpec = TEAM, **settings: Any) -> OpenAIBackend:
    validated = OpenAISettings.model_validate({"url": server.url("/v1"), **settings})
    return OpenAIBackend("default", "smollm2-135m", validated, spec)


# -- logprobs readout -----------------------------------------------------------------------


def test_logprobs_request_and_prefix_matching() -> None:
    tokens = {"bill": 0.30, " Billing": 0.10, "Ship": 0.08, "t": 0.02, "The": 0.40,
              "billings": 0.05, " ": 0.05}
    with FakeOpenAI(tokens).serve() as server:
        prediction = decide(make(server), text="My card was charged twice.")
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    body = request.json()
    assert body["model"] == "smollm2-135m"
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["messages"][0] == {"role": "system", "content": SYSTEM_MESSAGE}
    user = body["messages"][1]
    assert user["role"] == "user"
    assert "Which team should handle this ticket?" in user["content"]
    assert "My card was charged twice." in user["content"]
    assert "billing\nshipping\ntechnical" in user["content"]
    # bill + Billing → billing; Ship → shipping; t → technical; "The", "billings", " " → none
    mass = 0.30 + 0.10 + 0.08 + 0.02
    assert prediction.probabilities == pytest.approx(
        {"billing": 0.40 / mass, "shipping": 0.08 / mass, "technical": 0.02 / mass})
    assert prediction.metadata == {"label_mass": pytest.approx(mass)}
    assert prediction.model == "smollm2-135m"
    assert prediction.model_version == SERVED_MODEL


def test_logprobs_follow_the_shown_form() -> None:
    tokens = {"B": 0.5, "A": 0.2, "billing": 0.3}
    with FakeOpenAI(tokens).serve() as server:
        prediction = decide(make(server), labels=("A) shipping", "B) billing", "C) technical"))
    assert "A) shipping\nB) billing\nC) technical" in server.requests[0].json()["messages"][1][
        "content"]
    # "billing" is not a prefix of "b) billing": only the letters count under this format
    assert prediction.probabilities == pytest.approx(
        {"A) shipping": 0.2 / 0.7, "B) billing": 0.5 / 0.7, "C) technical": 0.0})


def test_zero_label_mass_is_invalid_response() -> None:
    with FakeOpenAI({"The": 0.6, "I": 0.4}).serve() as server, pytest.raises(
        InvalidResponse, match="no probability mass"
    ):
        decide(make(server))


@pytest.mark.parametrize(
    "body",
    [{"choices": []}, {"choices": [{"message": {"content": "x"}}]},
     {"choices": [{"logprobs": {"content": [{"top_logprobs": [{"token": 3, "logprob": 0}]}]}}]}],
)
def test_malformed_logprobs_are_invalid_response(body: dict[str, Any]) -> None:
    with RecordingServer(script=[Reply(200, body)]) as server, pytest.raises(InvalidResponse):
        decide(make(server))


@pytest.mark.parametrize(
    ("labels", "pairs"),
    [
        (("billing", "shipping", "technical"), []),
        (("yes", "no"), []),
        (("spam", "safe"), []),
        (("A) refund", "B) reject", "C) review"), []),
        (("Replace", "Reject", "Keep"), [("Replace", "Reject")]),
        (("REPLACE", "REJECT"), [("REPLACE", "REJECT")]),
        (("high", "highest", "low"), [("high", "highest")]),
        (("spam", "SPAM"), [("spam", "SPAM")]),
        (('"yes"', '"no"'), [('"yes"', '"no"')]),
        (("[spam]", "[ham]"), [("[spam]", "[ham]")]),
    ],
)
def test_first_token_collisions(labels: tuple[str, ...], pairs: list[tuple[str, str]]) -> None:
    assert first_token_collisions(labels) == pairs


def test_colliding_labels_stop_the_run_before_any_call() -> None:
    spec = DecisionSpec("action", "choice", ("Replace", "Reject", "Keep"), "What to do?")
    with FakeOpenAI({"Keep": 1.0}).serve() as server, pytest.raises(
        ConfigurationError, match="'Replace' and 'Reject'"
    ):
        decide(make(server, spec))
    assert server.requests == []


# -- sample readout -------------------------------------------------------------------------


def test_sample_readout() -> None:
    answers = ["billing", "Shipping.", "I think billing", "no idea", None]
    with FakeOpenAI(completions=answers).serve() as server:
        backend = make(server, readout="sample", samples=5, temperature=0.7)
        prediction = decide(backend)
    assert len(server.requests) == 5
    for request in server.requests:
        body = request.json()
        assert body["temperature"] == 0.7
        assert "logprobs" not in body and "seed" not in body and "n" not in body
    assert prediction.probabilities == pytest.approx(
        {"billing": 2 / 3, "shipping": 1 / 3, "technical": 0.0})
    assert prediction.metadata == {"samples": 5, "parsed": 3, "unparseable": 2}
    assert prediction.model_version == SERVED_MODEL


def test_sample_with_nothing_parseable_is_invalid_response() -> None:
    with FakeOpenAI(completions=["billing or shipping", "?"]).serve() as server, pytest.raises(
        InvalidResponse, match="none of the 2 sampled answers"
    ):
        decide(make(server, readout="sample", samples=2))


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("billing", "billing"),
        ("  BILLING!  ", "billing"),
        ("The answer is: technical.", "technical"),
        ("billing, not shipping", None),
        ("rebilling", None),
        ("", None),
    ],
)
def test_parse_answer(text: str, label: str | None) -> None:
    assert parse_answer(text, TEAM.labels) == label


def test_parse_answer_reformatted_labels() -> None:
    labels = ("A) refund", "B) reject")
    assert parse_answer("A) refund", labels) == "A) refund"
    assert parse_answer("b reject", labels) == "B) reject"
    assert parse_answer('"refund"', ('"refund"', '"reject"')) == '"refund"'


# -- prompt, auth, retries, health ------------------------------------------------------------


def test_custom_prompt_and_object_input() -> None:
    prompt = "Q: {description}\nTicket: {input}\nPick one of:\n{options}\n{{literal}}"
    with FakeOpenAI({"bill": 1.0}).serve() as server:
        decide(make(server, prompt=prompt), text={"subject": "{options} here"})
    assert server.requests[0].json()["messages"][1]["content"] == (
        "Q: Which team should handle this ticket?\n"
        'Ticket: {"subject": "{options} here"}\n'
        "Pick one of:\nbilling\nshipping\ntechnical\n{literal}"
    )


def test_api_key_is_sent_as_bearer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DF_OPENAI_KEY", "sk-test-123")
    with FakeOpenAI({"bill": 1.0}).serve() as server:
        decide(make(server, api_key_env="DF_OPENAI_KEY"))
        health = run(make(server, api_key_env="DF_OPENAI_KEY"), lambda b: b.healthcheck())
    assert server.requests[0].headers["Authorization"] == "Bearer sk-test-123"
    assert server.requests[1].path == "/v1/models"
    assert server.requests[1].headers["Authorization"] == "Bearer sk-test-123"
    assert health.status == "ok"
    monkeypatch.delenv("DF_OPENAI_KEY")
    with FakeOpenAI({"bill": 1.0}).serve() as server, pytest.raises(
        ConfigurationError,
        match="openai backend 'default': environment variable DF_OPENAI_KEY is not set",
    ):
        decide(make(server, api_key_env="DF_OPENAI_KEY"))


def test_5xx_and_429_are_retried() -> None:
    fake = FakeOpenAI({"bill": 1.0})
    with RecordingServer(fake, script=[Reply(500), Reply(429)]) as server:
        prediction = decide(make(server, max_retries=2))
    assert len(server.requests) == 3
    assert prediction.probabilities["billing"] == 1.0
    with RecordingServer(script=[Reply(429)] * 2) as server, pytest.raises(
        BackendUnavailable, match="HTTP 429"
    ):
        decide(make(server, max_retries=1))


def test_healthcheck_and_details() -> None:
    with FakeOpenAI({"bill": 1.0}).serve() as server:
        backend = make(server)
        assert run(backend, lambda b: b.healthcheck()).status == "ok"
        decide(backend)
        assert backend.details() == {
            "url": server.url("/v1"), "protocol": "openai.chat.completions",
            "readout": "logprobs", "served_models": [SERVED_MODEL],
        }
        broken = make(server, health_url=server.url("/v1/nothing"))
        assert run(broken, lambda b: b.healthcheck()).status == "unhealthy"
