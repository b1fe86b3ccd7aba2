"""Shared by every test group (unit/, integration/, orchestration/).

Tests are marked by their folder, so `-m unit`, `-m integration` or `-m orchestration`
selects a group; the test command runs them all. Fixtures used across groups are
registered here.
"""

from __future__ import annotations

import pytest

from tests.support.llm_server import gemma_server, llm_server

__all__ = ["gemma_server", "llm_server"]

GROUPS = ("unit", "integration", "orchestration")


@pytest.fixture(autouse=True)
def default_store(tmp_path_factory: pytest.TempPathFactory,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands that store runs without `--store` write to a fresh store per test, never to
    `.decflow` in the directory the tests run from."""
    monkeypatch.setenv("DECFLOW_STORE", str(tmp_path_factory.mktemp("default-store")))


@pytest.fixture(autouse=True)
def no_registered_secrets() -> None:
    """Each test starts with no credential registered for redaction (one process runs
    them all; a token a test registered is no secret of the next one)."""
    from decflow.redaction import forget

    forget()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = item.path.parent.name
        if group in GROUPS:
            item.add_marker(getattr(pytest.mark, group))
