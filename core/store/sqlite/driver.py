"""The SQLite library every SQLite part of kept goes through.

Erasure needs FTS5's `secure-delete` option (SQLite 3.42 and newer), which
removes a deleted row's terms from the index as it goes instead of leaving
them in its segments until a merge. Python's own `sqlite3` links whatever
SQLite the system has (Debian 12's is 3.40), so on Linux x86-64 kept depends
on `pysqlite3-binary`, the same module built against a recent SQLite, and
uses it when it is installed; elsewhere the system's SQLite must be recent
enough, which `check_version` says in one line when it is not.

Every module imports `sqlite3` from here, never the standard library's: a
database whose index was written with `secure-delete` cannot be read by an
older FTS5, and the two modules' exception classes are not each other's.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import aiosqlite

try:
    from pysqlite3 import dbapi2 as sqlite3  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - only where the wheel does not exist
    import sqlite3  # type: ignore[no-redef]

__all__ = ["MINIMUM", "check_version", "connect", "sqlite3"]

MINIMUM = (3, 42, 0)
# aiosqlite's default number of rows fetched per trip.
_ITER_CHUNK_SIZE = 64


def check_version() -> None:
    if sqlite3.sqlite_version_info < MINIMUM:
        needed = ".".join(map(str, MINIMUM))
        raise RuntimeError(
            f"kept needs SQLite {needed} or newer for erasure (FTS5 secure-delete); this "
            f"Python links {sqlite3.sqlite_version}: install pysqlite3-binary or a newer SQLite"
        )


def connect(database: str, **kwargs: Any) -> aiosqlite.Connection:
    """aiosqlite's connection on this module's SQLite (aiosqlite.connect
    would take the standard library's)."""
    return aiosqlite.Connection(partial(sqlite3.connect, database, **kwargs), _ITER_CHUNK_SIZE)
