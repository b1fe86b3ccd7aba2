"""Shared types of the transformation families: what a property does (`Transformation`,
the behaviour half of a property's registry entry), transformed cases, skips, text access.

A transformation is a JSON list of steps applied to the original case; applying steps is
pure, so a transformed case can be regenerated, shrunk and replayed from its steps alone.
`presentation` lists (shown label, contract label) pairs in shown order, or is None when
the labels are shown canonically (contract order, contract form).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

from decflow.properties.stream import Stream

Input = str | dict[str, Any]
Presentation = list[tuple[str, str]] | None
Step = dict[str, Any]
# How a transformed case's decision must relate to the original's (`metrics.compare`).
Relation = Literal["invariant", "swapped", "monotonic"]
Settings = TypeVar("Settings")

SKIP_NO_TEXT = "object input has no text to transform (set fuzz.text_field)"
SKIP_EMPTY_TEXT = "text is empty"
SKIP_NO_REWRITE = "no rewrite matches the text"
SKIP_NO_CHANGE = "no transformation changes this case"


def skip_not_string(field_name: str) -> str:
    return f"input field '{field_name}' is missing or not a string"


def skip_not_number(field_name: str) -> str:
    return f"input field '{field_name}' is missing or not a number"


def skip_not_finite(field_name: str) -> str:
    return f"input field '{field_name}' is not finite"


def skip_provider_gave_none(provider: str) -> str:
    return f"paraphrase provider '{provider}' gave none"


@dataclass(slots=True)
class Transformed:
    """One transformed case; `sample` numbers the kept transformations of a case from 0."""

    sample: int
    steps: list[Step]
    input: Input
    presentation: Presentation
    # The input and labels are unchanged (identity paraphrase): evidence of rerun stability.
    rerun_evidence: bool = False


@dataclass(slots=True)
class GenerationFailure:
    """A provider failure recorded as one errored transformed case (sample 0, no steps)."""

    kind: str  # paraphrase_error | timeout | unavailable
    message: str


@dataclass(slots=True)
class Generated:
    transformed: list[Transformed] = field(default_factory=list)
    skip_reason: str | None = None
    failure: GenerationFailure | None = None
    provenance: dict[str, Any] | None = None


class TextNotAvailable(Exception):
    """The case has no text a text property can edit; the message is the skip reason."""


def get_text(original: Input, text_field: str | None) -> str:
    if isinstance(original, str):
        return original
    if text_field is None:
        raise TextNotAvailable(SKIP_NO_TEXT)
    value = original.get(text_field)
    if not isinstance(value, str):
        raise TextNotAvailable(skip_not_string(text_field))
    return value


def with_text(original: Input, text_field: str | None, text: str) -> Input:
    """The original input with its text replaced (other object fields keep their order)."""
    if isinstance(original, str) or text_field is None:
        return text
    return {**original, text_field: text}


def setting(obj: Any, name: str, default: Any = None) -> Any:
    """Read a setting from a contract model or a plain mapping (provider settings)."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def finish(
    original: Input,
    candidates: Sequence[tuple[list[Step], Input, Presentation]],
    *,
    keep_noop: bool = False,
) -> Generated:
    """Drop no-ops and duplicates, number the rest; nothing left is a skip."""
    kept: list[Transformed] = []
    # A candidate's key: its input (JSON for an object), paired with its presentation when
    # it has one (a string and a tuple never compare equal, so the two kinds stay apart).
    seen: set[str | tuple[str, tuple[tuple[str, str], ...]]] = set()
    for steps, new_input, presentation in candidates:
        unchanged = presentation is None and new_input == original
        if unchanged and not keep_noop:
            continue
        shown = new_input if isinstance(new_input, str) else json.dumps(new_input,
                                                                        sort_keys=True)
        key = shown if presentation is None else (shown, tuple(presentation))
        if key in seen:
            continue
        seen.add(key)
        kept.append(Transformed(len(kept), steps, new_input, presentation, unchanged))
    if not kept:
        return Generated(skip_reason=SKIP_NO_CHANGE)
    return Generated(kept)


# Not frozen: built once per (property, case), hundreds of thousands of times a run, and a
# frozen dataclass sets each field through object.__setattr__ (treat both as read-only).
@dataclass(slots=True)
class TextCase:
    """A case for a text property: its input and the text to edit (the input or its field)."""

    original: Input
    text_field: str | None
    text: str

    @classmethod
    def of(cls, original: Input, text_field: str | None) -> TextCase:
        """Raises TextNotAvailable, whose message is the skip reason, when there is no text."""
        return cls(original, text_field, get_text(original, text_field))

    def finish(
        self, edits: Iterable[tuple[list[Step], str]], *, keep_noop: bool = False
    ) -> Generated:
        """`finish` over (steps, edited text), each text put back into the input."""
        original, text_field = self.original, self.text_field
        if isinstance(original, str):  # the text is the input: no input to rebuild
            return finish(original, [(steps, text, None) for steps, text in edits],
                          keep_noop=keep_noop)
        candidates = [(steps, with_text(original, text_field, text), None) for steps, text in edits]
        return finish(original, candidates, keep_noop=keep_noop)


class ParaphraseProvider(Protocol):
    """What the paraphrase transformation asks of the run's provider (a
    `paraphrasers.Paraphraser`)."""

    provider: str

    def paraphrase(self, text: str, *, n: int, case_id: str) -> list[str]: ...

    def provenance(self) -> dict[str, Any]: ...


@dataclass(slots=True)
class Original:
    """One original case as a transformation sees it, with what it may draw on: the run's
    seed (through `stream`), the decision's labels, the text field of object inputs and
    the run's paraphrase provider."""

    property_name: str
    case_id: str
    input: Input
    labels: tuple[str, ...]
    text_field: str | None
    seed: int = 0
    paraphraser: ParaphraseProvider | None = None

    def stream(self) -> Stream:
        """The seeded draws of this (seed, property, case)."""
        return Stream(self.seed, self.property_name, self.case_id)

    def text_case(self) -> TextCase:
        """The text to edit; raises TextNotAvailable (the skip reason) when there is none."""
        return TextCase.of(self.input, self.text_field)

    def with_edited_text(self, edit: Callable[[str], str]) -> Input:
        """The input with its text edited (raises TextNotAvailable like `text_case`)."""
        text = get_text(self.input, self.text_field)
        return with_text(self.input, self.text_field, edit(text))


Shrink = Callable[[list[Step], Sequence[str]], Iterator[list[Step]]]
# Step dicts by their content, for `shared_step` (cleared when full).
_SHARED_STEPS: dict[tuple[str, Any, str, Any], Step] = {}
_SHARED_STEPS_KEPT = 8192


def shared_step(name: str, value: Any, other: str, other_value: Any) -> Step:
    """The step `{name: value, other: other_value}` as one dict shared by every case that
    makes it (read-only; its transformation sets `shared_steps`). Values are strings and
    ints: the key tells `1` from `"1"`."""
    key = (name, value, other, other_value)
    found = _SHARED_STEPS.get(key)
    if found is None:
        if len(_SHARED_STEPS) >= _SHARED_STEPS_KEPT:
            _SHARED_STEPS.clear()
        found = _SHARED_STEPS[key] = {name: value, other: other_value}
    return found


# Step lists by their (name, value) pairs, for `shared_step_list` (cleared when full).
_SHARED_LISTS: dict[tuple[str, str, tuple[tuple[Any, Any], ...]], list[Step]] = {}


def shared_step_list(name: str, other: str, pairs: tuple[tuple[Any, Any], ...]) -> list[Step]:
    """`[shared_step(name, value, other, other_value) for value, other_value in pairs]` as
    one list shared by every case that makes it (read-only, like its dicts): the steps of
    many cases repeat (a few targets and choices), and a shared list is encoded once."""
    key = (name, other, pairs)
    found = _SHARED_LISTS.get(key)
    if found is None:
        if len(_SHARED_LISTS) >= _SHARED_STEPS_KEPT:
            _SHARED_LISTS.clear()
        found = _SHARED_LISTS[key] = [shared_step(name, a, other, b) for a, b in pairs]
    return found


def drop_one_step(steps: list[Step], _labels: Sequence[str]) -> Iterator[list[Step]]:
    """Candidates one step smaller: each step left out in turn (none from a single step)."""
    if len(steps) > 1:
        for i in range(len(steps)):
            yield steps[:i] + steps[i + 1 :]


@dataclass(frozen=True)
class Transformation(Generic[Settings]):
    """What a property does, as its registry entry names it (`contracts.properties`):

    - `generate(settings, original)`: its transformed cases of one original case;
    - `apply(steps, original)`: the (input, presentation) stored steps make of the original
      (pure: regeneration, minimisation and replay rebuild cases with it);
    - `relation`: how the transformed decision must relate to the original's;
    - `shrink`: the candidates one step smaller when minimising a failing case (None: its
      failing cases are not minimised);
    - `shared_steps`: `generate` hands out the same step lists, or lists of the same step
      dicts, to many cases (read-only: `shared_step`), so the requests stage serialises
      each once;
    - `regenerates`: replay can generate a stored case again from the seed (not when a
      provider wrote it: a paraphrase is re-sent as stored)."""

    generate: Callable[[Settings, Original], Generated]
    apply: Callable[[Sequence[Step], Original], tuple[Input, Presentation]]
    relation: Relation = "invariant"
    shrink: Shrink | None = None
    shared_steps: bool = False
    regenerates: bool = True


def text_edit(
    edit: Callable[[str, Sequence[Step]], str],
) -> Callable[[Sequence[Step], Original], tuple[Input, Presentation]]:
    """`Transformation.apply` of a property that edits the text with `edit(text, steps)`."""

    def apply(steps: Sequence[Step], original: Original) -> tuple[Input, Presentation]:
        return original.with_edited_text(lambda text: edit(text, steps)), None

    return apply
