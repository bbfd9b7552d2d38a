"""Persistence for sessions and transcripts.

`open_store(url)` picks the backend from the configured `storage.url`; the
returned store still has to be opened (`await store.open()` or
`async with store:`).
"""

from __future__ import annotations

from pathlib import Path

from core.store.base import (
    INDEXED_KINDS,
    INDEXED_ROLES,
    DuplicateMessage,
    ImportRow,
    MessageKind,
    MessageRecord,
    NewMessage,
    Role,
    SearchHit,
    SearchScope,
    SessionRecord,
    Store,
    UnknownSession,
    is_indexed,
)
from core.store.migrations import MigrationError
from core.store.sqlite import SqliteStore

__all__ = [
    "INDEXED_KINDS",
    "INDEXED_ROLES",
    "DuplicateMessage",
    "ImportRow",
    "MessageKind",
    "MessageRecord",
    "MigrationError",
    "NewMessage",
    "Role",
    "SearchHit",
    "SearchScope",
    "SessionRecord",
    "SqliteStore",
    "Store",
    "UnknownSession",
    "is_indexed",
    "open_store",
]

_SQLITE_PREFIX = "sqlite:///"
_EXPECTED = "expected sqlite:///relative/path, sqlite:////absolute/path or sqlite:///:memory:"


def open_store(url: str, *, base_dir: Path | None = None) -> Store:
    """Build the store for `url` (not yet opened).

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
        return SqliteStore(":memory:")
    if rest.strip("/") == "":
        raise ValueError(f"storage URL {url!r} has no file path: {_EXPECTED}")
    if "?" in rest or "#" in rest:
        # Query parameters would be silently treated as part of the file name.
        raise ValueError(f"storage URL {url!r} must not contain '?' or '#': {_EXPECTED}")
    path = Path(rest)
    if not path.is_absolute():
        path = (base_dir if base_dir is not None else Path.cwd()) / path
    path.parent.mkdir(parents=True, exist_ok=True)
    return SqliteStore(path)
