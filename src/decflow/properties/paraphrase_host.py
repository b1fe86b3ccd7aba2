"""The worker process that hosts paraphraser plugins (`python -P -s -m
decflow.properties.paraphrase_host`, started by
`decflow.properties.paraphrasers.PluginParaphraser`).

A plugin is loaded here by its entry-point name (group `decflow.paraphrasers`) and built
as `cls(settings, base_dir=..., seed=...)`; each call's texts travel back as JSON. A
failure of one call is that case's `paraphrase_error` (or the kind a `ParaphraseFailed`
names); a `DecflowError` stops the run.
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from decflow.errors import ConfigurationError, DecflowError
from decflow.properties.paraphrasers import ENTRY_POINT_GROUP, ParaphraseFailed, Paraphraser
from decflow.workers.serve import exception_text, serve


def build_plugin(provider: str, settings: dict[str, Any], base_dir: str, seed: int) -> (
    Paraphraser
):
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name == provider:
            try:
                cls = point.load()
            except BaseException as exc:  # a sys.exit while importing too: its worker
                raise ConfigurationError(
                    f"paraphraser plugin '{provider}' ({point.value}) failed to import: "
                    f"{exception_text(exc)}"
                ) from None
            if not (isinstance(cls, type) and issubclass(cls, Paraphraser)):
                raise ConfigurationError(
                    f"paraphraser plugin '{provider}' is not a decflow Paraphraser subclass"
                )
            built: Paraphraser = cls(settings, base_dir=Path(base_dir), seed=seed)  # type: ignore[call-arg]
            return built
    raise ConfigurationError(
        f"properties.paraphrase.source.provider: unknown provider '{provider}' (built in: "
        f"identity, file, openai; plugins register under '{ENTRY_POINT_GROUP}')"
    )


class ParaphraseHost:
    """The `serve` handler: paraphraser instances by id, and the calls on them."""

    def __init__(self) -> None:
        self.instances: dict[str, Paraphraser] = {}

    def failure(self, exc: BaseException) -> dict[str, Any]:
        if isinstance(exc, DecflowError):
            return {"decflow": True, "message": str(exc)}
        if isinstance(exc, ParaphraseFailed):
            return {"kind": exc.kind, "message": exc.message}
        return {"kind": "paraphrase_error", "message": exception_text(exc)}

    def handle(self, op: str, args: dict[str, Any]) -> Any:
        if op == "init":
            self.instances[args["instance"]] = build_plugin(
                args["provider"], args["settings"], args["base_dir"], int(args["seed"]))
            return None
        instance = self.instances[args["instance"]]
        if op == "paraphrase":
            return instance.paraphrase(args["text"], n=int(args["n"]), case_id=args["case_id"])
        if op == "provenance":
            return instance.provenance()
        if op == "close":
            self.instances.pop(args["instance"])
            return instance.close()
        raise ValueError(f"unknown call {op!r}")


if __name__ == "__main__":
    serve(ParaphraseHost(), sys.argv[1:])
