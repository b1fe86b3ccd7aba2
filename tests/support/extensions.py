"""Test-only extensions, registered through the same API as decflow's built-ins: a property
(`reversed_words`), a backend provider (`keyword`, answering from words in the text), a
view format (`--checks-csv FILE`, the checks table as CSV) and a golden gate
(`max_unsure_rate`: the share of decided cases answered with confidence below 0.75, and
its diff gate `regression.max_unsure_rate_increase`).
`python -m tests.support.extended_cli ARGS` runs the command line with them registered,
before anything reads a registry."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from pydantic import Field, ValidationInfo, field_validator

from decflow.backends.base import Backend, DecisionRequest, DecisionSpec, Prediction
from decflow.backends.mock import label_meaning
from decflow.contracts.base import Text, Unit
from decflow.contracts.gates import GOLDEN_GATES, GoldenGate
from decflow.contracts.properties import PROPERTIES, LimitedProperty, PropertyEntry
from decflow.contracts.providers import (
    BACKEND_PROVIDERS,
    DecisionContext,
    ProviderEntry,
    ProviderSettings,
)
from decflow.data.golden_dataset import compact_json
from decflow.metrics.golden_cases import CaseValues, PerCase
from decflow.properties.base import (
    SKIP_NO_CHANGE,
    Generated,
    Original,
    Step,
    Transformation,
    drop_one_step,
    text_edit,
)
from decflow.report.model import Report
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


# -- a backend provider: the label of the first keyword found in the text --------------------


class KeywordSettings(ProviderSettings):
    """`keywords` maps a word to the contract label it means; `otherwise` is the label of a
    text with none of them; the chosen label gets `confidence`, the others share the rest."""

    keywords: dict[Text, Text]
    otherwise: Text
    confidence: Unit = 0.9

    @field_validator("keywords")
    @classmethod
    def _contract_labels(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        ctx = info.context
        foreign = sorted(set(value.values()) - set(ctx.labels)) if isinstance(
            ctx, DecisionContext) else []
        if foreign:
            raise ValueError(f"labels {foreign} are not contract labels")
        return value


class KeywordBackend(Backend):
    provider = "keyword"

    def __init__(self, name: str, model: str | None, settings: KeywordSettings,
                 decision: DecisionSpec) -> None:
        super().__init__(name, model)
        self.settings = settings

    async def predict(self, request: DecisionRequest) -> Prediction:
        text = request.input if isinstance(request.input, str) else compact_json(request.input)
        found = [label for word, label in self.settings.keywords.items()
                 if word.casefold() in text.casefold()]
        chosen = (found or [self.settings.otherwise])[0]
        shown = request.decision.labels  # as presented: `SPAM`, `"spam"`, ...
        rest = (1 - self.settings.confidence) / (len(shown) - 1)
        return Prediction({label: self.settings.confidence
                           if label_meaning(label) == chosen.casefold() else rest
                           for label in shown})


# -- a view format: the checks as CSV ----------------------------------------------------------

CSV_COLUMNS = ("gate", "level", "status", "value", "threshold")


def render_checks_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows([check.gate, check.level, check.status, check.value, check.threshold]
                     for check in report.checks)
    return out.getvalue()


# -- a golden gate: the share of decided cases answered with little confidence ---------------

UNSURE_BELOW = 0.75


def unsure_rate(values: CaseValues) -> PerCase:
    return values.decided & (values.confidence < UNSURE_BELOW), values.decided, 1.0


UNSURE_RATE = GoldenGate("max_unsure_rate", Unit, "unsure_rate", "<=",
                         per_case="tests.support.extensions:unsure_rate", binary=True,
                         core=False, diff="max_unsure_rate_increase")


def register() -> None:
    PROPERTIES.register(
        PropertyEntry("reversed_words", ReversedWords, "tests.support.extensions:REVERSED_WORDS")
    )
    BACKEND_PROVIDERS.register(ProviderEntry(
        "keyword", KeywordSettings, "tests.support.extensions:KeywordBackend",
        default_model="keyword-1",
    ))
    GOLDEN_GATES.register(UNSURE_RATE)
    VIEW_FORMATS.register(ViewFormat(
        "checks_csv", "tests.support.extensions:render_checks_csv", "checks CSV",
        "Also write the checks as CSV here.", kinds=frozenset({"run", "check", "diff"}),
    ))
