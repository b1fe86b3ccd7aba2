"""What a server says about the model behind a backend, for the call cache's keys.

A cached answer may only be served while the same model answers: the key holds the
configured model name and what the server reports about the model it serves. OpenAI-style
servers list their models at `GET <url>/models`; what they report differs:

- llama-cpp-python: the model's alias, or the path of its file, and nothing else;
- llama.cpp's own server: the alias or path, plus `meta` (vocabulary, parameters, size in
  bytes) and, at `GET /props`, `build_info` (the llama.cpp build) and `model_path`;
- vLLM: the served name and `root` (the model's repository or path), `max_model_len`;
- some servers report a weights digest or a revision (`digest`, `sha256`, `revision`).

Everything stable that the server reports enters the key (never the listing time
`created`, which llama.cpp sets to the time of the request). The identity counts as
*verified* only when it includes a digest or revision of the weights: a name, a path or a
size stays the same when another file of the same shape is served under it, so the report
then says the identity is unverified.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Fields of a `/models` entry that describe the served weights (stable across requests).
DESCRIBING = ("id", "root", "parent", "meta", "max_model_len")
# Fields that pin the weights themselves.
PINNING = ("digest", "sha256", "revision")
# Fields of llama.cpp's `/props` that name the build and the file.
PROPS = ("build_info", "model_path")
MAX_TEXT = 500  # a stranger's server may send anything: identities stay small


@dataclass(frozen=True)
class ModelIdentity:
    """What the server reported (JSON-able), whether it pins the weights, and a note for
    the report saying what it rests on."""

    reported: dict[str, Any] = field(default_factory=dict)
    verified: bool = False
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"reported": self.reported, "verified": self.verified, "note": self.note}


def _small(value: Any) -> Any:
    """A reported value, kept only when small and plain (numbers, short texts, flat
    objects of them)."""
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, Mapping):
        return {str(k)[:100]: _small(v) for k, v in list(value.items())[:50]
                if isinstance(v, bool | int | float | str) or v is None}
    return None


def _entry(body: Any, configured: str | None) -> tuple[dict[str, Any] | None, str]:
    """The `/models` entry of the configured model (the only one listed, when the server
    serves one), or None and why."""
    data = body.get("data") if isinstance(body, Mapping) else None
    entries = [e for e in data if isinstance(e, Mapping)] if isinstance(data, list) else []
    if not entries:
        return None, "its model list is empty or not an OpenAI model list"
    named = [e for e in entries if e.get("id") == configured]
    if named:
        return dict(named[0]), ""
    if len(entries) == 1:
        return dict(entries[0]), ""
    listed = sorted(str(e.get("id"))[:100] for e in entries)
    return None, f"it lists {len(entries)} models and none is named {configured!r} ({listed})"


def served_identity(models: Any, configured: str | None,
                    props: Any = None) -> ModelIdentity:
    """The identity a `/models` answer (and llama.cpp's `/props`, when asked) reports for
    the configured model."""
    entry, why = _entry(models, configured)
    if entry is None:
        return ModelIdentity({}, False, f"the server reports no identity for the model: {why}")
    reported = {name: _small(entry[name]) for name in (*DESCRIBING, *PINNING)
                if entry.get(name) not in (None, "", {})}
    if isinstance(props, Mapping):
        reported.update({name: _small(props[name]) for name in PROPS
                         if isinstance(props.get(name), str) and props[name]})
    pinned = [name for name in PINNING if isinstance(reported.get(name), str)]
    if pinned:
        shown = ", ".join(f"{name} {reported[name]}" for name in pinned)
        return ModelIdentity(reported, True, f"the server pins the weights ({shown})")
    described = ", ".join(sorted(reported)) or "nothing"
    return ModelIdentity(
        reported, False,
        f"unverified: the server reports the model's {described} but no digest or revision "
        "of its weights, so another model served under the same name would not be told apart",
    )


def unreported(provider: str) -> ModelIdentity:
    """A backend whose protocol has no way to ask which model answers."""
    return ModelIdentity({}, False, f"unverified: the {provider} backend cannot ask the "
                         "service which model answers; the configured name is all the key holds")


def is_llama_cpp(models: Any) -> bool:
    """Whether a `/models` answer comes from llama.cpp's own server (which also has
    `/props`, naming its build)."""
    data = models.get("data") if isinstance(models, Mapping) else None
    return isinstance(data, list) and any(
        isinstance(e, Mapping) and (e.get("owned_by") == "llamacpp" or "meta" in e)
        for e in data)
