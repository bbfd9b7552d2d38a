"""A SQLite backup through the online backup API.

The copy is read by a connection of its own, on a thread of its own, in
one step: in WAL mode that step reads one snapshot while the bot's writer
goes on (a backup in many steps restarts whenever another connection
writes, so under steady chat traffic it might never end). The target is
created 0600 before anything is written to it, and checked with
`integrity_check` before the copy is reported.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import closing, suppress
from pathlib import Path

from core.privacy.backup import BackupFailed, BackupResult, DatabaseBackup
from core.store.sqlite.files import create_private_file


def _copy(source: str, target: Path) -> BackupResult:
    started = time.perf_counter()
    if not create_private_file(target):
        raise BackupFailed(f"{target} already exists; name a new file")
    try:
        with (
            closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as src,
            closing(sqlite3.connect(target)) as copy,
        ):
            src.backup(copy)
            # One self-contained file: the copy takes no WAL beside it.
            copy.execute("PRAGMA journal_mode = DELETE")
            (check,) = copy.execute("PRAGMA integrity_check").fetchone()
            if check != "ok":
                raise BackupFailed(f"the copy failed its integrity check: {check}")
            (messages,) = copy.execute("SELECT count(*) FROM messages").fetchone()
            (version,) = copy.execute("SELECT max(version) FROM schema_version").fetchone()
    except BaseException as exc:
        with suppress(FileNotFoundError):
            target.unlink()
        if isinstance(exc, sqlite3.Error):
            raise BackupFailed(f"cannot copy {source}: {exc}") from exc
        raise
    return BackupResult(
        target, target.stat().st_size, int(messages), int(version or 0),
        time.perf_counter() - started,
    )  # fmt: skip


class SqliteBackup(DatabaseBackup):
    def __init__(self, path: str) -> None:
        self._path = path

    async def backup(self, target: Path) -> BackupResult:
        if self._path == ":memory:":
            raise BackupFailed("an in-memory database has nothing to back up")
        return await asyncio.to_thread(_copy, self._path, target)
