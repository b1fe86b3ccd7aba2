"""The planted model of `tests.support.planted` behind an HTTP/1.1 server on 127.0.0.1."""

from __future__ import annotations

from tests.support.planted import planted_answer
from tests.support.servers.recording import Recorded, RecordingServer, Reply


class PlantedServer(RecordingServer):
    """Answers the decflow HTTP protocol with `planted_answer` (keyed by the request id, so
    any order of calls gets the same answers); keeps no record of the requests."""

    def __init__(self) -> None:
        super().__init__(self.answer)

    def answer(self, request: Recorded) -> Reply:
        body = request.json()
        labels = body["decision"]["labels"]
        return Reply(body={"probabilities": planted_answer(body["case_id"], body["input"],
                                                            labels)})

    def _reply_for(self, request: Recorded) -> Reply:
        return self.handler(request)
