"""The server's own tokenizer, asked over HTTP, for the first-token (`logprobs`) readout.

OpenAI-compatible servers expose their tokenizer at the server's root, not under the API
base URL (`…/v1`):

- llama-cpp-python: `POST /extras/tokenize` `{"input": text}` → `{"tokens": [ids]}`;
  `POST /extras/detokenize` `{"tokens": ids}` → `{"text": …}`;
- llama.cpp's server: `POST /tokenize` `{"content": text}` → `{"tokens": [ids]}`;
  `POST /detokenize` → `{"content": …}`;
- vLLM: `POST /tokenize` `{"prompt": text}` → `{"tokens": [ids], …}`;
  `POST /detokenize` → `{"prompt": …}`.

One request body carries the text under all three names, so one code path speaks to each.
Endpoints return token ids and may prepend special tokens (Gemma's BOS): the ids that the
empty string tokenizes to are that prefix, and are removed. The first piece of a text is
the detokenized text of its first remaining id, which is how `top_logprobs` name tokens.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from decflow.backends.base import BackendError, InvalidResponse
from decflow.backends.httpclient import HttpCaller, json_object, public_url

TOKENIZE_PATHS = ("/extras/tokenize", "/tokenize")


def tokenize_candidates(url: str, tokenize_url: str | None) -> list[str]:
    """Where to look: `tokenize_url` alone when set, else the known paths at url's origin."""
    if tokenize_url:
        return [tokenize_url]
    parts = urlsplit(url)
    return [urlunsplit((parts.scheme, parts.netloc, path, "", "")) for path in TOKENIZE_PATHS]


def detokenize_url(tokenize_url: str) -> str:
    """The detokenize endpoint beside a tokenize endpoint (`…/tokenize` → `…/detokenize`)."""
    parts = urlsplit(tokenize_url)
    head, _, tail = parts.path.rpartition("tokenize")
    return urlunsplit((parts.scheme, parts.netloc, f"{head}detokenize{tail}", parts.query, ""))


def _ids(body: dict[str, Any]) -> list[int]:
    tokens = body.get("tokens")
    if not isinstance(tokens, list):
        raise InvalidResponse("tokenize response has no 'tokens' list")
    ids = []
    for token in tokens:
        value = token.get("id") if isinstance(token, dict) else token
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidResponse("tokenize response 'tokens' are not token ids")
        ids.append(value)
    return ids


def _text(body: dict[str, Any]) -> str:
    for key in ("text", "content", "prompt"):
        if isinstance(body.get(key), str):
            return str(body[key])
    raise InvalidResponse("detokenize response has no 'text', 'content' or 'prompt' string")


class Tokenizer:
    """A tokenize endpoint that answered, with the special-token prefix it adds."""

    def __init__(
        self, caller: HttpCaller, endpoint: str, model: str | None, prefix: list[int]
    ) -> None:
        self.caller = caller
        self.endpoint = endpoint
        self.model = model
        self.prefix = prefix
        self._pieces: dict[int, str] = {}
        self._first: dict[str, str | None] = {}

    def _body(self, **fields: Any) -> dict[str, Any]:
        return {**fields, **({"model": self.model} if self.model else {})}

    async def ids(self, text: str) -> list[int]:
        """Token ids of `text`, the special-token prefix removed."""
        body = self._body(input=text, content=text, prompt=text)
        ids = _ids(json_object(await self.caller.post_json(self.endpoint, body)))
        return ids[len(self.prefix):] if ids[: len(self.prefix)] == self.prefix else ids

    async def piece(self, token: int) -> str:
        if token not in self._pieces:
            response = await self.caller.post_json(
                detokenize_url(self.endpoint), self._body(tokens=[token])
            )
            self._pieces[token] = _text(json_object(response))
        return self._pieces[token]

    async def first_piece(self, text: str) -> str | None:
        """The text of the first token of `text`, or None when it makes no token."""
        if text not in self._first:
            ids = await self.ids(text)
            piece = await self.piece(ids[0]) if ids else None
            indent = text[: len(text) - len(text.lstrip())]
            if piece and indent and not piece[0].isspace() and text[len(indent):].startswith(piece):
                # SentencePiece decoders drop a sequence's leading space; the token carries it,
                # and top_logprobs show it
                piece = indent + piece
            self._first[text] = piece
        return self._first[text]

    def describe(self) -> dict[str, Any]:
        return {"endpoint": public_url(self.endpoint), "special_prefix": self.prefix}


async def find_tokenizer(
    caller: HttpCaller, candidates: list[str], model: str | None
) -> tuple[Tokenizer | None, dict[str, str]]:
    """The first candidate that tokenizes and detokenizes, and why each earlier one did not
    (public URL → reason). Transport failures, 429 and 5xx are raised: a server that cannot
    answer now says nothing about whether it has a tokenizer."""
    tried: dict[str, str] = {}
    for endpoint in candidates:
        probe = Tokenizer(caller, endpoint, model, [])
        try:
            prefix = await probe.ids("")
            tokenizer = Tokenizer(caller, endpoint, model, prefix)
            ids = await tokenizer.ids("yes")
            if not ids:
                raise InvalidResponse("tokenize made no token of 'yes'")
            await tokenizer.piece(ids[0])
        except BackendError as exc:
            unavailable = exc.status is None and not isinstance(exc, InvalidResponse)
            if unavailable or exc.status == 429 or (exc.status or 0) >= 500:
                raise
            tried[public_url(endpoint)] = str(exc)
            continue
        return tokenizer, tried
    return None, tried
