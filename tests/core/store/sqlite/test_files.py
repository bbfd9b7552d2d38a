"""The SQLite database as files: private whatever the umask, and a file
deleted or replaced under the running store noticed (writes refused with a
transient error, never a fresh database). SQLite only: PostgreSQL keeps
its data on its server."""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from core.clock import TestClock
from core.store.backends import Backend, open_backend
from core.store.errors import DatabaseReplaced, StoreUnavailable
from core.store.sqlite import SqliteStore
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.files import IDENTITY_CHECK_SECONDS
from tests.core.store.test_contract import KEY, add, add_session


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o000], ids=["umask022", "umask000"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """A permissive process umask for the test's duration."""
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


async def test_the_data_directory_is_0700_and_every_database_file_0600(
    tmp_path: Path, umask: int
) -> None:
    data = tmp_path / "var" / "data"
    backend = open_backend(f"sqlite:///{data}/kept.sqlite")
    async with backend:
        await add_session(backend.store, KEY)
        await add(backend.store, "my diagnosis came back")
        db = data / "kept.sqlite"
        wal, shm = data / "kept.sqlite-wal", data / "kept.sqlite-shm"
        assert wal.exists() and shm.exists()  # WAL mode, while open
        assert {p.name: oct(mode(p)) for p in (data.parent, data, db, wal, shm)} == {
            "var": "0o700",
            "data": "0o700",
            "kept.sqlite": "0o600",
            "kept.sqlite-wal": "0o600",
            "kept.sqlite-shm": "0o600",
        }


async def test_an_existing_directory_keeps_the_operators_mode(tmp_path: Path, umask: int) -> None:
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, 0o750)
    async with open_backend(f"sqlite:///{data}/kept.sqlite") as backend:
        await backend.app_state.put("k", "v")
    assert mode(data) == 0o750
    assert mode(data / "kept.sqlite") == 0o600


async def test_a_shm_left_more_open_than_the_database_is_narrowed(
    tmp_path: Path, umask: int
) -> None:
    db = tmp_path / "kept.sqlite"
    async with SqliteStore(db) as store:
        await store.connection.fetchall("SELECT 1")
    # An older kept's, under a 022 umask, left by a crash (SQLite narrows an
    # empty one itself, not one with content).
    shm = tmp_path / "kept.sqlite-shm"
    shm.write_bytes(b"\0" * 32768)
    os.chmod(shm, 0o644)
    async with SqliteStore(db) as store:
        await store.connection.fetchall("SELECT 1")
        assert mode(shm) == 0o600
    assert mode(db) == 0o600


# --- a database that disappears ---------------------------------------------


@pytest.fixture
def clock() -> TestClock:
    return TestClock()


@pytest.fixture
async def running(tmp_path: Path, clock: TestClock) -> AsyncIterator[Backend]:
    backend = open_backend(f"sqlite:///{tmp_path}/kept.sqlite", clock=clock)
    async with backend:
        await add_session(backend.store, KEY)
        await add(backend.store, "before it went")
        yield backend


def another_database(path: Path) -> None:
    """A different SQLite file moved in at `path` (a restore over it)."""
    other = path.with_name("other.sqlite")
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (a)")
    conn.close()
    os.replace(other, path)


def delete(path: Path) -> None:
    path.unlink()


@pytest.mark.parametrize("change", [delete, another_database], ids=["deleted", "replaced"])
async def test_a_changed_file_refuses_writes_within_one_check_interval(
    tmp_path: Path, clock: TestClock, running: Backend, change: object
) -> None:
    db = tmp_path / "kept.sqlite"
    before = db.stat().st_ino
    change(db)  # type: ignore[operator]
    await clock.advance(IDENTITY_CHECK_SECONDS)

    with pytest.raises(DatabaseReplaced) as caught:
        await add(running.store, "into a file that is gone")
    # Transient: the caller holds the update and retries it, never confirms it.
    assert isinstance(caught.value, StoreUnavailable) and isinstance(caught.value, ConnectionError)
    assert str(caught.value).startswith(f"the database file {db} was ")
    with pytest.raises(DatabaseReplaced):
        await running.app_state.put("k", "v")
    with pytest.raises(DatabaseReplaced):  # what readiness asks
        await running.store.schema_version()
    # A long text goes through the bulk connection, opened on first use: it
    # must not open (or create) a file at the path either.
    with pytest.raises(DatabaseReplaced):
        await add(running.store, "x" * 20_000)

    if change is delete:
        assert not db.exists()  # no fresh database
    else:
        assert db.stat().st_ino != before
        assert tables_of(db) == ["t"]  # untouched, even read while kept runs
    await running.close()
    if change is delete:
        # Only the next start creates a database again, an empty one.
        async with SqliteStore(db) as fresh:
            assert await fresh.get_session(KEY) is None
    else:
        assert tables_of(db) == ["t"]


def tables_of(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [name for (name,) in conn.execute("SELECT name FROM sqlite_master")]
    finally:
        conn.close()


async def test_readiness_sees_it_at_once_and_writes_within_the_interval(
    tmp_path: Path, clock: TestClock, running: Backend
) -> None:
    delete(tmp_path / "kept.sqlite")
    # Within the interval a write is not looked at yet (one stat a second)...
    await add(running.store, "inside the interval")
    # ...but readiness always looks, and from then on every write is refused.
    with pytest.raises(DatabaseReplaced, match="was deleted"):
        await running.store.schema_version()
    with pytest.raises(DatabaseReplaced):
        await add(running.store, "after readiness saw it")


async def test_a_storage_error_looks_at_the_file_at_once(
    tmp_path: Path, clock: TestClock, running: Backend
) -> None:
    another_database(tmp_path / "kept.sqlite")
    # No clock movement: the error itself makes the store look.
    with pytest.raises(DatabaseReplaced, match="replaced by another file") as caught:
        await running.store.connection.fetchall("SELECT * FROM no_such_table")
    assert isinstance(caught.value.__cause__, sqlite3.OperationalError)


async def test_a_file_moved_back_is_the_same_database_and_writes_go_on(
    tmp_path: Path, clock: TestClock, running: Backend
) -> None:
    db = tmp_path / "kept.sqlite"
    aside = tmp_path / "aside.sqlite"
    os.replace(db, aside)
    await clock.advance(IDENTITY_CHECK_SECONDS)
    with pytest.raises(DatabaseReplaced):
        await running.app_state.put("k", "v")
    os.replace(aside, db)
    await clock.advance(IDENTITY_CHECK_SECONDS)
    await running.app_state.put("k", "v")
    assert await running.app_state.get("k") == "v"


async def test_the_log_says_what_happened_and_what_to_do(
    tmp_path: Path, clock: TestClock, running: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    delete(tmp_path / "kept.sqlite")
    await clock.advance(IDENTITY_CHECK_SECONDS)
    for _ in range(3):
        with pytest.raises(DatabaseReplaced):
            await running.app_state.put("k", "v")
    lines = [r.getMessage() for r in caplog.records if "database_file_gone" in r.getMessage()]
    assert len(lines) == 1  # once, not per write
    assert "restart kept" in lines[0] and str(tmp_path / "kept.sqlite") in lines[0]


async def test_a_deleted_file_can_be_copied_back_from_where_kept_still_has_it(
    tmp_path: Path, clock: TestClock, running: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "kept.sqlite"
    delete(db)
    await clock.advance(IDENTITY_CHECK_SECONDS)
    with pytest.raises(DatabaseReplaced):
        await add(running.store, "refused")
    (line,) = [r.getMessage() for r in caplog.records if "database_file_gone" in r.getMessage()]
    source = re.search(r"`cp (\S+) ", line)
    assert source is not None, line
    shutil.copyfile(source.group(1), db)  # what the log says to run
    await running.close()
    async with SqliteStore(db, migrate=False) as restored:
        texts = [row[0] for row in await restored.connection.fetchall("SELECT text FROM messages")]
    assert texts == ["before it went"]


async def test_reopening_at_start_creates_the_database_again(tmp_path: Path) -> None:
    """Only a start creates a database: the watch is about a running store."""
    db = tmp_path / "kept.sqlite"
    async with SqliteStore(db) as store:
        await store.connection.fetchall("SELECT 1")
    shutil.move(db, tmp_path / "old.sqlite")
    async with SqliteStore(db) as store:
        assert await store.schema_version() > 0
