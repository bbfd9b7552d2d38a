"""Storage errors every backend shares: a schema older or newer than the
code, a database missing or replaced while open.

What class a store error is of (transient or deterministic) and what an
operator should do about one live in core/errors.py, beside MessageNotStored,
which asks both; they are re-exported here for the store's callers.
"""

from __future__ import annotations

from core.errors import REFUSED_ACTION as REFUSED_ACTION
from core.errors import KeptError
from core.errors import StoreErrorClass as StoreErrorClass
from core.errors import StoreUnavailable as StoreUnavailable
from core.errors import refused_value as refused_value
from core.errors import root_cause as root_cause
from core.errors import storage_action as storage_action
from core.errors import store_error_class as store_error_class

# Re-exported for the store's callers: masking lives in core/secrets.py.
from core.secrets import masked_url as masked_url


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


def refuse_newer(version: int, migrations: int) -> None:
    """MigrationError for a database whose schema is newer than the code's
    `migrations` steps: its rows may mean what this code cannot know."""
    if version > migrations:
        raise MigrationError(
            f"database schema version {version} is newer than this code knows "
            f"(latest migration {migrations}); refusing to open it",
            version=version,
        )


def check_schema(version: int, migrations: int) -> None:
    """For a database opened without migrating: refuse one older than the
    code (DatabaseOutdated) or newer (MigrationError)."""
    refuse_newer(version, migrations)
    if version < migrations:
        raise DatabaseOutdated(version=version, needed=migrations)


class DatabaseMissing(KeptError, FileNotFoundError):
    """A command that only reads found no database where storage.url points
    (it never creates one: a mistyped path must not leave an empty database)."""


class DatabaseReplaced(StoreUnavailable):
    """The SQLite file was deleted or replaced while kept had it open: a
    write now would go into a file that is gone at the restart."""

    action = (
        "put the database file back where storage.url points (move it back, or restore a "
        "backup and restart kept); until then no update is confirmed, and they arrive again"
    )
