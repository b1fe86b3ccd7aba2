"""The Prefect server a `--prefect` run talks to: checked before the run starts, so an
unreachable one is one line saying what to do (exit 2), not a traceback after Prefect's own
retries. Without PREFECT_API_URL, Prefect starts a temporary server for the run; when that
cannot start either, the same one line."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from prefect.settings import PREFECT_API_URL

from decflow import interrupts
from decflow.backends.http11 import Http11Pool, HttpResponse, Target, TransportError
from decflow.errors import DecflowError

HEALTH_TIMEOUT_S = 5.0
WHAT_TO_DO = ("start one with `prefect server start` and set PREFECT_API_URL to its API "
              "(http://127.0.0.1:4200/api), or run without Prefect: drop --prefect (and unset "
              "PREFECT_API_URL, which selects Prefect too) or pass --no-prefect")
# Prefect's messages when it cannot reach its API or start a temporary server.
UNREACHABLE = ("Failed to reach API", "Timed out while attempting to connect to ephemeral")


def _check(url: str) -> None:
    """GET /health with the backends' client (one deadline for the whole exchange, the
    answer's size capped, no compression), as every outbound call of decflow's."""
    pool = Http11Pool(HEALTH_TIMEOUT_S)

    async def health() -> HttpResponse:
        try:
            return await pool.request("GET", Target.parse(f"{url.rstrip('/')}/health"), {},
                                      None)
        finally:
            await pool.aclose()

    try:
        answer = interrupts.run(health())
    except (TransportError, ValueError) as exc:
        reason = exc.name if isinstance(exc, TransportError) else str(exc)
        raise DecflowError(f"no Prefect server answers at {url} ({reason}); "
                           f"{WHAT_TO_DO}") from None
    if answer.status != 200:
        raise DecflowError(f"the Prefect server at {url} is not healthy (HTTP "
                           f"{answer.status} from /health); {WHAT_TO_DO}")


@contextmanager
def prefect_server() -> Iterator[None]:
    """Around a flow run from the command line: the server is checked first (or, without
    PREFECT_API_URL, the temporary server announced), and Prefect's failure to reach it
    becomes one `DecflowError`."""
    url = PREFECT_API_URL.value()
    if url:
        _check(url)
    else:
        print("decflow: PREFECT_API_URL is not set; Prefect starts a temporary server for this "
              "run (slow, and its history is lost at exit). Start one with "
              "`prefect server start` and set PREFECT_API_URL.", file=sys.stderr)
    try:
        yield
    except RuntimeError as exc:
        if not str(exc).startswith(UNREACHABLE):
            raise
        where = f"at {url}" if url else "(Prefect's temporary server did not start)"
        raise DecflowError(f"cannot reach the Prefect server {where}: {exc}; "
                           f"{WHAT_TO_DO}") from None
