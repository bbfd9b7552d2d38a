"""Storage errors every backend shares, what class a driver's error is of,
and what an operator should do about one, in one line.

Backends raise their driver's errors; channels and services that must wait
out a storage outage log this hint with them instead of a traceback.

A store error is of one of two classes (`store_error_class`). Transient: the
store cannot write now (locked, busy, disk full, connection lost, a
serialization failure, anything not known to be the value's fault); the
same write can work later, so the caller holds and retries. Deterministic:
the store can never take this value (text it cannot encode, NUL in
PostgreSQL text, a data exception, a check violation, a value too big);
retrying can only fail the same way, so the caller gives up at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from core.errors import KeptError

# Re-exported for the store's callers: masking lives in core/secrets.py.
from core.secrets import masked_url as masked_url

StoreErrorClass = Literal["transient", "deterministic"]

# DB-API 2.0 exception names that sqlite3 and psycopg share: the value, not
# the store, is at fault.
_VALUE_ERRORS = frozenset({"DataError", "IntegrityError"})
# SQLSTATE classes (PostgreSQL; psycopg's `sqlstate`): 22 data exception,
# 23 integrity constraint violation, 54 program limit exceeded (too big).
_VALUE_SQLSTATES = ("22", "23", "54")
# Driver messages that name a refused value whatever class carries them.
_VALUE_WORDS = (
    "cannot contain nul",
    "string or blob too big",
    "surrogates not allowed",
)


def _chain(error: BaseException) -> Iterator[BaseException]:
    """`error` and its causes, each once (a wrapper's cause is the driver's error)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _refuses_value(error: BaseException) -> bool:
    if isinstance(error, UnicodeError):
        return True
    sqlstate = getattr(error, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate:
        return sqlstate.startswith(_VALUE_SQLSTATES)
    if any(cls.__name__ in _VALUE_ERRORS for cls in type(error).__mro__):
        return True
    text = str(error).lower()
    return any(words in text for words in _VALUE_WORDS)


def store_error_class(error: BaseException) -> StoreErrorClass:
    """Whether retrying the write that raised `error` can ever work: see the
    module's docstring. Unknown errors are transient: held and retried (and
    parked, as a last guard, when only one update keeps failing)."""
    return "deterministic" if any(_refuses_value(e) for e in _chain(error)) else "transient"


def refused_value(error: BaseException) -> bool:
    """The store can never take the value that raised `error`."""
    return store_error_class(error) == "deterministic"


def root_cause(error: BaseException) -> str:
    """The driver's own error at the bottom of `error`, for a log line:
    `UnicodeEncodeError: 'utf-8' codec can't encode ...`."""
    *_, last = _chain(error)
    return f"{type(last).__name__}: {last}"


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


REFUSED_ACTION = (
    "none: the message holds a value the database cannot take; it was confirmed "
    "and its sender told that kept could not read it"
)


def storage_action(error: BaseException) -> str:
    if isinstance(error, StoreUnavailable):
        return error.action
    if refused_value(error):
        return REFUSED_ACTION
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
