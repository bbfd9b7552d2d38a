"""Opening the configured store from a one-shot CLI command."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bot.context import fail
from core.config import KeptConfig
from core.config_file import ConfigError, load_config
from core.store import Store, open_store


def load_or_fail(path: Path) -> KeptConfig:
    try:
        return load_config(path)
    except ConfigError as exc:
        fail(str(exc).replace("\n", "\nkept: "))


@asynccontextmanager
async def opened_store(config: KeptConfig) -> AsyncIterator[Store]:
    store = open_store(config.storage.url)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
