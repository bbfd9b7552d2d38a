"""Storage errors every backend shares, and what an operator should do about
one, in one line.

Backends raise their driver's errors; channels and services that must wait
out a storage outage log this hint with them instead of a traceback.
"""

from __future__ import annotations

import re

from core.errors import KeptError

_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("locked", "busy"),
        "another process holds the database's write lock: run one kept per SQLite file "
        "(several workers need PostgreSQL); kept retries on its own",
    ),
    (("full", "no space"), "free disk space where storage.url points; kept retries on its own"),
    (
        ("readonly", "read-only", "permission", "access"),
        "make the database file and its directory writable by kept; kept retries on its own",
    ),
)
_DEFAULT = "check the database at storage.url and its disk; kept retries on its own"


def storage_action(error: BaseException) -> str:
    if isinstance(error, StoreUnavailable):
        return error.action
    text = str(error).lower()
    for words, hint in _HINTS:
        if any(word in text for word in words):
            return hint
    return _DEFAULT


class MigrationError(KeptError, RuntimeError):
    """A migration failed (and was rolled back), or the schema is unusable."""

    def __init__(self, message: str, *, version: int | None = None) -> None:
        super().__init__(message)
        self.version = version


class DatabaseOutdated(KeptError, RuntimeError):
    """A command other than `kept run` / `kept chat` / `kept import` found a
    database whose schema is older than this code: it never changes the
    schema (an older worker may still be running on it), so it stops here."""

    def __init__(self, *, version: int, needed: int) -> None:
        super().__init__(
            f"the database has schema version {version} and this kept needs {needed}: "
            "start `kept run` (or `kept chat`) once to upgrade it"
        )
        self.version = version
        self.needed = needed


def check_schema(version: int, migrations: int) -> None:
    """For a database opened without migrating: refuse one older than the
    code (DatabaseOutdated) or newer (MigrationError)."""
    if version > migrations:
        raise MigrationError(
            f"database schema version {version} is newer than this code knows "
            f"(latest migration {migrations}); refusing to open it",
            version=version,
        )
    if version < migrations:
        raise DatabaseOutdated(version=version, needed=migrations)


class DatabaseMissing(KeptError, FileNotFoundError):
    """A command that only reads found no database where storage.url points
    (it never creates one: a mistyped path must not leave an empty database)."""


# scheme://user:password@ — a password in a URL cannot hold "@" unencoded.
_PASSWORD = re.compile(r"^([A-Za-z][\w+.-]*://[^:/@]*):[^@/]*@")


def masked_url(url: str) -> str:
    """`url` fit for a message or a log line: its password masked."""
    return _PASSWORD.sub(r"\1:***@", url, count=1)


class StoreUnavailable(KeptError, ConnectionError):
    """Transient: the store cannot take writes now, and may again later
    (after an operator's fix or a restart). Nothing that depends on the
    write may be confirmed; the work is held and retried, never dropped."""

    transient = True
    action = "kept retries on its own"


class DatabaseReplaced(StoreUnavailable):
    """The SQLite file was deleted or replaced while kept had it open: a
    write now would go into a file that is gone at the restart."""

    action = (
        "put the database file back where storage.url points (move it back, or restore a "
        "backup and restart kept); until then no update is confirmed, and they arrive again"
    )
