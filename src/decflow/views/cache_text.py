"""How a run used the call cache, in words every view shows (text, Markdown and its Prefect
artifact, HTML): requests sent against answers served from the cache, what that saved, and
whether the model's identity behind the cache keys is verified."""

from __future__ import annotations

from decflow.gates.headline import number
from decflow.report.run_report import CallCacheUse, RunView


def cache_counts(section: CallCacheUse) -> str:
    """`call cache read-write: 0 requests sent to the backend, 30 answers served from the
    cache`."""
    sent, served = section.requests_sent, section.served_from_cache
    return (f"call cache {section.mode}: {sent} request{'s' if sent != 1 else ''} sent to "
            f"the backend, {served} answer{'s' if served != 1 else ''} served from the cache")


def cache_savings(section: CallCacheUse) -> str | None:
    """`saved 12.3 s of backend time and 0.012 at 0.0004 per call`, or None."""
    if not section.served_from_cache:
        return None
    saved = [f"{number(section.backend_seconds_saved)} s of backend time"]
    if section.money_saved is not None:
        saved.append(f"{number(section.money_saved)} at {number(section.price_per_call)}"
                     " per call")
    return "saved " + " and ".join(saved)


def identity_line(section: CallCacheUse) -> str:
    """`model identity: unverified: …` or `model identity verified: …`."""
    identity = section.model_identity
    note = identity.note
    if identity.verified:
        return f"model identity verified: {note}"
    return f"model identity {note}" if note.startswith("unverified") else \
        f"model identity unverified: {note}"


def cache_lines(section: CallCacheUse) -> list[str]:
    """The sentences of the section, in order."""
    savings = cache_savings(section)
    return [cache_counts(section), *([savings] if savings else []), identity_line(section)]


def cache_block(report: RunView) -> list[str]:
    """The text view's block."""
    if report.call_cache is None:
        return []
    first, *rest = cache_lines(report.call_cache)
    return ["", f"  {first[0].upper()}{first[1:]}", *(f"    {line}" for line in rest)]
