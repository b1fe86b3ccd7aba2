"""The backend provider registry (`mock`, `http`, `systemone`, `openai`) and backend parsing.

A backend entry is `provider`, optional `model`, and provider settings. A registered
provider's settings are validated here, at load time, against the contract's labels;
plugin providers (entry points in `decflow.backends`) validate their own settings when
they are built. The registry closes when the first backend entry is parsed.
"""

# No `from __future__ import annotations` here: pydantic would compile and evaluate every
# field's annotation string again for each model (and each subclass) it collects.

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from decflow.contracts.base import (
    EnvName,
    NonEmptyStr,
    StrictModel,
    Text,
    Unit,
    check_name,
    empty_list,
    placeholders,
)
from decflow.contracts.credentials import (
    check_header_name,
    check_header_value,
    check_static_header,
    check_url,
    origin,
)
from decflow.contracts.plugins import entry_point_names
from decflow.contracts.problems import describe, problems_from
from decflow.registry import Registry

BACKEND_GROUP = "decflow.backends"
# `python` is the library-only CallableBackend: contracts never name Python code.
LIBRARY_ONLY_PROVIDER = "python"
OPENAI_PROMPT_FIELDS = ("description", "input", "options")
MAX_OPTION_CODES = 26  # options_as: letters codes options A-Z


@dataclass(frozen=True, slots=True)
class DecisionContext:
    """What provider settings are checked against (passed as pydantic validation context)."""

    type: str
    labels: tuple[str, ...]
    description: str | None
    probability_tolerance: float


@dataclass(frozen=True, slots=True)
class BackendConfig:
    """One backend entry: `settings` is the validated model (built-ins) or the plain settings
    dict (plugins); `raw` is the entry exactly as written, which is what the hash covers."""

    provider: str
    model: str | None
    settings: Any
    raw: dict[str, Any]
    name: str = "default"
    price_per_call: float | None = None  # decflow: the money-saved line of sequential runs


Credential = tuple[str, str, tuple[str | None, ...]]  # field, variable, URLs it goes to


class ProviderSettings(StrictModel):
    """The settings of a registered provider."""

    def credentials(self) -> list[Credential]:
        """Each environment variable these settings read a credential from: (field, variable,
        the URLs it may be sent to); `decflow validate` lists them, redaction hides them."""
        return []


def _context(info: ValidationInfo) -> DecisionContext | None:
    ctx = info.context
    return ctx if isinstance(ctx, DecisionContext) else None


Distribution = dict[str, Annotated[float, Field(ge=0.0)]]


def check_distribution(value: dict[str, float], info: ValidationInfo) -> dict[str, float]:
    ctx = _context(info)
    if ctx is None:
        return value
    missing = [label for label in ctx.labels if label not in value]
    unknown = sorted(set(value) - set(ctx.labels))
    if missing or unknown:
        parts = [
            f"missing labels {missing}" if missing else "",
            f"unknown labels {unknown}" if unknown else "",
        ]
        raise ValueError(
            f"{'; '.join(p for p in parts if p)}; the contract labels are {list(ctx.labels)}"
        )
    total = math.fsum(value.values())
    if abs(total - 1.0) > ctx.probability_tolerance:
        raise ValueError(
            f"probabilities sum to {total:.6g}, outside 1 ± {ctx.probability_tolerance:g}"
        )
    return value


class MockRule(StrictModel):
    contains: NonEmptyStr
    probabilities: Distribution

    @field_validator("probabilities")
    @classmethod
    def _labels(cls, value: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        return check_distribution(value, info)


class MockSettings(ProviderSettings):
    rules: list[MockRule] = Field(default_factory=empty_list)
    default: Distribution | None = None
    seed: int = 0
    model_version: NonEmptyStr | None = None
    position_bias: Unit = 0.0

    @field_validator("default")
    @classmethod
    def _default_labels(cls, value: dict[str, float] | None, info: ValidationInfo) -> Any:
        return None if value is None else check_distribution(value, info)


HeaderName = Annotated[str, AfterValidator(check_header_name)]
StaticHeaderName = Annotated[str, AfterValidator(check_static_header)]
HeaderValue = Annotated[str, AfterValidator(check_header_value)]
Url = Annotated[str, AfterValidator(check_url)]


def _same_origin(
    url: str, other: str | None, credentials: bool, field: str = "health_url"
) -> None:
    if credentials and other is not None and origin(other) != origin(url):
        raise ValueError(
            f"{field} must use the backend URL's origin (scheme, host and port) when "
            "credentials come from the environment"
        )


class HttpSettings(ProviderSettings):
    url: Url
    health_url: Url | None = None
    timeout_s: float = Field(default=30.0, gt=0.0, le=600.0)
    max_retries: int = Field(default=0, ge=0, le=5)
    retry_backoff_s: float = Field(default=0.5, ge=0.0, le=60.0)
    headers: dict[StaticHeaderName, HeaderValue] = Field(default_factory=dict)
    headers_from_env: dict[HeaderName, EnvName] = Field(default_factory=dict)
    bearer_token_env: EnvName | None = None
    label_map: dict[Text, Text] = Field(default_factory=dict)

    @field_validator("label_map")
    @classmethod
    def _label_map_targets(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        ctx = _context(info)
        if ctx is None or not value:
            return value
        foreign = sorted(set(value.values()) - set(ctx.labels))
        if foreign:
            raise ValueError(f"label_map targets {foreign} are not contract labels")
        shared = sorted(t for t, n in Counter(value.values()).items() if n > 1)
        if shared:
            raise ValueError(f"label_map maps two backend labels to each of {shared}")
        return value

    @model_validator(mode="after")
    def _credentials(self) -> Self:
        env_headers = {h.lower() for h in self.headers_from_env}
        if self.bearer_token_env is not None and "authorization" in env_headers:
            raise ValueError("set either bearer_token_env or an Authorization header, not both")
        from_env = self.bearer_token_env is not None or bool(self.headers_from_env)
        _same_origin(self.url, self.health_url, from_env)
        return self

    def credentials(self) -> list[Credential]:
        urls: tuple[str | None, ...] = (self.url, self.health_url)
        found: list[Credential] = (
            [("bearer_token_env", self.bearer_token_env, urls)] if self.bearer_token_env else [])
        return found + [(f"headers_from_env.{header}", variable, urls)
                        for header, variable in self.headers_from_env.items()]


class SystemOneSettings(HttpSettings):
    instructions: NonEmptyStr | None = None

    @field_validator("label_map")
    @classmethod
    def _no_noul_map(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        ctx = _context(info)
        if value and ctx is not None and ctx.type == "noul":
            raise ValueError("label_map does not apply to noul decisions")
        return value


def _prompt(value: str) -> str:
    unknown = sorted(set(placeholders(value)) - set(OPENAI_PROMPT_FIELDS))
    if unknown:
        allowed = ", ".join(f"{{{f}}}" for f in OPENAI_PROMPT_FIELDS)
        raise ValueError(f"unknown placeholders {unknown}; the prompt may use {allowed}")
    return value


class OpenAISettings(ProviderSettings):
    url: Url = "http://127.0.0.1:8765/v1"
    api_key_env: EnvName | None = None
    api: Literal["chat", "completions"] = "chat"
    readout: Literal["logprobs", "sequence", "sample"] = "logprobs"
    options_as: Literal["labels", "letters"] = "labels"
    tokenize_url: Url | None = None
    samples: int = Field(default=8, ge=1, le=100)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    prompt: Annotated[str, AfterValidator(_prompt)] | None = None
    timeout_s: float = Field(default=60.0, gt=0.0, le=600.0)
    max_retries: int = Field(default=2, ge=0, le=5)
    health_url: Url | None = None
    max_tokens: int | None = Field(default=None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _default_health_url(cls, data: Any) -> Any:
        # The OpenAI API lists models at <url>/models; that is the natural health probe.
        if isinstance(data, dict) and "health_url" not in data:
            url = data.get("url", cls.model_fields["url"].default)
            if isinstance(url, str):
                return {**data, "health_url": url.rstrip("/") + "/models"}
        return data

    @field_validator("readout")
    @classmethod
    def _sequence_needs_completions(cls, value: str, info: ValidationInfo) -> str:
        if value == "sequence" and info.data.get("api", "chat") != "completions":
            raise ValueError(
                "readout 'sequence' needs api: completions (prompt log probabilities come "
                "only from the completions endpoint; for a chat model, write its chat markup "
                "into prompt)"
            )
        return value

    @field_validator("options_as")
    @classmethod
    def _letters_for_few_labels(cls, value: str, info: ValidationInfo) -> str:
        ctx = _context(info)
        if value == "letters" and ctx is not None and len(ctx.labels) > MAX_OPTION_CODES:
            raise ValueError(
                f"options_as 'letters' codes at most {MAX_OPTION_CODES} options (A-Z); the "
                f"decision has {len(ctx.labels)} labels"
            )
        return value

    @model_validator(mode="after")
    def _credentials(self) -> Self:
        credentials = self.api_key_env is not None
        _same_origin(self.url, self.health_url, credentials)
        _same_origin(self.url, self.tokenize_url, credentials, "tokenize_url")
        return self

    def credentials(self) -> list[Credential]:
        if self.api_key_env is None:
            return []
        return [("api_key_env", self.api_key_env, (self.url, self.health_url, self.tokenize_url))]


EntryProblems = Callable[[dict[str, Any], str, str, DecisionContext | None], list[str]]


@dataclass(frozen=True)
class ProviderEntry:
    """A backend provider as a contract names it (`provider:`): its settings model, the model
    it runs when the contract names none, and its backend as `module:attribute` of a
    `decflow.backends.base.Backend` class built as `cls(name, model, settings, decision)`,
    imported only when a backend is built (a mock run never loads the HTTP client). `core`:
    DecGuard 0.1 has it; any other is a decflow extension (`decflow_extensions`). `problems`:
    checks of the entry beyond its settings, given (entry, backend name, path, decision)."""

    name: str
    settings: type[ProviderSettings]
    backend: str
    default_model: str | None = None
    core: bool = False
    problems: EntryProblems | None = None


def _systemone_problems(
    raw: dict[str, Any], name: str, path: str, ctx: DecisionContext | None
) -> list[str]:
    problems = []
    if raw.get("model") is None:
        problems.append(f"{path}.model: systemone backend {name!r}: 'model' is required")
    if ctx is not None and raw.get("instructions") is None and not ctx.description:
        problems.append(
            f"{path}: systemone backend {name!r}: set decision.description or 'instructions' "
            "(the question asked)"
        )
    return problems


BACKEND_PROVIDERS: Registry[ProviderEntry] = Registry("backend provider",
                                                      lambda entry: entry.name)
for _entry in (
    ProviderEntry("mock", MockSettings, "decflow.backends.mock:MockBackend",
                  default_model="mock", core=True),
    ProviderEntry("http", HttpSettings, "decflow.backends.http:HttpBackend", core=True),
    ProviderEntry("systemone", SystemOneSettings, "decflow.backends.systemone:SystemOneBackend",
                  core=True, problems=_systemone_problems),
    ProviderEntry("openai", OpenAISettings, "decflow.backends.openai:OpenAIBackend",
                  default_model="smollm2-135m"),
):
    BACKEND_PROVIDERS.register(_entry)


def extension_providers() -> tuple[str, ...]:
    """The registered providers DecGuard 0.1 does not have."""
    return tuple(entry.name for entry in BACKEND_PROVIDERS.entries() if not entry.core)


def available_providers() -> list[str]:
    registered = BACKEND_PROVIDERS.names()
    plugins = entry_point_names(BACKEND_GROUP, exclude=(*registered, LIBRARY_ONLY_PROVIDER))
    return [*registered, *sorted(plugins)]


def _provider_problem(provider: Any) -> str | None:
    if not isinstance(provider, str):
        return f"expected a provider name, got {describe(provider)}"
    if provider == LIBRARY_ONLY_PROVIDER:
        return "'python' backends are for library use only; contracts never name Python code"
    try:
        check_name(provider)
    except ValueError as exc:
        return str(exc)
    if provider not in BACKEND_PROVIDERS and provider not in available_providers():
        return f"unknown provider {provider!r}; available: {', '.join(available_providers())}"
    return None


def parse_backend(
    raw: Any, *, name: str, path: str, ctx: DecisionContext | None
) -> tuple[BackendConfig | None, list[str]]:
    """Validate one backend entry; returns the config or the problems (`path.field: ...`)."""
    if not isinstance(raw, dict):
        return None, [f"{path}: expected a mapping with 'provider', got {describe(raw)}"]
    if "provider" not in raw:
        return None, [f"{path}.provider: required field is missing"]
    provider = raw["provider"]
    bad_provider = _provider_problem(provider)
    if bad_provider:
        return None, [f"{path}.provider: {bad_provider}"]
    model = raw.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        return None, [f"{path}.model: expected a non-empty string, got {describe(model)}"]
    price = raw.get("price_per_call")
    if price is not None and (isinstance(price, bool) or not isinstance(price, int | float)
                              or not 0 <= price < float("inf")):
        return None, [f"{path}.price_per_call: expected a non-negative number (the price of "
                      f"one backend call), got {describe(price)}"]
    price = None if price is None else float(price)
    settings_raw = {k: v for k, v in raw.items()
                    if k not in ("provider", "model", "price_per_call")}
    if provider not in BACKEND_PROVIDERS:
        return BackendConfig(provider, model, settings_raw, raw, name, price), []
    entry = BACKEND_PROVIDERS.get(provider)
    problems: list[str] = []
    try:
        settings = entry.settings.model_validate(settings_raw, context=ctx)
    except ValidationError as exc:
        problems = problems_from(exc, path)
    if entry.problems is not None:
        problems += entry.problems(raw, name, path, ctx)
    if problems:
        return None, problems
    return BackendConfig(provider, model or entry.default_model, settings, raw, name, price), []

