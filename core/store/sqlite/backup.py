"""A SQLite backup through the online backup API.

The copy is read by a connection of its own, on a thread of its own, in
one step: in WAL mode that step reads one snapshot while the bot's writer
goes on (a backup in many steps restarts whenever another connection
writes, so under steady chat traffic it might never end). The target is
created 0600 before anything is written to it, and checked with
`integrity_check` before the copy is reported.

A restore first makes sure nobody has the database open: leaving WAL mode
needs the only connection, so while a `kept run` (or any reader) has it
open that step fails at once; having succeeded, the restore holds the
database's exclusive lock until the backup is in place, so no process can
open it in between.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from contextlib import closing, suppress
from datetime import UTC, datetime
from pathlib import Path

from core.privacy.backup import (
    BackupFailed,
    BackupResult,
    DatabaseBackup,
    RestoreRefused,
    RestoreResult,
)
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.files import PRIVATE_FILE_MODE, create_private_file
from core.store.sqlite.migrations import load_migrations


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


def _checked_copy(source: Path) -> tuple[int, int]:
    """(messages, schema version) of an intact backup the code can open."""
    if not source.is_file():
        raise RestoreRefused(f"no backup at {source}")
    try:
        with closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as copy:
            (check,) = copy.execute("PRAGMA integrity_check").fetchone()
            if check != "ok":
                raise RestoreRefused(f"{source} failed its integrity check: {check}")
            (version,) = copy.execute("SELECT max(version) FROM schema_version").fetchone()
            (messages,) = copy.execute("SELECT count(*) FROM messages").fetchone()
    except sqlite3.Error as exc:
        raise RestoreRefused(f"{source} is not a kept database: {exc}") from exc
    newest = len(load_migrations())
    if int(version or 0) > newest:
        raise RestoreRefused(
            f"{source} has schema {version}, newer than this code's {newest}; "
            "restore it with the kept version that made it"
        )
    return int(messages), int(version or 0)


def _restore(source: Path, live: Path) -> RestoreResult:
    messages, version = _checked_copy(source)
    replaced: Path | None = None
    staged = live.with_name(f".{live.name}.restoring")
    shutil.copyfile(source, staged)
    os.chmod(staged, PRIVATE_FILE_MODE)
    try:
        if live.exists():
            with closing(sqlite3.connect(live, timeout=0, isolation_level=None)) as held:
                try:
                    held.execute("PRAGMA journal_mode = DELETE").fetchone()
                    held.execute("BEGIN EXCLUSIVE")
                except sqlite3.OperationalError as exc:
                    raise RestoreRefused(
                        f"{live} is in use ({exc}): stop every `kept run` on it first"
                    ) from exc
                stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
                replaced = live.with_name(f"{live.name}.replaced-{stamp}")
                os.replace(live, replaced)
                os.replace(staged, live)
                held.execute("ROLLBACK")
        else:
            os.replace(staged, live)
    finally:
        with suppress(FileNotFoundError):
            staged.unlink()
    return RestoreResult(live, replaced, messages, version)


class SqliteBackup(DatabaseBackup):
    def __init__(self, path: str) -> None:
        self._path = path

    async def backup(self, target: Path) -> BackupResult:
        if self._path == ":memory:":
            raise BackupFailed("an in-memory database has nothing to back up")
        return await asyncio.to_thread(_copy, self._path, target)

    async def restore(self, source: Path) -> RestoreResult:
        if self._path == ":memory:":
            raise RestoreRefused("an in-memory database cannot be restored into")
        return await asyncio.to_thread(_restore, source, Path(self._path))
