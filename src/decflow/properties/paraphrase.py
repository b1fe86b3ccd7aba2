"""paraphrase: replace the text with texts from a provider. Step: `{"text"}`.

Unlike the other properties, a paraphrase equal to the original is kept (the identity
provider re-asks the same input on purpose); it is marked as rerun evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from decflow.properties.base import (
    Generated,
    GenerationFailure,
    Original,
    ParaphraseProvider,
    Step,
    TextCase,
    Transformation,
    skip_provider_gave_none,
    text_edit,
)
from decflow.properties.paraphrasers import IdentityParaphraser, ParaphraseFailed

if TYPE_CHECKING:
    from decflow.contracts.properties import Paraphrase

def generate(
    config: Paraphrase,
    case: TextCase,
    *,
    case_id: str,
    paraphraser: ParaphraseProvider | None,
) -> Generated:
    provider = paraphraser or IdentityParaphraser()
    try:
        texts = provider.paraphrase(case.text, n=config.samples, case_id=case_id)
    except ParaphraseFailed as failed:
        return Generated(
            failure=GenerationFailure(failed.kind, failed.message),
            provenance=provider.provenance(),
        )
    if not texts:
        return Generated(skip_reason=skip_provider_gave_none(provider.provider))
    candidates = [([{"text": t}], t) for t in texts[: config.samples]]
    found = case.finish(candidates, keep_noop=True)
    found.provenance = provider.provenance()
    return found


def _generate(config: Paraphrase, original: Original) -> Generated:
    return generate(config, original.text_case(), case_id=original.case_id,
                    paraphraser=original.paraphraser)


def _stored_text(text: str, steps: Sequence[Step]) -> str:
    """The stored paraphrase (never asked of the provider again)."""
    return steps[-1]["text"] if steps else text


PARAPHRASE = Transformation(_generate, text_edit(_stored_text), regenerates=False)
