"""The `sequence` readout's prefix scoring against the fake OpenAI-compatible server on
127.0.0.1: chosen at planning time when the server scores a forced token after the cached
prompt within the stated tolerance of its echo (else every label is echoed, and the plan
says why); each label token scored once by a one-token completion with the token forced
by `logit_bias` (labels sharing leading tokens share those requests), the same values as
the echo readout; a label whose tokens merge with the prompt's end is echoed."""

from __future__ import annotations

import math
from typing import Any

import pytest

from decflow.backends.base import DecisionSpec
from decflow.backends.label_scoring import PREFIX_TOLERANCE
from tests.integration.test_backend_openai import ACTION, ANSWERS, calls, make
from tests.support.backends import decide
from tests.support.servers.fake_openai import FakeOpenAI

VOCAB = ["The", " I", " ref", "und", " replace", " re", "ject"]
CHAT = "<|im_start|>user\n{input}\n{options}<|im_end|>\n<|im_start|>assistant\n"
CAPITAL = DecisionSpec("action", "choice", ("Replace", "Reject", "Refund"), "What to do?")
SHARED = {"Replace": [("Re", -0.7), ("place", -0.3)], "Reject": [("Re", -0.7), ("ject", -1.2)],
          "Refund": [("Ref", -2.0), ("und", -0.1)]}


def fake(answers: dict[str, list[tuple[str, float]]], vocab: list[str], **options: Any
         ) -> FakeOpenAI:
    return FakeOpenAI({"The": 0.5, " I": 0.2}, answers=answers, tokenizer="llama-cpp-python",
                      vocab=vocab, **options)


def forced(server: Any) -> list[dict[str, Any]]:
    return [r.json() for r in calls(server) if "logit_bias" in r.json()]


def expected(logprobs: dict[str, float]) -> dict[str, Any]:
    mass = math.fsum(math.exp(v) for v in logprobs.values())
    return {label: pytest.approx(math.exp(v) / mass) for label, v in logprobs.items()}


def test_labels_are_scored_token_by_token_after_the_cached_prompt() -> None:
    with fake(ANSWERS, VOCAB).serve() as server:
        backend = make(server, ACTION, api="completions", readout="sequence")
        backend.prepare_run([ACTION.labels])
        planned = len(calls(server))
        prediction = decide(backend)
    scoring = backend.details()["scoring"]
    assert scoring["method"] == "prefix" and scoring["tolerance"] == PREFIX_TOLERANCE
    assert "nats per token" in scoring["exactness"]
    assert scoring["check"]["difference"] == pytest.approx(0.0)
    sent = calls(server)[planned:]
    assert not any(r.json().get("echo") for r in sent)  # no label echoed
    bodies = forced(server)[1:]  # after the planning check's
    # refund = " ref"+"und", replace = " replace", reject = " re"+"ject": the first tokens
    # are named beside the one scored, then one request after " ref" and after " re"
    for body in bodies:
        assert (body["max_tokens"], body["temperature"], body["cache_prompt"]) == (1, 0.0, True)
        assert list(body["logit_bias"].values()) == [100.0] and body["logprobs"] == 20
    assert sorted(b["prompt"].rsplit("Answer:", 1)[1] for b in bodies) == ["", " re", " ref"]
    # the echo readout's values (test_backend_openai: -1.1, -2.0, -1.7)
    assert prediction.probabilities == expected(
        {"refund": -1.1, "replace": -2.0, "reject": -1.7})


def test_labels_sharing_leading_tokens_share_their_requests() -> None:
    vocab = ["The", "Re", "place", "ject", "Ref", "und"]
    with fake(SHARED, vocab).serve() as server:
        backend = make(server, CAPITAL, api="completions", readout="sequence", prompt=CHAT)
        prediction = decide(backend)
    heads = [b["prompt"].rsplit("assistant\n", 1)[1] for b in forced(server)[1:]]
    # "Re" scored once for Replace and Reject, "Ref" named beside it; "place" and "ject"
    # share one request after "Re"
    assert sorted(heads) == ["", "Re", "Ref"]
    assert prediction.probabilities == expected(
        {"Replace": -1.0, "Reject": -1.9, "Refund": -2.1})


def test_a_server_whose_cached_prompt_moves_logprobs_too_far_is_echoed() -> None:
    shift = 2 * PREFIX_TOLERANCE
    with fake(ANSWERS, VOCAB, cached_shift=shift).serve() as server:
        backend = make(server, ACTION, api="completions", readout="sequence")
        prediction = decide(backend)
    scoring = backend.details()["scoring"]
    assert scoring["method"] == "echo" and f"more than {PREFIX_TOLERANCE:g} apart" in \
        scoring["why"]
    assert len(forced(server)) == 1  # the planning check alone
    assert sum(bool(r.json().get("echo")) for r in calls(server)) == 1 + 3
    assert prediction.probabilities == expected(
        {"refund": -1.1, "replace": -2.0, "reject": -1.7})


def test_a_label_merging_with_the_prompts_end_is_echoed() -> None:
    with fake(ANSWERS, [*VOCAB, ": rej"]).serve() as server:
        backend = make(server, ACTION, api="completions", readout="sequence")
        backend.prepare_run([ACTION.labels])
        planned = len(calls(server))
        prediction = decide(backend)
    echoed = [r.json()["prompt"] for r in calls(server)[planned:] if r.json().get("echo")]
    assert [p.rsplit("Answer:", 1)[1] for p in echoed] == [" reject"]
    assert prediction.probabilities == expected(
        {"refund": -1.1, "replace": -2.0, "reject": -1.7})
