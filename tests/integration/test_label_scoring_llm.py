"""The `sequence` readout's prefix scoring against llama-cpp-python's server with
SmolLM2-135M-Instruct on 127.0.0.1: planned when the server's forced token after the cached
prompt lies within `PREFIX_TOLERANCE` of its echo, each label's value then within that
tolerance of a fresh evaluation (the server's cache emptied, prompt and label echoed in one
batch); a tolerance below what this server moves the check token falls back to `echo`."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx
import pytest

from decflow.backends import label_scoring
from decflow.backends.base import DecisionRequest, DecisionSpec
from decflow.backends.llm_prompts import continuation
from decflow.backends.llm_readouts import answer_logprob
from decflow.backends.openai import OpenAIBackend
from decflow.contracts.providers import OpenAISettings
from tests.support.llm_server import LlamaServer

pytestmark = pytest.mark.llm

SENTIMENT = DecisionSpec("review_sentiment", "choice", ("positive", "negative", "neutral"),
                         "What is the sentiment of this review?")
CHATML = (
    "<|im_start|>system\nAnswer with one of the options, exactly as written.<|im_end|>\n"
    "<|im_start|>user\n{description}\nReview: {input}\nOptions:\n{options}<|im_end|>\n"
    "<|im_start|>assistant\n"
)
REVIEWS = ("The food was wonderful and the staff were very kind.",
           "Cold soup, rude waiter, and we waited an hour. Never again.")


def empty_cache(server: LlamaServer) -> None:
    """An unrelated prompt: the next one is evaluated from its first token."""
    httpx.post(f"{server.url}/completions", json={"prompt": "#", "max_tokens": 1}, timeout=120)


def planned(server: LlamaServer) -> OpenAIBackend:
    """A `sequence` backend planned after an emptied cache: the plan's check evaluates the
    probe prompt in one batch, echoes the check token after it, then scores the token by
    prefix, which makes the server evaluate the prompt's last token again on its own."""
    empty_cache(server)
    settings = OpenAISettings.model_validate({"url": server.url, "api": "completions",
                                              "readout": "sequence", "prompt": CHATML})
    backend = OpenAIBackend("llm", "smollm2-135m", settings, SENTIMENT)
    backend.prepare_run([SENTIMENT.labels])
    return backend


def fresh(server: LlamaServer, prompt: str) -> dict[str, float]:
    """log P(label | prompt) echoed with the server's cache emptied before each label (an
    unrelated prompt first), so prompt and label are evaluated in one batch."""
    found = {}
    with httpx.Client(base_url=server.url, timeout=120) as client:
        for label in SENTIMENT.labels:
            empty_cache(server)
            text = continuation(prompt, label)
            body = client.post("/completions", json={
                "prompt": prompt + text, "max_tokens": 1, "temperature": 0.0, "logprobs": 1,
                "echo": True}).json()
            found[label] = answer_logprob(body, prompt + text, text)
    return found


def by_prefix(backend: OpenAIBackend, requests: list[DecisionRequest]) -> list[Any]:
    async def decide_all() -> list[Any]:
        try:
            return [await backend.predict(request) for request in requests]
        finally:
            await backend.aclose()

    return asyncio.run(decide_all())


def test_labels_scored_by_prefix_lie_within_the_stated_tolerance_of_a_fresh_echo(
        llm_server: LlamaServer) -> None:
    backend = planned(llm_server)
    scoring = backend.details()["scoring"]
    assert scoring["method"] == "prefix" and scoring["tolerance"] == \
        label_scoring.PREFIX_TOLERANCE
    # the last prompt token evaluated alone moves the check token (0.033 nats here)
    assert 0 < scoring["check"]["difference"] <= label_scoring.PREFIX_TOLERANCE
    requests = [DecisionRequest(f"r{i}", SENTIMENT, text) for i, text in enumerate(REVIEWS)]
    for request, prediction in zip(requests, by_prefix(backend, requests), strict=True):
        mass = (prediction.metadata or {})["label_mass"]
        reference = fresh(llm_server, backend.prompt_text(request))
        for label, share in prediction.probabilities.items():
            assert abs(math.log(share * mass) - reference[label]) <= \
                label_scoring.PREFIX_TOLERANCE, (request.id, label)


def test_a_server_moving_the_check_token_beyond_the_tolerance_is_scored_by_echo(
        llm_server: LlamaServer, monkeypatch: pytest.MonkeyPatch) -> None:
    moved = planned(llm_server).details()["scoring"]["check"]["difference"]
    monkeypatch.setattr(label_scoring, "PREFIX_TOLERANCE", moved / 2)
    backend = planned(llm_server)
    scoring = backend.details()["scoring"]
    assert scoring["method"] == "echo"
    assert f"more than {moved / 2:g} apart" in scoring["why"]
    assert scoring["exactness"].startswith("exact")
    [prediction] = by_prefix(backend, [DecisionRequest("r0", SENTIMENT, REVIEWS[0])])
    mass = (prediction.metadata or {})["label_mass"]
    reference = fresh(llm_server, backend.prompt_text(DecisionRequest("r0", SENTIMENT,
                                                                        REVIEWS[0])))
    assert {k: math.log(v * mass) for k, v in prediction.probabilities.items()} == \
        pytest.approx(reference, abs=1e-9)
