"""A fake OpenAI-compatible server (llama.cpp's and llama-cpp-python's response shapes).

- `POST /v1/chat/completions`: a logprobs request (`logprobs: true`) gets the configured
  first-token candidates; any other request the next configured completion text (cycling).
- `POST /v1/completions`: `logprobs: K` without echo gets the candidates as a
  `{token: logprob}` object; `echo: true` gets the echoed prompt tokens with log
  probabilities: the prompt as one token (no log probability, as for a first token), then
  the tokens of whichever configured `answers` entry the prompt ends with (or of a
  configured first token), then the generated token `"\\n"`. With `ends_at_once`, a
  logprobs request without `min_tokens` ends at once (no token, no candidates), as servers
  answer when end of text is the most likely first token. With `misaligned_echo` the
  echo behaves like llama-cpp-python 0.3.x for a model without BOS: each value belongs to
  the next token, and the generated token is missing from the list.
- Tokenizer endpoints, in the style of `tokenizer` (`"llama-cpp-python"`:
  `/extras/tokenize` + `/extras/detokenize`; `"llama.cpp"`: `/tokenize` + `/detokenize`;
  None: none): a toy tokenizer that takes the longest `vocab` entry at each position
  (unknown characters become one-character tokens) and, with `bos`, prepends BOS id 2.
- A completions request with `logit_bias` (no echo) generates the one biased token, with
  the log probability an echo gives that token where the prompt ends (after the tokens of
  an `answers` entry before it, or as a configured first token), plus `cached_shift`: how
  far a server's cached-prefix evaluation moves it from the echoed (fresh) value; the
  other tokens known there are named as candidates (`top_logprobs`).
- `GET /v1/models` lists one model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tests.support.servers.recording import Recorded, RecordingServer, Reply

SERVED_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
BOS = 2
PROMPT_LOGPROB = -7.0
GENERATED = ("\n", -0.25)


class ToyTokenizer:
    def __init__(self, vocab: Sequence[str], bos: bool) -> None:
        self.vocab = sorted(set(vocab), key=len, reverse=True)
        self.ids = {token: 10 + i for i, token in enumerate(sorted(set(vocab)))}
        self.bos = bos

    def tokenize(self, text: str) -> list[int]:
        ids = [BOS] if self.bos else []
        position = 0
        while position < len(text):
            token = next((t for t in self.vocab if text.startswith(t, position)), None)
            if token is None:
                ids.append(100_000 + ord(text[position]))
                position += 1
            else:
                ids.append(self.ids[token])
                position += len(token)
        return ids

    def detokenize(self, ids: Sequence[int]) -> str:
        by_id = {i: token for token, i in self.ids.items()}
        return "".join(
            "" if i == BOS else by_id[i] if i in by_id else chr(i - 100_000) for i in ids
        )


class FakeOpenAI:
    def __init__(
        self,
        first_tokens: dict[str, float] | None = None,
        completions: Sequence[str | None] = ("yes",),
        *,
        answers: dict[str, list[tuple[str, float]]] | None = None,
        tokenizer: str | None = None,
        vocab: Sequence[str] = (),
        bos: bool = False,
        misaligned_echo: bool = False,
        ends_at_once: bool = False,
        cached_shift: float = 0.0,
    ) -> None:
        self.first_tokens = first_tokens or {}  # token -> probability
        self.completions = list(completions)
        self.answers = answers or {}  # answer text -> [(token, logprob), ...]
        self.tokenizer_style = tokenizer
        self.tokenizer = ToyTokenizer(vocab, bos)
        self.misaligned_echo = misaligned_echo
        self.ends_at_once = ends_at_once
        self.cached_shift = cached_shift
        self._next = 0

    def _next_completion(self) -> str | None:
        text = self.completions[self._next % len(self.completions)]
        self._next += 1
        return text

    def _top(self) -> dict[str, float]:
        return {token: math.log(p) for token, p in self.first_tokens.items()}

    def _tokenizer_reply(self, request: Recorded) -> Reply | None:
        routes = {"llama-cpp-python": ("/extras/tokenize", "/extras/detokenize", "input", "text"),
                  "llama.cpp": ("/tokenize", "/detokenize", "content", "content")}
        if self.tokenizer_style not in routes:
            return None
        tokenize, detokenize, text_key, out_key = routes[self.tokenizer_style]
        if request.path == tokenize:
            return Reply(200, {"tokens": self.tokenizer.tokenize(request.json()[text_key])})
        if request.path == detokenize:
            return Reply(200, {out_key: self.tokenizer.detokenize(request.json()["tokens"])})
        return None

    def __call__(self, request: Recorded) -> Reply:
        if request.method == "GET" and request.path == "/v1/models":
            return Reply(200, {"object": "list", "data": [{"id": SERVED_MODEL}]})
        tokenizer = self._tokenizer_reply(request)
        if tokenizer is not None:
            return tokenizer
        if request.path == "/v1/chat/completions":
            return self._reply(self._chat_choice(request.json()))
        if request.path == "/v1/completions":
            return self._reply(self._completion_choice(request.json()))
        return Reply(404, {"error": "not found"})

    def _reply(self, choice: dict) -> Reply:
        return Reply(200, {
            "id": "cmpl-1", "object": "chat.completion", "created": 0,
            "model": SERVED_MODEL, "choices": [choice],
            "usage": {"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51},
        })

    def _chat_choice(self, body: dict) -> dict:
        if body.get("logprobs") and self.ends_at_once and not body.get("min_tokens"):
            return {"index": 0, "message": {"role": "assistant", "content": ""},
                    "logprobs": {"content": []}, "finish_reason": "stop"}
        if body.get("logprobs"):
            top = [
                {"token": token, "logprob": logprob, "bytes": list(token.encode())}
                for token, logprob in self._top().items()
            ]
            first = top[0]["token"] if top else ""
            return {
                "index": 0,
                "message": {"role": "assistant", "content": first},
                "logprobs": {"content": [{**(top[0] if top else {}), "top_logprobs": top}]},
                "finish_reason": "length",
            }
        return {"index": 0, "message": {"role": "assistant", "content": self._next_completion()},
                "logprobs": None, "finish_reason": "stop"}

    def _completion_choice(self, body: dict) -> dict:
        prompt = body["prompt"]
        if body.get("echo"):
            return self._echo(prompt)
        if body.get("logit_bias"):
            return self._forced(prompt, int(next(iter(body["logit_bias"]))))
        if body.get("logprobs") is not None and self.ends_at_once and not body.get("min_tokens"):
            return {"index": 0, "text": "", "finish_reason": "stop",
                    "logprobs": {"tokens": [], "token_logprobs": [], "top_logprobs": [],
                                 "text_offset": []}}
        if body.get("logprobs") is not None:
            top = self._top()
            first = next(iter(top), "")
            return {"index": 0, "text": first, "finish_reason": "length",
                    "logprobs": {"tokens": [first], "token_logprobs": [top.get(first)],
                                 "top_logprobs": [top], "text_offset": [len(prompt)]}}
        return {"index": 0, "text": self._next_completion(), "logprobs": None,
                "finish_reason": "stop"}

    def _echo(self, prompt: str) -> dict:
        ends = [a for a in self.answers if prompt.endswith(a)]
        if ends:
            answer = max(ends, key=len)
            tail = self.answers[answer]
        else:
            answer = next((t for t in self.first_tokens if t and prompt.endswith(t)), "")
            tail = [(answer, math.log(self.first_tokens[answer]))] if answer else []
        entries = [(prompt[: len(prompt) - len(answer)], None), *tail, GENERATED]
        tokens = [token for token, _ in entries]
        values: list[float | None] = [value for _, value in entries]
        if self.misaligned_echo:
            values = [None, *[v - 1.5 if v is not None else None for v in values[2:]]]
            tokens = tokens[:-1]
        return {"index": 0, "text": prompt + GENERATED[0], "finish_reason": "length",
                "logprobs": {"tokens": tokens, "token_logprobs": values,
                             "top_logprobs": [None] * len(tokens),
                             "text_offset": [0] * len(tokens)}}

    def _candidates(self, prompt: str) -> dict[str, float]:
        """The tokens the fake knows a log probability for where `prompt` ends: after an
        answer's first tokens, else an answer's first token or a configured first token."""
        inside = {piece: logprob for tokens in self.answers.values()
                  for j, (piece, logprob) in enumerate(tokens)
                  if j and prompt.endswith("".join(t for t, _ in tokens[:j]))}
        if inside:
            return inside
        return {**{t: math.log(p) for t, p in self.first_tokens.items()},
                **{tokens[0][0]: tokens[0][1] for tokens in self.answers.values() if tokens}}

    def _forced(self, prompt: str, token: int) -> dict:
        """The biased token, scored where the prompt ends, named with the candidates."""
        text = self.tokenizer.detokenize([token])
        named = {t: v + self.cached_shift for t, v in self._candidates(prompt).items()}
        value = named.setdefault(text, PROMPT_LOGPROB + self.cached_shift)
        return {"index": 0, "text": text, "finish_reason": "length",
                "logprobs": {"tokens": [text], "token_logprobs": [value],
                             "top_logprobs": [named], "text_offset": [len(prompt)]}}

    def serve(self) -> RecordingServer:
        return RecordingServer(self)
