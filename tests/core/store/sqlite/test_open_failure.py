"""A database file that cannot be opened: the error comes back, and no
aiosqlite worker thread outlives it (a command that exits on the error
closes its event loop at once, and a thread still finishing would then
print a traceback)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.driver import sqlite3


def worker_threads() -> list[threading.Thread]:
    return [
        t for t in threading.enumerate() if "_connection_worker_thread" in t.name and t.is_alive()
    ]


async def test_a_failed_open_leaves_no_worker_thread(tmp_path: Path) -> None:
    before = worker_threads()
    connection = SqliteConnection(tmp_path)  # a directory, not a database file
    with pytest.raises(sqlite3.OperationalError, match="unable to open database file"):
        await connection.open()
    # Other tests' threads may still be ending; only this open's counts.
    assert [t for t in worker_threads() if t not in before] == []
