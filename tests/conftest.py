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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = item.path.parent.name
        if group in GROUPS:
            item.add_marker(getattr(pytest.mark, group))
