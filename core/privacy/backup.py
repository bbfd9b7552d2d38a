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


class DatabaseBackup(abc.ABC):
    @abc.abstractmethod
    async def backup(self, target: Path) -> BackupResult:
        """Copy the database to `target` (a new file, 0600) from one
        consistent snapshot, without stopping writers; the copy passes
        `integrity_check`. Raises BackupFailed, leaving nothing at `target`
        (and a `target` that exists is never overwritten)."""
