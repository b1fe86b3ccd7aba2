"""Test-only extensions, registered through the same API as decflow's built-ins: a property
(`reversed_words`) and a view format (`--checks-csv FILE`, the checks table as CSV).
`python -m tests.support.extended_cli ARGS` runs the command line with them registered,
before anything reads a registry."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from decflow.contracts.properties import PROPERTIES, LimitedProperty, PropertyEntry
from decflow.properties.base import (
    SKIP_NO_CHANGE,
    Generated,
    Original,
    Step,
    Transformation,
    drop_one_step,
    text_edit,
)
from decflow.views.formats import VIEW_FORMATS, ViewFormat

# -- a property: the words of the text in reverse order ---------------------------------------


class ReversedWords(LimitedProperty):
    """Settings: the same limits as every invariance property."""

    samples: int = Field(default=1, ge=1, le=1)


def _reverse(text: str, steps: Sequence[Step]) -> str:
    return " ".join(reversed(text.split())) if steps else text


def _generate(_config: ReversedWords, original: Original) -> Generated:
    case = original.text_case()
    if len(case.text.split()) < 2:
        return Generated(skip_reason=SKIP_NO_CHANGE)
    steps: list[Step] = [{"reverse": "words"}]
    return case.finish([(steps, _reverse(case.text, steps))])


REVERSED_WORDS = Transformation(_generate, text_edit(_reverse), shrink=drop_one_step)


# -- a view format: the checks as CSV ----------------------------------------------------------

CSV_COLUMNS = ("gate", "level", "status", "value", "threshold")


def render_checks_csv(report: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows([check.get(column) for column in CSV_COLUMNS] for check in report["checks"])
    return out.getvalue()


def register() -> None:
    PROPERTIES.register(
        PropertyEntry("reversed_words", ReversedWords, "tests.support.extensions:REVERSED_WORDS")
    )
    VIEW_FORMATS.register(ViewFormat(
        "checks_csv", "tests.support.extensions:render_checks_csv", "checks CSV",
        "Also write the checks as CSV here.", kinds=frozenset({"run", "check", "diff"}),
    ))
