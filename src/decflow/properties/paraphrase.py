"""paraphrase: replace the text with texts from a provider. Step: `{"text"}`.

Unlike the other properties, a paraphrase equal to the original is kept (the identity
provider re-asks the same input on purpose); it is marked as rerun evidence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from decflow.properties.base import (
    Generated,
    GenerationFailure,
    TextCase,
    skip_provider_gave_none,
)
from decflow.properties.paraphrasers import IdentityParaphraser, ParaphraseFailed, Paraphraser

if TYPE_CHECKING:
    from decflow.contracts.properties import Paraphrase

def generate(
    config: Paraphrase,
    case: TextCase,
    *,
    case_id: str,
    paraphraser: Paraphraser | None,
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
