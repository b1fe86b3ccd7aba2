"""paraphrase: replace the text with texts from a provider. Step: `{"text"}`.

Unlike the other properties, a paraphrase equal to the original is kept (the identity
provider re-asks the same input on purpose); it is marked as rerun evidence.
"""

from __future__ import annotations

from typing import Any

from decflow.properties.base import (
    Generated,
    GenerationFailure,
    Input,
    TextNotAvailable,
    finish,
    get_text,
    skip_provider_gave_none,
    with_text,
)
from decflow.properties.paraphrasers import IdentityParaphraser, ParaphraseFailed, Paraphraser


def generate(
    config: Any,
    original: Input,
    text_field: str | None,
    *,
    case_id: str,
    paraphraser: Paraphraser | None,
) -> Generated:
    try:
        text = get_text(original, text_field)
    except TextNotAvailable as skip:
        return Generated(skip_reason=str(skip))
    provider = paraphraser or IdentityParaphraser()
    try:
        texts = provider.paraphrase(text, n=config.samples, case_id=case_id)
    except ParaphraseFailed as failed:
        return Generated(
            failure=GenerationFailure(failed.kind, failed.message),
            provenance=provider.provenance(),
        )
    if not texts:
        return Generated(skip_reason=skip_provider_gave_none(provider.provider))
    candidates = [([{"text": t}], with_text(original, text_field, t), None) for t in texts]
    found = finish(original, candidates[: config.samples], keep_noop=True)
    found.provenance = provider.provenance()
    return found
