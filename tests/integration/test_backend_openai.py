"""The `openai` backend against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import math
from typing import Any

import pytest

from decflow.backends.base import (
    BackendUnavailable,
    DecisionRequest,
    DecisionSpec,
    InvalidResponse,
)
from decflow.backends.llm_prompts import SYSTEM_MESSAGES, parse_answer, parse_code
from decflow.backends.openai import OpenAIBackend
from decflow.contracts.providers import OpenAISettings
from decflow.errors import ConfigurationError
from tests.support.backends import decide, run
from tests.support.credentials import allow_credentials
from tests.support.servers.fake_openai import BOS, SERVED_MODEL, FakeOpenAI
from tests.support.servers.recording import Recorded, RecordingServer, Reply

TEAM = DecisionSpec("support_team", "choice", ("billing", "shipping", "technical"),
                    "Which team should handle this ticket?")
ACTION = DecisionSpec("action", "choice", ("refund", "replace", "reject"),
                      "What should we do with this return?")
SENTIMENT = DecisionSpec("sentiment", "choice", ("positive", "negative", "neutral"),
                         "What is the sentiment of the review?")
# SmolLM2-135M's pieces for these words (real-models.md): refund = ref+und, reject = re+ject,
# Replace = Re+place, Reject = Re+ject, while replace, " Replace", " Reject" are one token.
SMOLLM2_VOCAB = ["ref", "und", "replace", "re", "ject", " refund", " replace", " reject",
                 "Ref", "Re", "place", " Ref", " Replace", " Reject", "REF", "UND", "RE", "PL",
                 "ACE", "JECT", " REF", " RE", "positive", "negative", "neutral", " positive",
                 " negative", " neutral", "Positive", "Negative", "Neutral", " Positive",
                 " Negative", " Neutral", "A", "B", "C", " A", " B", " C"]
COMPLETION_PATHS = ("/v1/chat/completions", "/v1/completions")


def make(server: RecordingServer, spec: DecisionSpec = TEAM, **settings: Any) -> OpenAIBackend:
    validated = OpenAISettings.model_validate({"url": server.url("/v1"), **settings})
    return OpenAIBackend("default", "smollm2-135m", validated, spec)


def calls(server: RecordingServer) -> list[Recorded]:
    """The completion requests (tokenizer probes left out)."""
    return [r for r in server.requests if r.path in COMPLETION_PATHS]


def smollm2(first_tokens: dict[str, float], **options: Any) -> FakeOpenAI:
    return FakeOpenAI(first_tokens, tokenizer="llama-cpp-python", vocab=SMOLLM2_VOCAB, **options)


def predict_all(backend: OpenAIBackend, presentations: list[tuple[str, ...]]) -> list[Any]:
    async def each(b: OpenAIBackend) -> list[Any]:
        spec = b.decision
        return [await b.predict(DecisionRequest(f"r{i}", DecisionSpec(
            spec.name, spec.type, shown, spec.description), "x"))
            for i, shown in enumerate(presentations)]

    return run(backend, each)


# -- logprobs readout with the server's tokenizer ----------------------------------------------


def test_first_pieces_from_the_tokenizer_bos_removed() -> None:
    tokens = {"re": 0.20, "ref": 0.10, "replace": 0.05, "Ref": 0.05, " Re": 0.10, "Re": 0.05,
              "The": 0.40, "refund": 0.05}
    with smollm2(tokens, bos=True).serve() as server:
        backend = make(server, ACTION)
        prediction = decide(backend)
        details = backend.details()
    tokenize = [r for r in server.requests if r.path == "/extras/tokenize"]
    assert tokenize and all(r.json()["input"] is not None for r in tokenize)
    assert server.requests.index(tokenize[-1]) < server.requests.index(calls(server)[0])
    # "re" is reject's first piece (exact match, never a prefix); "ref" and "Ref" refund's;
    # "Re" is the first piece of both Replace and Reject: it counts for neither; " Re" and
    # "refund" are no first piece of any form (the tokenizer splits refund), "The" neither
    mass = 0.20 + 0.10 + 0.05 + 0.05
    assert prediction.probabilities == pytest.approx(
        {"refund": 0.15 / mass, "replace": 0.05 / mass, "reject": 0.20 / mass})
    assert prediction.metadata == {"label_mass": pytest.approx(mass)}
    assert details["rule"] == "first_pieces"
    assert details["tokenizer"] == {"endpoint": server.url("/extras/tokenize"),
                                    "special_prefix": [BOS]}
    (table,) = details["first_pieces"]
    assert table["first_pieces"]["reject"] == [" Reject", " reject", "re"]
    assert {"piece": "Re", "labels": ["replace", "reject"]} in table["colliding_variants"]


def test_llama_cpp_tokenize_endpoint_is_found_at_the_origin() -> None:
    with FakeOpenAI({" positive": 0.3, "neg": 0.1}, tokenizer="llama.cpp",
                    vocab=SMOLLM2_VOCAB).serve() as server:
        backend = make(server, SENTIMENT)
        prediction = decide(backend)
    tried = [r.path for r in server.requests if "tokenize" in r.path]
    assert tried[:2] == ["/extras/tokenize", "/tokenize"]  # the first is not there (404)
    assert backend.details()["tokenizer"]["endpoint"] == server.url("/tokenize")
    assert prediction.probabilities == {"positive": 1.0, "negative": 0.0, "neutral": 0.0}


def test_tokenize_url_setting_is_the_only_place_asked() -> None:
    with smollm2({"positive": 1.0}).serve() as server:
        backend = make(server, SENTIMENT, tokenize_url=server.url("/extras/tokenize"))
        decide(backend)
    assert next(r.path for r in server.requests if "tokenize" in r.path) == "/extras/tokenize"
    with FakeOpenAI({"positive": 1.0}).serve() as server:
        backend = make(server, SENTIMENT, tokenize_url=server.url("/custom/tokenize"))
        with pytest.raises(ConfigurationError, match="'negative' and 'neutral'"):
            decide(backend)
    assert [r.path for r in server.requests] == ["/custom/tokenize"]


def test_decoder_dropping_the_leading_space_is_repaired() -> None:
    class SentencePieceDecoder(FakeOpenAI):
        def __call__(self, request: Recorded) -> Reply:
            reply = super().__call__(request)
            if request.path == "/extras/detokenize":
                reply.body["text"] = reply.body["text"].lstrip(" ")
            return reply

    fake = SentencePieceDecoder({" negative": 0.5, "neutral": 0.5},
                                tokenizer="llama-cpp-python", vocab=SMOLLM2_VOCAB)
    with fake.serve() as server:
        prediction = decide(make(server, SENTIMENT))
    assert prediction.probabilities == {"positive": 0.0, "negative": 0.5, "neutral": 0.5}


def test_true_collision_stops_before_any_call_naming_piece_and_readouts() -> None:
    spec = DecisionSpec("action", "choice", ("Replace", "Reject", "Refund"), "What to do?")
    with smollm2({"Re": 1.0}).serve() as server, pytest.raises(ConfigurationError) as caught:
        decide(make(server, spec))
    message = str(caught.value)
    assert "'Replace' and 'Reject' (both start with 'Re')" in message
    assert "readout: sequence" in message and "options_as: letters" in message
    assert calls(server) == []


def test_labels_sharing_letters_but_not_tokens_are_accepted() -> None:
    # "negative" and "neutral" share "ne": the character rule refuses them, the tokenizer
    # (one token each) does not
    tokens = {"negative": 0.2, "neutral": 0.1, " positive": 0.1, "ne": 0.3}
    with smollm2(tokens).serve() as server:
        prediction = decide(make(server, SENTIMENT))
    assert prediction.probabilities == pytest.approx(
        {"positive": 0.25, "negative": 0.5, "neutral": 0.25})


def test_without_a_tokenize_endpoint_the_character_rule_applies() -> None:
    with FakeOpenAI({"pos": 1.0}).serve() as server:
        backend = make(server, SENTIMENT)
        with pytest.raises(ConfigurationError) as caught:
            decide(backend)
    message = str(caught.value)
    assert "'negative' and 'neutral'" in message
    assert "conservative character rule" in message
    assert "readout: sequence" in message and "options_as: letters" in message
    assert server.url("/extras/tokenize") in message and "HTTP 404" in message
    assert calls(server) == []


def test_character_rule_readout_and_request() -> None:
    tokens = {"bill": 0.30, " Billing": 0.10, "Ship": 0.08, "t": 0.02, "The": 0.40,
              "billings": 0.05, " ": 0.05}
    with FakeOpenAI(tokens).serve() as server:
        backend = make(server)
        prediction = decide(backend, text="My card was charged twice.")
    (request,) = calls(server)
    assert request.path == "/v1/chat/completions"
    body = request.json()
    assert body["model"] == "smollm2-135m"
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["messages"][0] == {"role": "system", "content": SYSTEM_MESSAGES["labels"]}
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
    details = backend.details()
    assert details["rule"] == "characters" and details["tokenizer"]["endpoint"] is None
    assert set(details["tokenizer"]["tried"]) == {server.url("/extras/tokenize"),
                                                  server.url("/tokenize")}


def test_one_readout_per_run_from_every_presentation() -> None:
    upper = ("REFUND", "REPLACE", "REJECT")
    with smollm2({"re": 1.0}).serve() as server:
        # the originals alone are fine; the upper-cased presentation collides ("RE")
        with pytest.raises(ConfigurationError, match=r"'REPLACE' and 'REJECT'.*'RE'"):
            make(server, ACTION).prepare_run([ACTION.labels, upper])
        assert calls(server) == []
        presentations = [ACTION.labels, ACTION.labels[::-1], ("Refund", "replace", "reject")]
        plan = make(server, ACTION).prepare_run(presentations)
        probes = len(server.requests)
        # a shard in another process: adopts the stored plan, probes nothing again
        shard = make(server, ACTION)
        shard.use_plan(plan)
        predictions = predict_all(shard, presentations)
    assert len(server.requests) == probes + len(presentations)
    assert all(r.path == "/v1/chat/completions" for r in server.requests[probes:])
    assert [p.probabilities[s[0]] for p, s in zip(predictions, presentations, strict=True)] == [
        0.0, 1.0, 0.0]  # "re" is reject's, whatever the order
    assert len(plan["first_pieces"]) == 2  # the order does not make a new table
    assert shard.details()["first_pieces"] == plan["first_pieces"]


def test_a_presentation_outside_the_plan_is_read_from_known_forms_and_never_stops_a_run(
) -> None:
    planned = [("refund", "Replace", "reject"), ("refund", "replace", "Reject")]
    with smollm2({"ref": 0.5, "re": 0.5}).serve() as server:
        plan = make(server, ACTION).prepare_run(planned)
        probes = len(server.requests)
        shard = make(server, ACTION)
        shard.use_plan(plan)
        # a minimisation candidate mixing the two: Replace and Reject collide ("Re")
        with pytest.raises(InvalidResponse, match=r"'Replace' and 'Reject'.*did not cover"):
            decide(shard, labels=("refund", "Replace", "Reject"))
        shard = make(server, ACTION)
        shard.use_plan(plan)
        prediction = decide(shard, labels=("Refund", "replace", "reject"))
    assert prediction.probabilities == {"Refund": 0.5, "replace": 0.0, "reject": 0.5}
    # every form was known from the plan: no tokenizer request after planning
    assert all("tokenize" not in r.path for r in server.requests[probes:])


def test_a_stored_plan_for_another_readout_is_refused() -> None:
    with smollm2({"re": 1.0}).serve() as server:
        plan = make(server, ACTION).prepare_run([ACTION.labels])
        with pytest.raises(ConfigurationError, match="start a new run"):
            make(server, ACTION, readout="sample").use_plan(plan)


def test_unreachable_server_is_an_error_not_a_missing_tokenizer() -> None:
    with RecordingServer() as server:
        url = server.url("/v1")
    settings = OpenAISettings.model_validate({"url": url, "max_retries": 0})
    backend = OpenAIBackend("default", None, settings, SENTIMENT)
    with pytest.raises(ConfigurationError, match="cannot reach the server"):
        backend.prepare_run([SENTIMENT.labels])
    with RecordingServer(script=[Reply(503)]) as server:
        backend = make(server, SENTIMENT, max_retries=0)
        with pytest.raises(ConfigurationError, match=r"cannot reach the server.*HTTP 503"):
            backend.prepare_run([SENTIMENT.labels])


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
    with RecordingServer(script=[Reply(404), Reply(404), Reply(200, body)]) as server, \
            pytest.raises(InvalidResponse):
        decide(make(server))


# -- option codes --------------------------------------------------------------------------------


def test_letters_read_exact_codes_and_map_back() -> None:
    tokens = {"B": 0.3, " A": 0.1, "a": 0.2, "billing": 0.2, "C": 0.1}
    shown = ("shipping", "billing", "technical")
    for fake in (smollm2(tokens), FakeOpenAI(tokens)):  # with a tokenizer, and without
        with fake.serve() as server:
            prediction = decide(make(server, options_as="letters"), labels=shown)
        body = calls(server)[0].json()
        assert body["messages"][0]["content"] == SYSTEM_MESSAGES["letters"]
        assert "A) shipping\nB) billing\nC) technical" in body["messages"][1]["content"]
        # A → shipping, B → billing, C → technical; "a" and "billing" are not codes
        assert prediction.probabilities == pytest.approx(
            {"shipping": 0.2, "billing": 0.6, "technical": 0.2})


def test_shown_lettered_labels_under_the_character_rule() -> None:
    tokens = {"B": 0.5, "A": 0.2, "billing": 0.3}
    with FakeOpenAI(tokens).serve() as server:
        prediction = decide(make(server), labels=("A) shipping", "B) billing", "C) technical"))
    assert prediction.probabilities == pytest.approx(
        {"A) shipping": 0.2 / 0.7, "B) billing": 0.5 / 0.7, "C) technical": 0.0})


# -- completions API -----------------------------------------------------------------------------


def test_completions_logprobs_request() -> None:
    with smollm2({" positive": 0.4, " neutral": 0.1, "\n": 0.5}).serve() as server:
        prediction = decide(make(server, SENTIMENT, api="completions"), text="Great food.")
    (request,) = calls(server)
    body = request.json()
    assert request.path == "/v1/completions" and "messages" not in body
    assert (body["max_tokens"], body["logprobs"]) == (1, 20)
    assert body["prompt"].endswith("positive\nnegative\nneutral\n\n"
                                   "Answer with one option, exactly as written.\nAnswer:")
    assert "Great food." in body["prompt"]
    assert prediction.probabilities == pytest.approx(
        {"positive": 0.8, "negative": 0.0, "neutral": 0.2})


def test_an_answer_ending_at_once_is_asked_again_for_one_token() -> None:
    for api in ("chat", "completions"):
        with smollm2({" positive": 0.3, "neutral": 0.1}, ends_at_once=True).serve() as server:
            prediction = decide(make(server, SENTIMENT, api=api))
        first, again = calls(server)
        assert "min_tokens" not in first.json() and again.json()["min_tokens"] == 1
        assert prediction.probabilities == pytest.approx(
            {"positive": 0.75, "negative": 0.0, "neutral": 0.25})


# -- sequence readout ----------------------------------------------------------------------------

ANSWERS = {" refund": [(" ref", -1.0), ("und", -0.1)], " replace": [(" replace", -2.0)],
           " reject": [(" re", -1.5), ("ject", -0.2)]}


def test_sequence_scores_whole_labels_and_normalises() -> None:
    fake = FakeOpenAI({"The": 0.5, " I": 0.2}, answers=ANSWERS)
    with fake.serve() as server:
        backend = make(server, ACTION, api="completions", readout="sequence")
        prediction = decide(backend)
    check, echo_check, *scoring = calls(server)
    assert check.json()["logprobs"] == 5 and "echo" not in check.json()
    assert echo_check.json()["prompt"].endswith("Answer:The")
    sent = [r.json()["prompt"] for r in scoring]
    assert [s.rsplit("Answer:", 1)[1] for s in sent] == [" refund", " replace", " reject"]
    for request in scoring:
        body = request.json()
        assert (body["echo"], body["logprobs"], body["max_tokens"]) == (True, 1, 1)
    logprobs = {"refund": -1.1, "replace": -2.0, "reject": -1.7}
    mass = math.fsum(math.exp(v) for v in logprobs.values())
    assert prediction.probabilities == pytest.approx(
        {label: math.exp(v) / mass for label, v in logprobs.items()})
    assert prediction.metadata == {"label_mass": pytest.approx(mass)}
    assert backend.details()["echo_check"] == {
        "token": "The", "top_logprob": pytest.approx(math.log(0.5)),
        "echo_logprob": pytest.approx(math.log(0.5))}


def test_sequence_after_a_prompt_ending_in_a_newline_adds_no_space() -> None:
    answers = {"\nrefund": [("\n", -0.5), ("ref", -1.0), ("und", -0.1)],
               "\nreplace": [("\n", -0.5), ("replace", -0.3)],
               "\nreject": [("\n", -0.5), ("re", -0.4), ("ject", -0.2)]}
    prompt = "<|im_start|>user\n{input}\n{options}<|im_end|>\n<|im_start|>assistant\n"
    with FakeOpenAI({"The": 1.0}, answers=answers).serve() as server:
        prediction = decide(make(server, ACTION, api="completions", readout="sequence",
                                 prompt=prompt))
    assert [r.json()["prompt"].rsplit("assistant\n", 1)[1] for r in calls(server)[2:]] == [
        "refund", "replace", "reject"]
    logprobs = {"refund": -1.1, "replace": -0.3, "reject": -0.6}
    mass = math.fsum(math.exp(v) for v in logprobs.values())
    assert prediction.probabilities == pytest.approx(
        {label: math.exp(v) / mass for label, v in logprobs.items()})


def test_sequence_with_letters_scores_codes() -> None:
    answers = {" A": [(" A", -0.5)], " B": [(" B", -1.0)], " C": [(" C", -3.0)]}
    with FakeOpenAI({"The": 1.0}, answers=answers).serve() as server:
        prediction = decide(make(server, ACTION, api="completions", readout="sequence",
                                 options_as="letters"), labels=("reject", "refund", "replace"))
    assert "A) reject\nB) refund\nC) replace" in calls(server)[2].json()["prompt"]
    mass = math.exp(-0.5) + math.exp(-1.0) + math.exp(-3.0)
    assert prediction.probabilities == pytest.approx(
        {"reject": math.exp(-0.5) / mass, "refund": math.exp(-1.0) / mass,
         "replace": math.exp(-3.0) / mass})


def test_misaligned_echo_stops_before_scoring() -> None:
    fake = FakeOpenAI({"The": 0.5}, answers=ANSWERS, misaligned_echo=True)
    with fake.serve() as server:
        backend = make(server, ACTION, api="completions", readout="sequence")
        with pytest.raises(ConfigurationError) as caught:
            backend.prepare_run([ACTION.labels])
    assert "not aligned" in str(caught.value) and "readout: logprobs" in str(caught.value)
    assert not any(r.json()["prompt"].endswith("refund") for r in calls(server))


def test_sequence_without_echo_is_invalid_response() -> None:
    class NoEcho(FakeOpenAI):
        def _echo(self, prompt: str) -> dict:
            return {"index": 0, "text": "\n", "finish_reason": "length",
                    "logprobs": {"tokens": ["\n"], "token_logprobs": [-0.1]}}

    with NoEcho({"The": 0.5}).serve() as server, pytest.raises(
        ConfigurationError, match="could not check"
    ):
        decide(make(server, ACTION, api="completions", readout="sequence"))


# -- sample readout ------------------------------------------------------------------------------


def test_sample_readout() -> None:
    answers = ["billing", "Shipping.", "I think billing", "no idea", None]
    with FakeOpenAI(completions=answers).serve() as server:
        backend = make(server, readout="sample", samples=5, temperature=0.7)
        prediction = decide(backend)
    assert len(server.requests) == 5  # no tokenizer probe for samples
    for request in server.requests:
        body = request.json()
        assert body["temperature"] == 0.7
        assert "logprobs" not in body and "seed" not in body and "n" not in body
    assert prediction.probabilities == pytest.approx(
        {"billing": 2 / 3, "shipping": 1 / 3, "technical": 0.0})
    assert prediction.metadata == {"samples": 5, "parsed": 3, "unparseable": 2}
    assert prediction.model_version == SERVED_MODEL


def test_sample_completions_with_letters() -> None:
    answers = [" B) billing", " a", " A good one", " C.", "(b)"]
    with FakeOpenAI(completions=answers).serve() as server:
        prediction = decide(make(server, api="completions", readout="sample", samples=5,
                                 options_as="letters"))
    body = server.requests[0].json()
    assert body["stop"] == ["\n"] and body["prompt"].endswith("letter of one option.\nAnswer:")
    # B; "a" alone is A; a capital A standing alone counts (so "A good one" is A); C; B
    assert prediction.probabilities == pytest.approx(
        {"billing": 2 / 5, "shipping": 2 / 5, "technical": 1 / 5})


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


@pytest.mark.parametrize(
    ("text", "code"),
    [("A", "A"), ("a", "A"), (" (b) ", "B"), ("B) replace", "B"), ("The answer is C.", "C"),
     ("a refund", None), ("A or B", None), ("Bravo", None), ("", None)],
)
def test_parse_code(text: str, code: str | None) -> None:
    assert parse_code(text, ("A", "B", "C")) == code


# -- prompt, auth, retries, health ---------------------------------------------------------------


def test_custom_prompt_and_object_input() -> None:
    prompt = "Q: {description}\nTicket: {input}\nPick one of:\n{options}\n{{literal}}"
    with FakeOpenAI({"bill": 1.0}).serve() as server:
        decide(make(server, prompt=prompt), text={"subject": "{options} here"})
    assert calls(server)[0].json()["messages"][1]["content"] == (
        "Q: Which team should handle this ticket?\n"
        'Ticket: {"subject": "{options} here"}\n'
        "Pick one of:\nbilling\nshipping\ntechnical\n{literal}"
    )


def test_api_key_is_sent_as_bearer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DF_OPENAI_KEY", "sk-test-123")
    with smollm2({"positive": 1.0}).serve() as server:
        allow_credentials(monkeypatch, server.url())
        decide(make(server, SENTIMENT, api_key_env="DF_OPENAI_KEY"))
        health = run(make(server, api_key_env="DF_OPENAI_KEY"), lambda b: b.healthcheck())
    assert all(r.headers["Authorization"] == "Bearer sk-test-123" for r in server.requests)
    assert server.requests[-1].path == "/v1/models"
    assert health.status == "ok"
    monkeypatch.delenv("DF_OPENAI_KEY")
    with FakeOpenAI({"bill": 1.0}).serve() as server, pytest.raises(
        ConfigurationError,
        match="openai backend 'default': environment variable DF_OPENAI_KEY is not set",
    ):
        allow_credentials(monkeypatch, server.url())
        decide(make(server, api_key_env="DF_OPENAI_KEY"))


def test_5xx_and_429_are_retried() -> None:
    fake = FakeOpenAI({"bill": 1.0})
    probes = [Reply(404), Reply(404)]
    with RecordingServer(fake, script=[*probes, Reply(500), Reply(429)]) as server:
        prediction = decide(make(server, max_retries=2))
    assert len(calls(server)) == 3
    assert prediction.probabilities["billing"] == 1.0
    with RecordingServer(script=[*probes, Reply(429), Reply(429)]) as server, pytest.raises(
        BackendUnavailable, match="HTTP 429"
    ):
        decide(make(server, max_retries=1))


def test_healthcheck_and_details() -> None:
    with FakeOpenAI({"bill": 1.0}).serve() as server:
        backend = make(server)
        assert run(backend, lambda b: b.healthcheck()).status == "ok"
        decide(backend)
        details = backend.details()
        assert {k: details[k] for k in ("url", "protocol", "api", "readout", "options_as",
                                        "served_models", "rule")} == {
            "url": server.url("/v1"), "protocol": "openai.chat.completions", "api": "chat",
            "readout": "logprobs", "options_as": "labels", "served_models": [SERVED_MODEL],
            "rule": "characters",
        }
        broken = make(server, health_url=server.url("/v1/nothing"))
        assert run(broken, lambda b: b.healthcheck()).status == "unhealthy"
        assert make(server, readout="sample").details()["protocol"] == "openai.chat.completions"
        assert make(server, api="completions").details()["protocol"] == "openai.completions"
