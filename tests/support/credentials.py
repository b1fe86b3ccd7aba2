"""Credentials in tests: the test servers' origins allowed to receive them."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

ALLOW_ENV = "DECFLOW_ALLOW_CREDENTIALS"


def allow_credentials(monkeypatch: pytest.MonkeyPatch, *urls: str) -> None:
    """Allow these URLs' origins (and only them) to receive credentials."""
    origins = {f"{p.scheme}://{p.netloc}" for p in map(urlsplit, urls)}
    monkeypatch.setenv(ALLOW_ENV, ",".join(sorted(origins)))
