"""Loading the config and opening the configured storage from a CLI command,
with the same clear one-line failures everywhere. The backend comes from the
composition root (bot/services.py)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bot.context import fail
from bot.services import open_storage
from core.config import KeptConfig
from core.config_env import ENV_PREFIX
from core.config_file import ConfigError, load_config
from core.store.errors import masked_url

if TYPE_CHECKING:
    from core.store.backends import Backend


def load_or_fail(path: Path) -> KeptConfig:
    """The validated config, or every problem on stderr and exit 1."""
    try:
        return load_config(path)
    except ConfigError as exc:
        # A problem with a KEPT_ variable is one line that names it; the
        # file's path would only mislead.
        if not all(line.startswith(ENV_PREFIX) for line in exc.problems):
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
        fail(f"cannot open the database {masked_url(config.storage.url)}: {exc}")
    try:
        yield backend
    finally:
        await backend.close()
