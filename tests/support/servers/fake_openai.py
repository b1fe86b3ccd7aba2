"""A fake OpenAI-compatible chat completions server (llama.cpp's response shapes).

`POST /v1/chat/completions` answers a logprobs request (`logprobs: true`) with the
configured first-token candidates, and any other request with the next configured
completion text (cycling). `GET /v1/models` lists one model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tests.support.servers.recording import Recorded, RecordingServer, Reply

SERVED_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"


class FakeOpenAI:
    def __init__(
        self,
        first_tokens: dict[str, float] | None = None,
        completions: Sequence[str | None] = ("yes",),
    ) -> None:
        self.first_tokens = first_tokens or {}  # token -> probability
        self.completions = list(completions)
        self._next = 0

    def __call__(self, request: Recorded) -> Reply:
        if request.method == "GET" and request.path == "/v1/models":
            return Reply(200, {"object": "list", "data": [{"id": SERVED_MODEL}]})
        if request.path != "/v1/chat/completions":
            return Reply(404, {"error": "not found"})
        body = request.json()
        if body.get("logprobs"):
            top = [
                {"token": token, "logprob": math.log(p), "bytes": list(token.encode())}
                for token, p in self.first_tokens.items()
            ]
            first = top[0]["token"] if top else ""
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": first},
                "logprobs": {"content": [{**(top[0] if top else {}), "top_logprobs": top}]},
                "finish_reason": "length",
            }
        else:
            text = self.completions[self._next % len(self.completions)]
            self._next += 1
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "stop",
            }
        return Reply(200, {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0,
            "model": SERVED_MODEL, "choices": [choice],
            "usage": {"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51},
        })

    def serve(self) -> RecordingServer:
        return RecordingServer(self)
