"""Paraphrase providers: identity, file, openai (any OpenAI-compatible chat API), plugins.

A provider is built once per run (`build_paraphraser`, which fixes the run seed) and asked
per case. Failures of a
provider for one case raise `ParaphraseFailed` with the typed error kind recorded for that
case; configuration problems (unreadable file, missing credential, unknown plugin) raise
`ConfigurationError` and stop the run with exit 2. Plugins run in a worker process
(`PluginParaphraser`), never in decflow's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from decflow import interrupts
from decflow.backends.base import BackendError, BackendTimeout, BackendUnavailable
from decflow.backends.httpclient import HttpCaller, json_object
from decflow.contracts.credentials import is_allowed, refusal
from decflow.contracts.paths import contract_file
from decflow.errors import ConfigurationError
from decflow.properties.base import setting
from decflow.redaction import redact, redact_text
from decflow.strictjson import JsonProblem, dotted, loads
from decflow.workers.process import CallFailed, WorkerFailed, shared_worker
from decflow.workers.settings import call_timeout

ENTRY_POINT_GROUP = "decflow.paraphrasers"
HOST = "decflow.properties.paraphrase_host"
SOURCE = "properties.paraphrase.source"

DEFAULT_INSTRUCTIONS = (
    "Rewrite the user's text in {n} different ways. Keep the meaning, every fact and the "
    "language; change only the wording. Reply with a JSON array of {n} strings and nothing "
    "else."
)


class ParaphraseFailed(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Paraphraser(ABC):
    """Base class of providers; plugins subclass it and register under `decflow.paraphrasers`.

    A plugin class is constructed with the provider settings as a dict, the contract's
    directory and the run seed: `cls(settings, base_dir=..., seed=...)`.
    """

    provider: str = ""

    @abstractmethod
    def paraphrase(self, text: str, *, n: int, case_id: str) -> list[str]:
        """Up to n paraphrases of text (an empty list means none for this case)."""

    def provenance(self) -> dict[str, Any]:
        """Where the paraphrases come from, stored per case in the report."""
        return {"provider": self.provider}

    def close(self) -> None:  # noqa: B027 - most providers hold nothing to release
        """Release clients (called once when the run has generated every case)."""


class IdentityParaphraser(Paraphraser):
    """Re-asks the same text once: a determinism (rerun) check, not a paraphrase."""

    provider = "identity"

    def paraphrase(self, text: str, *, n: int, case_id: str) -> list[str]:
        return [text]


class FileParaphraser(Paraphraser):
    """Curated paraphrases from JSONL rows `{"id"|"input": ..., "paraphrases": [...]}`."""

    provider = "file"

    def __init__(self, path: str, base_dir: Path, *, allowed: Sequence[str] = (),
                 contract: str = "the contract") -> None:
        self.path = path
        full = contract_file(base_dir, path, field="properties.paraphrase.source.path",
                             source=contract, allowed=allowed)
        try:
            raw = full.read_bytes()
        except OSError as exc:
            raise ConfigurationError(
                f"{full}: cannot read paraphrase file ({exc.strerror or exc})"
            ) from exc
        self.digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        self.by_id: dict[str, list[str]] = {}
        self.by_input: dict[str, list[str]] = {}
        self._load(full, raw)

    def _load(self, full: Path, raw: bytes) -> None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigurationError(f"{full}: paraphrase file is not UTF-8") from exc
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{full}:{number}"
            try:
                row = loads(line)
            except JsonProblem as exc:
                at = f"{dotted(exc.path)}: " if exc.path else ""
                raise ConfigurationError(
                    f"{where}: invalid JSON at column {exc.column}: {at}{exc.reason}"
                ) from None
            if not isinstance(row, dict):
                raise ConfigurationError(f"{where}: a row must be a JSON object")
            texts = row.get("paraphrases")
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise ConfigurationError(f"{where}: 'paraphrases' must be a list of strings")
            if isinstance(row.get("id"), str):
                self.by_id[row["id"]] = texts
            elif isinstance(row.get("input"), str):
                self.by_input[row["input"]] = texts
            else:
                raise ConfigurationError(f"{where}: a row needs a string 'id' or 'input'")

    def paraphrase(self, text: str, *, n: int, case_id: str) -> list[str]:
        found = self.by_id.get(case_id)
        if found is None:
            found = self.by_input.get(text, [])
        return found[:n]

    def provenance(self) -> dict[str, Any]:
        return {"provider": self.provider, "path": self.path, "sha256": self.digest}


def redact_url(url: str) -> str:
    """The URL without userinfo, query or fragment (never store credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class OpenAIParaphraser(Paraphraser):
    """Paraphrases from an OpenAI-compatible chat-completions API (seeded, recorded).

    Requests go through the remote backends' own client (`backends.httpclient`): one
    deadline of `timeout_s` for the whole exchange (a server trickling bytes cannot hold a
    case longer), answers capped at 64 MB and never compressed, keep-alive on one event
    loop for the run. Answers are read by the strict JSON parser (`decflow.strictjson`);
    whatever is wrong with one is that case's `paraphrase_error`, never the run's end."""

    provider = "openai"

    def __init__(self, source: Any, *, seed: int) -> None:
        self.seed = seed
        self.model = setting(source, "model")
        if not self.model:
            raise ConfigurationError("properties.paraphrase.source.model: required for openai")
        self.url = str(setting(source, "url") or "https://api.openai.com/v1").rstrip("/")
        self.temperature = float(setting(source, "temperature", 0.0) or 0.0)
        self.instructions = setting(source, "instructions") or DEFAULT_INSTRUCTIONS
        key_env = setting(source, "api_key_env", "OPENAI_API_KEY")
        if key_env is not None:
            if not is_allowed(key_env, self.url):
                raise ConfigurationError(refusal(key_env, self.url, SOURCE))
            if not os.environ.get(key_env):
                raise ConfigurationError(
                    f"{SOURCE}.api_key_env: environment variable {key_env} is not set"
                )
        self.caller = HttpCaller(
            provider=self.provider, backend_name="paraphrase", owner=SOURCE,
            timeout_s=float(setting(source, "timeout_s", 60) or 60), max_retries=0,
            retry_backoff_s=0.0, bearer_token_env=key_env,
        )
        self.caller.headers()  # the key is read (and registered for redaction) now
        self.loop = asyncio.new_event_loop()

    def paraphrase(self, text: str, *, n: int, case_id: str) -> list[str]:
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": self.instructions.replace("{n}", str(n))},
                {"role": "user", "content": text},
            ],
            "temperature": self.temperature,
            "seed": self.seed,
        }
        request = self.caller.post_json(f"{self.url}/chat/completions", body)
        try:
            answer = json_object(interrupts.run_until_complete(self.loop, request))
        except (BackendTimeout, BackendUnavailable) as exc:
            raise ParaphraseFailed(exc.kind, f"paraphraser {exc}") from None
        except BackendError as exc:  # a status, a broken or oversized answer
            raise ParaphraseFailed("paraphrase_error", f"paraphraser {exc}") from None
        self.last_response = redact(_response_identity(answer))
        return [redact_text(text) for text in _parse_paraphrases(answer)[:n]]

    def provenance(self) -> dict[str, Any]:
        found = {
            "provider": self.provider,
            "model": self.model,
            "url": redact_url(self.url),
            "temperature": self.temperature,
        }
        found.update(getattr(self, "last_response", {}))
        return found

    def close(self) -> None:
        if not self.loop.is_closed():
            try:
                interrupts.run_until_complete(self.loop, self.caller.aclose())
            finally:
                self.loop.close()


def _response_identity(answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "response_model": answer.get("model"),
        "system_fingerprint": answer.get("system_fingerprint"),
    }


def _parse_paraphrases(answer: dict[str, Any]) -> list[str]:
    def bad(reason: str) -> ParaphraseFailed:
        return ParaphraseFailed("paraphrase_error", f"paraphraser answer {reason}")

    try:
        content = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise bad("has no choices[0].message.content") from exc
    if not isinstance(content, str):
        raise bad("content is not text")
    stripped = content.strip()
    if stripped.startswith("```"):
        # Models often fence JSON in a code block despite the instructions.
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        texts = loads(stripped)
    except JsonProblem as exc:
        raise bad(f"is not a JSON array ({exc})") from None
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise bad("is not a JSON array of strings")
    return [t for t in texts if t.strip()]


def build_paraphraser(source: Any, *, base_dir: Path, seed: int, allowed: Sequence[str] = (),
                      contract: str = "the contract") -> Paraphraser:
    """Build the provider named by `properties.paraphrase.source` (once per run); a file
    it names lies in the contract's folder `base_dir` or an `allowed` one."""
    provider = setting(source, "provider", "identity") if source is not None else "identity"
    if provider == "identity":
        return IdentityParaphraser()
    if provider == "file":
        path = setting(source, "path")
        if not isinstance(path, str) or not path:
            raise ConfigurationError("properties.paraphrase.source.path: required for file")
        return FileParaphraser(path, base_dir, allowed=allowed, contract=contract)
    if provider == "openai":
        return OpenAIParaphraser(source, seed=seed)
    settings = source if isinstance(source, dict) else _as_dict(source)
    return PluginParaphraser(str(provider), settings, base_dir=base_dir, seed=seed)


class PluginParaphraser(Paraphraser):
    """A paraphraser plugin in its worker process (`decflow.properties.paraphrase_host`):
    a `sys.exit`, a crash or a hang in it is that case's `paraphrase_error` (`timeout`
    after `DECFLOW_CALL_TIMEOUT` seconds), never the end of the run; a plugin that cannot
    be loaded or built stops it (exit 2)."""

    def __init__(self, provider: str, settings: dict[str, Any], *, base_dir: Path,
                 seed: int, timeout: float | None = None) -> None:
        self.provider = provider
        self.timeout = call_timeout(timeout)
        self.worker = shared_worker(HOST, provider, f"paraphraser plugin '{provider}'")
        self.instance = uuid.uuid4().hex
        init = {"instance": self.instance, "provider": provider, "settings": settings,
                "base_dir": str(base_dir), "seed": seed}
        try:
            self.worker.setup(self.instance, "init", init, self.timeout)
        except (CallFailed, WorkerFailed) as exc:
            raise ConfigurationError(
                f"properties.paraphrase.source: paraphraser plugin '{provider}' could not "
                f"be built: {exc}") from None

    def _call(self, op: str, **args: Any) -> Any:
        try:
            return self.worker.request(op, {"instance": self.instance, **args}, self.timeout)
        except CallFailed as exc:
            message = str(exc.failure.get("message"))
            if exc.failure.get("decflow"):
                raise ConfigurationError(message) from None
            kind = str(exc.failure.get("kind"))
            raise ParaphraseFailed(kind if kind in ("timeout", "unavailable") else
                                   "paraphrase_error", message) from None
        except WorkerFailed as exc:
            raise ParaphraseFailed("timeout" if exc.kind == "timeout" else "paraphrase_error",
                                   str(exc)) from None

    def paraphrase(self, text: str, *, n: int, case_id: str) -> list[str]:
        texts = self._call("paraphrase", text=text, n=n, case_id=case_id)
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ParaphraseFailed("paraphrase_error",
                                   f"paraphraser plugin '{self.provider}' did not answer a "
                                   "list of texts")
        return [redact_text(t) for t in texts]

    def provenance(self) -> dict[str, Any]:
        try:
            found = self._call("provenance")
        except ParaphraseFailed:
            found = None
        return redact(found) if isinstance(found, dict) else {"provider": self.provider}

    def close(self) -> None:
        self.worker.forget(self.instance)
        if self.worker.running():
            with contextlib.suppress(ParaphraseFailed, ConfigurationError):
                self._call("close")


def _as_dict(source: Any) -> dict[str, Any]:
    dump = getattr(source, "model_dump", None)
    return dict(dump()) if callable(dump) else dict(vars(source))
