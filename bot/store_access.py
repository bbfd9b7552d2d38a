"""Loading the config and opening the configured storage from a CLI command,
with the same clear one-line failures everywhere. The backend comes from the
composition root (bot/services.py)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from bot.context import fail
from bot.services import open_storage
from core.config.env import ENV_PREFIX
from core.config.file import ConfigError, load_config
from core.config.model import KeptConfig
from core.store.errors import DatabaseMissing, DatabaseOutdated, masked_url, storage_action

T = TypeVar("T")

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


MISSING_HINT = "run `kept run` or `kept chat` once to create it, or fix storage.url"


@asynccontextmanager
async def opened_backend(config: KeptConfig, *, create: bool = False) -> AsyncIterator[Backend]:
    """Every store of the configured database, opened; one `kept: ...` line
    and exit 1 when it cannot be opened. Commands that read never create a
    database (nor its directory): a mistyped storage.url is reported as a
    missing database. `create=True` for those that write (import, run)."""
    try:
        backend = open_storage(config.storage.url, create=create)
        await backend.open()
    except DatabaseMissing as exc:
        fail(f"{exc}; {MISSING_HINT}")
    except DatabaseOutdated as exc:
        fail(f"{masked_url(config.storage.url)}: {exc}")
    except Exception as exc:  # a bad URL, a locked, unreadable or newer database
        fail(open_failure(config, exc))
    try:
        yield backend
    finally:
        await backend.close()


def on_backend(config: KeptConfig, work: Callable[[Backend], Awaitable[T]]) -> T:
    """`work` on the opened backend, from a command's synchronous body."""

    async def main() -> T:
        async with opened_backend(config) as backend:
            return await work(backend)

    return asyncio.run(main())


def open_failure(config: KeptConfig, exc: BaseException) -> str:
    """One line for a database that cannot be created, opened or written."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return (
        f"cannot open the database {masked_url(config.storage.url)}: {reason}; "
        f"{storage_action(exc).removesuffix('; kept retries on its own')}"
    )


WRITE_PROBE_KEY = "kept.write_probe"


async def probe_write(backend: Backend, stamp: str) -> None:
    """One small real write: proves the database takes writes (a read-only
    file or a full disk fails here, not at the first message)."""
    await backend.app_state.put(WRITE_PROBE_KEY, stamp)


async def check_storage_writable(config: KeptConfig, stamp: str) -> None:
    """`kept run` / `kept chat` before starting: the storage location is
    created (as on every start) and takes a write, or one line and exit 1."""
    try:
        async with opened_backend(config, create=True) as backend:
            await probe_write(backend, stamp)
    except Exception as exc:
        fail(open_failure(config, exc))
