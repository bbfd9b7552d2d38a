"""open_backend(url, create=False): what the commands that only read use. A
missing SQLite file is an error, and nothing (not even its directory) is
made; an existing one opens as usual."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from core.store.backends import open_backend
from core.store.errors import DatabaseMissing, DatabaseOutdated
from core.store.postgres.connection import PostgresConnection
from core.store.postgres.migrations import load_migrations as load_postgres_migrations
from core.store.sqlite import SqliteStore
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.migrations import load_migrations as load_sqlite_migrations
from tests.support.postgres import fresh_database


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


# --- never migrating -------------------------------------------------------------


async def _sqlite_at(path: Path, version: int) -> None:
    store = SqliteStore(path, migrations=load_sqlite_migrations()[:version])
    await store.open()
    await store.close()


def _sqlite_version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT max(version) FROM schema_version").fetchone()[0])


async def test_an_older_sqlite_schema_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    # An older worker may still run on this database: a command that is not
    # `kept run` must not migrate it under that worker.
    path = tmp_path / "kept.sqlite"
    latest = len(load_sqlite_migrations())
    await _sqlite_at(path, latest - 1)
    backend = open_backend(f"sqlite:///{path}", create=False)
    try:
        with pytest.raises(DatabaseOutdated, match=f"version {latest - 1} .* needs {latest}"):
            await backend.open()
    finally:
        await backend.close()  # a backend that did open (the guarantee broken) closes too
    assert _sqlite_version(path) == latest - 1
    async with open_backend(f"sqlite:///{path}") as started:  # `kept run` upgrades it
        assert await started.store.schema_version() == latest


async def test_an_older_postgres_schema_is_refused_and_left_as_it_is(
    postgres_server: str,
) -> None:
    latest = len(load_postgres_migrations())
    with fresh_database(postgres_server, "kept_outdated") as url:
        older = PostgresConnection(url, migrations=load_postgres_migrations()[: latest - 1])
        await older.open()
        await older.close()
        backend = open_backend(url, create=False)
        try:
            with pytest.raises(DatabaseOutdated, match=f"version {latest - 1} .* needs {latest}"):
                await backend.open()
        finally:
            await backend.close()  # else its pool outlives the database dropped below
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        assert row == (latest - 1,)
