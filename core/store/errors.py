"""Storage errors every backend shares, and what an operator should do about
one, in one line.

Backends raise their driver's errors; channels and services that must wait
out a storage outage log this hint with them instead of a traceback.
"""

from __future__ import annotations

from core.errors import KeptError

# Re-exported for the store's callers: masking lives in core/secrets.py.
from core.secrets import masked_url as masked_url

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
