"""The `systemone` backend against a fake System One server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from decflow.backends.base import (
    BackendUnavailable,
    DecisionRequest,
    DecisionSpec,
    InvalidResponse,
)
from decflow.backends.systemone import SystemOneBackend
from decflow.contracts.providers import SystemOneSettings
from tests.support.servers.recording import Recorded, RecordingServer, Reply

TEAM = DecisionSpec("support_team", "choice", ("billing", "shipping", "technical"), "Which team?")
SPAM = DecisionSpec("is_spam", "noul", ("spam", "ham"), "Is this spam?")
SEVERITY = DecisionSpec("severity", "score", ("low", "medium", "high"), "How severe?")


def make(url: str, spec: DecisionSpec, **settings: Any) -> SystemOneBackend:
    validated = SystemOneSettings.model_validate({"url": url, **settings})
    return SystemOneBackend("default", "typesafe/jev-1.13", validated, spec)


def decide_all(backend: SystemOneBackend, requests: list[DecisionRequest]) -> list[Any]:
    async def scenario() -> list[Any]:
        try:
            results = []
            for request in requests:
                try:
                    results.append(await backend.predict(request))
                except Exception as exc:
                    results.append(exc)
            return results
        finally:
            await backend.aclose()

    return asyncio.run(scenario())


def decide(backend: SystemOneBackend, spec: DecisionSpec, text: Any = "x") -> Any:
    result = decide_all(backend, [DecisionRequest("r1", spec, text)])[0]
    if isinstance(result, Exception):
        raise result
    return result


def reply(answer: dict[str, Any], name: str = "support_team", **top: Any) -> Reply:
    body = {"id": "req-1", "model": "typesafe/jev-1.13-20260917", "provider": "kev-cloud",
            "answers": {name: answer}, "usage": {"input_tokens": 12, "output_tokens": 1,
                                                 "cost": 0.0001, "note": "x"}, **top}
    return Reply(200, body)


def choice_server(request: Recorded) -> Reply:
    """Answers from what was asked: the first criterion gets 0.6, the rest share 0.4."""
    body = request.json()
    (name, question), = body["questions"].items()
    options = list(question["criteria"])
    rest = 0.4 / (len(options) - 1)
    probabilities = {o: (0.6 if i == 0 else rest) for i, o in enumerate(options)}
    answer = {"type": "choice", "probabilities": probabilities, "choice": options[0],
              "confidence": 0.99}
    return reply(answer, name)


# -- wire format ----------------------------------------------------------------------------


def test_choice_request_and_answer() -> None:
    with RecordingServer(choice_server) as server:
        backend = make(server.url("/v1/systemone"), TEAM)
        results = decide_all(backend, [
            DecisionRequest("r1", TEAM, {"ticket": "card charged twice"}),
            DecisionRequest("r1/o", DecisionSpec(TEAM.name, "choice",
                                                 ("technical", "billing", "shipping")), "x"),
        ])
    assert server.requests[0].json() == {
        "model": "typesafe/jev-1.13",
        "state": {"ticket": "card charged twice"},
        "questions": {"support_team": {
            "type": "choice", "instructions": "Which team?",
            "criteria": {"billing": None, "shipping": None, "technical": None}}},
    }
    assert list(server.requests[1].json()["questions"]["support_team"]["criteria"]) == [
        "technical", "billing", "shipping"]
    first, second = results
    assert first.probabilities == pytest.approx({"billing": 0.6, "shipping": 0.2,
                                                 "technical": 0.2})
    assert second.probabilities["technical"] == 0.6
    assert first.model == "typesafe/jev-1.13"
    assert first.model_version == "typesafe/jev-1.13-20260917"
    assert first.metadata == {"request_id": "req-1", "upstream_provider": "kev-cloud",
                              "usage": {"input_tokens": 12, "output_tokens": 1, "cost": 0.0001}}
    assert backend.details() == {
        "url": server.url("/v1/systemone"), "protocol": "typesafe.systemone/v1",
        "served_models": ["typesafe/jev-1.13-20260917"], "upstream_providers": ["kev-cloud"],
    }


def test_instructions_setting_overrides_description() -> None:
    with RecordingServer(choice_server) as server:
        decide(make(server.url(), TEAM, instructions="Route this ticket."), TEAM)
    assert server.requests[0].json()["questions"]["support_team"]["instructions"] == (
        "Route this ticket.")


def test_noul_has_no_criteria_and_maps_positionally() -> None:
    answer = {"type": "noul", "noul": 0.8, "confidence": 0.1}
    shown = DecisionSpec(SPAM.name, "noul", ("SPAM", "HAM"))
    with RecordingServer(script=[reply(answer, "is_spam")] * 2) as server:
        plain, upper = decide_all(make(server.url(), SPAM), [
            DecisionRequest("r1", SPAM, "win money"), DecisionRequest("r1/f", shown, "win money")])
    asked = [r.json()["questions"]["is_spam"] for r in server.requests]
    assert asked[0] == asked[1] == {"type": "noul", "instructions": "Is this spam?"}
    assert plain.probabilities == pytest.approx({"spam": 0.8, "ham": 0.2})
    assert upper.probabilities == pytest.approx({"SPAM": 0.8, "HAM": 0.2})


def test_score_levels_by_index_with_legend() -> None:
    answer = {"type": "score", "probabilities": {"0": 0.1, "1": 0.3, "2": 0.6},
              "legend": {"0": "low", "1": "medium", "2": "high"}}
    with RecordingServer(script=[reply(answer, "severity")]) as server:
        prediction = decide(make(server.url(), SEVERITY), SEVERITY)
    question = server.requests[0].json()["questions"]["severity"]
    assert question["criteria"] == ["low", "medium", "high"]
    assert prediction.probabilities == {"low": 0.1, "medium": 0.3, "high": 0.6}


def test_request_id_from_header_and_label_map_for_choice() -> None:
    def handler(request: Recorded) -> Reply:
        options = list(request.json()["questions"]["support_team"]["criteria"])
        answer = {"type": "choice", "probabilities": dict(zip(options, [0.5, 0.3, 0.2],
                                                               strict=True)),
                  "choice": options[0]}
        body = {"model": "kev-0.8b", "answers": {"support_team": answer}}
        return Reply(200, body, {"x-typesafe-request-id": "hdr-9"})

    with RecordingServer(handler) as server:
        backend = make(server.url(), TEAM, label_map={"BILL": "billing"})
        shown = DecisionSpec(TEAM.name, "choice", ("BILLING", "SHIPPING", "TECHNICAL"))
        plain, upper = decide_all(backend, [DecisionRequest("a", TEAM, "x"),
                                            DecisionRequest("b", shown, "x")])
    assert list(server.requests[0].json()["questions"]["support_team"]["criteria"]) == [
        "BILL", "shipping", "technical"]
    assert plain.probabilities == {"billing": 0.5, "shipping": 0.3, "technical": 0.2}
    assert upper.probabilities == {"BILLING": 0.5, "SHIPPING": 0.3, "TECHNICAL": 0.2}
    assert plain.metadata == {"request_id": "hdr-9"}


# -- checks ---------------------------------------------------------------------------------

CHOICE_OK = {"type": "choice", "probabilities": {"billing": 0.6, "shipping": 0.3,
                                                 "technical": 0.1}, "choice": "billing"}


@pytest.mark.parametrize(
    ("spec", "body", "message"),
    [
        (TEAM, {"model": "m", "answers": {}}, "keyed by 'support_team'"),
        (TEAM, {"model": "m", "answers": {"support_team": CHOICE_OK, "x": CHOICE_OK}},
         "keyed by 'support_team'"),
        (TEAM, {"model": "m", "answers": {"support_team": {**CHOICE_OK, "type": "score"}}},
         "does not match"),
        (TEAM, {"answers": {"support_team": CHOICE_OK}}, "'model' must be a non-empty string"),
        (TEAM, {"model": "", "answers": {"support_team": CHOICE_OK}}, "'model'"),
        (TEAM, {"model": "m", "answers": {"support_team": {**CHOICE_OK, "choice": "sales"}}},
         "not one of the options"),
        (TEAM, {"model": "m", "answers": {"support_team": {**CHOICE_OK, "choice": "shipping"}}},
         "highest probability"),
        (TEAM, {"model": "m", "answers": {"support_team": {"type": "choice", "choice": "billing"}}},
         "no 'probabilities'"),
        (SPAM, {"model": "m", "answers": {"is_spam": {"type": "noul", "noul": 1.2}}}, "[0, 1]"),
        (SPAM, {"model": "m", "answers": {"is_spam": {"type": "noul", "noul": True}}}, "[0, 1]"),
        (SPAM, {"model": "m", "answers": {"is_spam": {"type": "noul"}}}, "[0, 1]"),
        (SEVERITY, {"model": "m", "answers": {"severity": {
            "type": "score", "probabilities": {"low": 0.2, "medium": 0.3, "high": 0.5}}}},
         "level index"),
        (SEVERITY, {"model": "m", "answers": {"severity": {
            "type": "score", "probabilities": {"0": 0.2, "1": 0.3, "2": 0.5},
            "legend": {"0": "low", "1": "high", "2": "medium"}}}}, "legend"),
    ],
)
def test_answer_checks(spec: DecisionSpec, body: dict[str, Any], message: str) -> None:
    with RecordingServer(script=[Reply(200, body)]) as server, pytest.raises(
        InvalidResponse
    ) as exc:
        decide(make(server.url(), spec), spec)
    assert message in str(exc.value)


@pytest.mark.parametrize("status", [429, 529, 503])
def test_429_and_529_are_retried(status: int) -> None:
    with RecordingServer(choice_server, script=[Reply(status)]) as server:
        prediction = decide(make(server.url(), TEAM, max_retries=1, retry_backoff_s=0), TEAM)
    assert len(server.requests) == 2
    assert prediction.probabilities["billing"] == 0.6
    with RecordingServer(script=[Reply(status)] * 2) as server, pytest.raises(
        BackendUnavailable, match=f"HTTP {status}"
    ):
        decide(make(server.url(), TEAM, max_retries=1, retry_backoff_s=0), TEAM)
