"""Label likelihoods with the prompt evaluated once: the `sequence` readout's `prefix` scoring.

The `echo` scoring asks for every label's whole text back with a log probability per
prompt token; llama-cpp-python then sorts the whole vocabulary in Python once per prompt
token, for every label (seconds per decision). Here each label token is scored by itself:

1. the prompt and each `prompt + label` are tokenized by the server's own tokenizer; the
   label's tokens are what follows the prompt's (a label whose tokens do not extend the
   prompt's — the two merge at the boundary — is scored by echo instead);
2. for each label token t_j, one completion of `prompt + t_1..t_{j-1}` with `max_tokens: 1`,
   temperature 0 and `logit_bias {t_j: +100}`, so the server generates exactly t_j and
   reports log P(t_j | prompt, t_<j) from its logits (biases act in the sampler, not on the
   reported values: checked when the run is planned); `cache_prompt` asks llama.cpp's own
   server to keep the prompt, which llama-cpp-python does by itself (its longest-prefix
   reuse), so only the label's tokens are evaluated after the first request;
3. log P(label | prompt) is the sum over its tokens; labels sharing leading tokens share
   those requests, and the candidates the server names beside a scored token (the top 20,
   by text) give the other labels' tokens at that place without a request of their own.

Exactness: the same tokens and positions as `echo`; the values differ only by how the
server split the prompt into evaluation batches. llama.cpp's CPU kernels round differently
with the number of tokens evaluated together, so a value depends on how much of the prompt
the server's cache held: the `echo` readout itself moves as much with its cache warm as
this one does (llama-cpp-python 0.3.36; Gemma 3 270M Q4_K_M up to 0.28 nats a token, SmolLM2
Q4_1 none, but 0.033 for a token evaluated on its own, as a multi-token label's later tokens
are here). That measured spread is the readout's stated tolerance (`PREFIX_TOLERANCE`,
bench/README.md). A candidate is matched by its text, as servers name them: a vocabulary
holding two tokens of that text could lend a label the other's value. With several
decisions in flight the server's one slot may evaluate a prompt again (slower, not less
exact).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from decflow.backends.base import BackendError, InvalidResponse
from decflow.backends.llm_readouts import path, top_candidates
from decflow.backends.tokenizer import Tokenizer

# How far a label token's log probability may lie from a fresh evaluation (nats): the
# largest cached-vs-fresh difference measured of the `echo` readout itself (the prompt
# cache warm from a prompt sharing the decision's first words vs emptied, 20 decisions × 3
# labels, plus every cut of 2 decisions: Gemma 3 270M Q4_K_M 0.281, SmolLM2-135M Q4_1 0;
# llama-cpp-python 0.3.36, bench/prefix_spread.py, bench/README.md). Scored by prefix the
# same decisions moved up to 0.253 (0.281 over every cut). The plan's check (one token,
# prefix vs echo) refuses a server beyond it: it catches a server whose forced completion
# reports another quantity, not the rounding of every prompt.
PREFIX_TOLERANCE = 0.29
FORCE = 100.0  # the OpenAI maximum logit bias
CANDIDATES = 20  # candidates named with each scored token (the OpenAI chat maximum)

Post = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def _logprob(body: dict[str, Any]) -> tuple[str, float]:
    """(text, log probability) of the one generated token."""
    logprobs = path(body, "choices", 0, "logprobs")
    tokens, values = path(logprobs, "tokens"), path(logprobs, "token_logprobs")
    if not (isinstance(tokens, list) and isinstance(values, list) and tokens and values
            and isinstance(tokens[0], str) and isinstance(values[0], int | float)
            and not isinstance(values[0], bool)):
        raise InvalidResponse("the scoring response has no generated token with a logprob")
    return tokens[0], float(values[0])


class PrefixScorer:
    """Scores label continuations after one prompt (see the module docstring)."""

    def __init__(self, post: Post, tokenizer: Tokenizer) -> None:
        self.post, self.tokenizer = post, tokenizer

    async def label_tokens(self, prompt: str, continuations: Mapping[str, str]
                           ) -> tuple[list[int], dict[str, list[int]]]:
        """(the prompt's tokens, each label's tokens after them); a label whose tokens do
        not extend the prompt's is left out (it is scored by echo)."""
        prompt_ids = await self.tokenizer.ids(prompt)
        found = {}
        for name, text in continuations.items():
            ids = await self.tokenizer.ids(prompt + text)
            if ids[:len(prompt_ids)] == prompt_ids and len(ids) > len(prompt_ids):
                found[name] = ids[len(prompt_ids):]
        return prompt_ids, found

    async def _prefix_text(self, prompt: str, prompt_ids: list[int], text: str,
                           ids: Sequence[int]) -> str | None:
        """The text `prompt + text[:k]` the server tokenizes as the prompt's tokens then
        `ids` (a label's first tokens), or None when no cut of the label does."""
        pieces = "".join([await self.tokenizer.piece(t) for t in ids])
        # SentencePiece detokenizers drop a leading space the token carries
        for cut in dict.fromkeys((len(pieces), len(pieces) + 1)):
            candidate = prompt + text[:cut]
            if await self.tokenizer.ids(candidate) == [*prompt_ids, *ids]:
                return candidate
        return None

    async def _scored(self, text: str, token: int) -> tuple[float, dict[str, float]]:
        """log P(token | text), and the candidates the server names beside it (by text)."""
        body = await self.post({"prompt": text, "max_tokens": 1, "temperature": 0.0,
                                "logprobs": CANDIDATES, "logit_bias": {str(token): FORCE},
                                "cache_prompt": True})
        generated, value = _logprob(body)
        expected = await self.tokenizer.piece(token)
        if generated != expected and generated.strip() != expected.strip():
            raise InvalidResponse(
                f"the server generated {generated!r} where decflow forced the label token "
                f"{expected!r} (logit_bias): it cannot score labels by prefix")
        try:
            named = dict(top_candidates(body, "completions"))
        except InvalidResponse:
            named = {}
        return value, named

    async def score(self, prompt: str, continuations: Mapping[str, str]
                    ) -> dict[str, float]:
        """log P(continuation | prompt) of each label this method can score (the others
        are missing: score them by echo)."""
        prompt_ids, tokens = await self.label_tokens(prompt, continuations)
        after: dict[tuple[int, ...], set[int]] = {}  # the tokens needed after each head
        for ids in tokens.values():
            for j, token in enumerate(ids):
                after.setdefault(tuple(ids[:j]), set()).add(token)
        texts: dict[tuple[int, ...], str | None] = {(): prompt}
        values: dict[tuple[int, ...], float] = {}
        scored: dict[str, float] = {}
        for name, ids in tokens.items():
            total = 0.0
            for j, token in enumerate(ids):
                head = tuple(ids[:j])
                if head not in texts:
                    texts[head] = await self._prefix_text(prompt, prompt_ids,
                                                          continuations[name], head)
                text = texts[head]
                if text is None:
                    break
                if (*head, token) not in values:
                    values[(*head, token)], named = await self._scored(text, token)
                    for other in after[head]:  # the same logits: no request of their own
                        piece = await self.tokenizer.piece(other)
                        if (*head, other) not in values and piece in named:
                            values[(*head, other)] = named[piece]
                total += values[(*head, token)]
            else:
                scored[name] = total
        return scored


async def choose_scoring(scorer: PrefixScorer | None, prompt: str,
                         echo_check: Mapping[str, Any]) -> dict[str, Any]:
    """The run's scoring method, decided before its first call: `prefix` when the server
    scores the echo check's token after the prompt (with the prompt's evaluation reused)
    within `PREFIX_TOLERANCE` of its echoed value, else `echo`, saying why."""
    exact = ("log P(label | prompt) from the server's logits for each label token; the "
             "prompt's evaluation reused (prefix cache), so values may differ from a fresh "
             f"evaluation by up to {PREFIX_TOLERANCE:g} nats per token, as the echo "
             "readout's own do with the server's cache warm (measured: bench/README.md)")
    if scorer is None:
        return {"method": "echo", "why": "the server has no tokenize endpoint decflow knows",
                "exactness": "exact: every label's tokens echoed with the prompt"}
    token, echoed = str(echo_check["token"]), float(echo_check["echo_logprob"])
    try:
        found = await scorer.score(prompt, {"probe": token})
    except BackendError as exc:
        found, why = {}, f"scoring by prefix failed: {exc}"
    else:
        why = "the probe token's tokens merge with the prompt's end"
    if "probe" in found:
        difference = abs(found["probe"] - echoed)
        checked = {"token": token, "echo_logprob": echoed, "prefix_logprob": found["probe"],
                   "difference": difference}
        if difference <= PREFIX_TOLERANCE:
            return {"method": "prefix", "tolerance": PREFIX_TOLERANCE, "exactness": exact,
                    "tokenizer": scorer.tokenizer.describe(), "check": checked}
        why = (f"the server scored {token!r} {found['probe']:.6f} after the cached prompt "
               f"but {echoed:.6f} echoed, more than {PREFIX_TOLERANCE:g} apart")
    return {"method": "echo", "why": why,
            "exactness": "exact: every label's tokens echoed with the prompt"}
