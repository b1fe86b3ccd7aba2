"""`properties.paraphrase.source`: where paraphrases come from.

Built-in providers are `identity`, `file` and `openai`; any other name must be an installed
entry point in the `decflow.paraphrasers` group, whose settings are kept as written.
"""

# No `from __future__ import annotations` here: pydantic would compile and evaluate every
# field's annotation string again for each model (and each subclass) it collects.

from typing import Annotated, Any, Literal, Self

from pydantic import ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from decflow.contracts.base import EnvName, FilePath, Name, NonEmptyStr, StrictModel
from decflow.contracts.credentials import check_url
from decflow.contracts.plugins import entry_point_names

PARAPHRASER_GROUP = "decflow.paraphrasers"
BUILTIN_PARAPHRASERS = ("identity", "file", "openai")


class IdentitySource(StrictModel):
    """Re-asks the unchanged input: evidence of (non-)determinism, no model needed."""

    provider: Literal["identity"] = "identity"


class FileSource(StrictModel):
    provider: Literal["file"]
    path: FilePath


class OpenAIParaphraseSource(StrictModel):
    provider: Literal["openai"]
    model: NonEmptyStr
    url: str = "https://api.openai.com/v1"
    api_key_env: EnvName | None = "OPENAI_API_KEY"
    timeout_s: float = Field(default=60.0, gt=0.0, le=600.0)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_url(value)


class PluginParaphraseSource(StrictModel):
    model_config = ConfigDict(extra="allow")

    provider: Name

    @model_validator(mode="after")
    def _installed(self) -> Self:
        installed = entry_point_names(PARAPHRASER_GROUP, exclude=BUILTIN_PARAPHRASERS)
        if self.provider not in installed:
            available = ", ".join([*BUILTIN_PARAPHRASERS, *sorted(installed)])
            raise ValueError(
                f"unknown paraphrase provider {self.provider!r}; available: {available}"
            )
        return self


_TAGS: dict[str, type[StrictModel]] = {
    "~identity": IdentitySource,
    "~file": FileSource,
    "~openai": OpenAIParaphraseSource,
    "~plugin": PluginParaphraseSource,
}


def _source_tag(value: Any) -> str | None:
    # Tags start with "~" so the error formatter can drop them from field paths.
    if isinstance(value, dict):
        provider = value.get("provider")
        return f"~{provider}" if provider in BUILTIN_PARAPHRASERS else "~plugin"
    for tag, model in _TAGS.items():
        if type(value) is model:
            return tag
    return None


ParaphraseSource = Annotated[
    Annotated[IdentitySource, Tag("~identity")]
    | Annotated[FileSource, Tag("~file")]
    | Annotated[OpenAIParaphraseSource, Tag("~openai")]
    | Annotated[PluginParaphraseSource, Tag("~plugin")],
    Discriminator(_source_tag),
]
