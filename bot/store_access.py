"""Loading the config and opening the configured storage from a CLI command,
with the same clear one-line failures everywhere. The backend comes from the
composition root (bot/services.py)."""

from __future__ import annotations

import sys
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bot.context import fail
from bot.services import open_storage
from core.commitments.store import CommitmentStore
from core.config import KeptConfig
from core.config_file import ConfigError, load_config
from core.reminders.store import ReminderStore
from core.store import Store

if TYPE_CHECKING:
    from core.store.backends import Backend

# The backend each store handed out by `opened_store` belongs to, so a
# command holding the transcript store can reach the other stores of the
# same database (they share its connection).
_BACKENDS: weakref.WeakKeyDictionary[Store, Backend] = weakref.WeakKeyDictionary()


def load_or_fail(path: Path) -> KeptConfig:
    """The validated config, or every problem on stderr and exit 1."""
    try:
        return load_config(path)
    except ConfigError as exc:
        click.echo(f"kept: {path} is not valid (check with `kept config validate`):", err=True)
        for line in exc.problems:
            click.echo(line, err=True)
        sys.exit(1)


@asynccontextmanager
async def opened_backend(config: KeptConfig) -> AsyncIterator[Backend]:
    """Every store of the configured database, opened; one `kept: ...` line
    and exit 1 when it cannot be opened."""
    try:
        backend = open_storage(config.storage.url)
        await backend.open()
    except Exception as exc:  # a bad URL, a locked, unreadable or newer database
        fail(f"cannot open the database {config.storage.url}: {exc}")
    try:
        yield backend
    finally:
        await backend.close()


@asynccontextmanager
async def opened_store(config: KeptConfig) -> AsyncIterator[Store]:
    async with opened_backend(config) as backend:
        _BACKENDS[backend.store] = backend
        yield backend.store


def commitment_store_for(store: Store) -> CommitmentStore:
    """The commitment store of the database `opened_store` gave `store` for."""
    return _BACKENDS[store].commitments


def make_reminder_store(store: Store) -> ReminderStore:
    """The reminder store of the database `opened_store` gave `store` for."""
    return _BACKENDS[store].reminders
