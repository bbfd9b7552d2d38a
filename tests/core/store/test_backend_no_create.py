"""open_backend(url, create=False): what the commands that only read use. A
missing SQLite file is an error, and nothing (not even its directory) is
made; an existing one opens as usual."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.store.backends import open_backend
from core.store.errors import DatabaseMissing


def test_a_missing_file_raises_and_creates_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/typo/data/kept.sqlite"
    with pytest.raises(DatabaseMissing, match=r"no database at .*/typo/data/kept\.sqlite"):
        open_backend(url, create=False)
    assert not (tmp_path / "typo").exists()


async def test_an_existing_file_opens(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/data/kept.sqlite"
    async with open_backend(url) as created:  # the bot's first start
        version = await created.store.schema_version()
    async with open_backend(url, create=False) as backend:
        assert await backend.store.schema_version() == version
