"""`open_backend(url)`: every store for a `storage.url`, from one backend.

The one module that knows the backends; only the composition root
(bot/services.py) calls it, so importing a port never imports a backend.
The stores it returns still have to be opened (`await backend.open()` or
`async with backend:`); they share the transcript store's connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Self

from core.commitments.jobs import ExtractionJobStore
from core.commitments.store import CommitmentStore
from core.heartbeat.store import HeartbeatStore
from core.reminders.store import ReminderStore
from core.store.base import Store
from core.store.sqlite import (
    SqliteCommitmentStore,
    SqliteExtractionJobStore,
    SqliteHeartbeatStore,
    SqliteReminderStore,
    SqliteStore,
)

_SQLITE_PREFIX = "sqlite:///"
_EXPECTED = "expected sqlite:///relative/path, sqlite:////absolute/path or sqlite:///:memory:"


@dataclass(frozen=True, slots=True)
class Backend:
    """Every store of one database. Opening or closing the transcript store
    opens or closes them all (they run on its connection)."""

    store: Store
    commitments: CommitmentStore
    heartbeat: HeartbeatStore
    reminders: ReminderStore
    extraction_jobs: ExtractionJobStore

    async def open(self) -> None:
        await self.store.open()

    async def close(self) -> None:
        await self.store.close()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def sqlite_backend(store: SqliteStore) -> Backend:
    """Every SQLite store on `store`'s connection."""
    return Backend(
        store=store,
        commitments=SqliteCommitmentStore(store),
        heartbeat=SqliteHeartbeatStore(store),
        reminders=SqliteReminderStore(store),
        extraction_jobs=SqliteExtractionJobStore(store),
    )


def open_backend(url: str, *, base_dir: Path | None = None) -> Backend:
    """Build the backend for `url` (not yet opened).

    `sqlite:///data/kept.sqlite` is relative to `base_dir` (default: the
    current directory), `sqlite:////var/lib/kept.sqlite` is absolute. Parent
    directories are created so a fresh checkout runs without setup.
    """
    if not url.startswith(_SQLITE_PREFIX):
        scheme = url.split(":", 1)[0] if ":" in url else url
        if scheme == "sqlite":
            raise ValueError(f"malformed storage URL {url!r}: {_EXPECTED}")
        raise ValueError(f"unsupported storage URL {url!r}: only SQLite is available; {_EXPECTED}")
    rest = url[len(_SQLITE_PREFIX) :]
    if rest == ":memory:":
        return sqlite_backend(SqliteStore(":memory:"))
    if rest.strip("/") == "":
        raise ValueError(f"storage URL {url!r} has no file path: {_EXPECTED}")
    if "?" in rest or "#" in rest:
        # Query parameters would be silently treated as part of the file name.
        raise ValueError(f"storage URL {url!r} must not contain '?' or '#': {_EXPECTED}")
    path = Path(rest)
    if not path.is_absolute():
        path = (base_dir if base_dir is not None else Path.cwd()) / path
    path.parent.mkdir(parents=True, exist_ok=True)
    return sqlite_backend(SqliteStore(path))
