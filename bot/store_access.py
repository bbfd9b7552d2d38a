"""Loading the config and opening the configured store from a CLI command,
with the same clear one-line failures everywhere."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import click

from bot.context import fail
from core.config import KeptConfig
from core.config_file import ConfigError, load_config
from core.store import Store, open_store


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
async def opened_store(config: KeptConfig) -> AsyncIterator[Store]:
    store = open_store(config.storage.url)
    try:
        await store.open()
    except Exception as exc:  # a locked, unreadable or newer database
        fail(f"cannot open the database {config.storage.url}: {exc}")
    try:
        yield store
    finally:
        await store.close()
