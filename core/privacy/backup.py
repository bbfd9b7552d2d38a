"""Backups: a consistent copy of the database taken while the bot runs.
SQLite makes its own (core/store/sqlite/backup.py); PostgreSQL has
pg_dump, which kept does not reinvent."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path

from core.errors import KeptError


class BackupFailed(KeptError):
    """The copy could not be made or did not check out; nothing is left at the target."""


@dataclass(frozen=True, slots=True)
class BackupResult:
    path: Path
    bytes: int
    messages: int  # in the copy
    schema_version: int
    seconds: float


class RestoreRefused(KeptError):
    """The backup was not restored (the database is in use, the copy is
    damaged or newer than the code); nothing was changed."""


@dataclass(frozen=True, slots=True)
class RestoreResult:
    restored: Path  # the database now holding the backup
    replaced: Path | None  # the database it replaced, kept beside it (None: there was none)
    messages: int
    schema_version: int


class DatabaseBackup(abc.ABC):
    @abc.abstractmethod
    async def backup(self, target: Path) -> BackupResult:
        """Copy the database to `target` (a new file, 0600) from one
        consistent snapshot, without stopping writers; the copy passes
        `integrity_check`. Raises BackupFailed, leaving nothing at `target`
        (and a `target` that exists is never overwritten)."""

    @abc.abstractmethod
    async def restore(self, source: Path) -> RestoreResult:
        """Put the backup at `source` in place of the database, keeping the
        replaced file beside it, only when no process (a `kept run`) has the
        database open, checked while holding it, and when the copy is intact
        and not newer than the code. Raises RestoreRefused, changing nothing.
        Works on an unopened backend: opening it would hold the database."""
