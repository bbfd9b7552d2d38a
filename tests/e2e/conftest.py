"""Everything under tests/e2e is marked `e2e` (`-m "not e2e"` leaves it out)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A conftest's collection hook sees every collected item, not only its
    # own directory's, so pick this directory's by path.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)
