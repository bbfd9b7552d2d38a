"""KeptError: the root of kept's own exceptions; what class a store error is
of; and MessageNotStored, what a channel is told when a message could not
be stored.

Every error kept raises on purpose (a bad config, a model that failed, a
store refusal, a channel that cannot start) derives from KeptError, so a
caller that must tell kept's errors from bugs and library failures catches
one class.

A store error is of one of two classes (`store_error_class`). Transient: the
store cannot write now (locked, busy, disk full, connection lost, a
serialization failure, anything not known to be the value's fault); the
same write can work later, so the caller holds and retries. Deterministic:
the store can never take this value (text it cannot encode, NUL in
PostgreSQL text, a data exception, a check violation, a value too big);
retrying can only fail the same way, so the caller gives up at once. Both
are read from the exception chain alone (driver class names, SQLSTATE,
message words), so nothing here imports a store or a driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal


class KeptError(Exception):
    """An error kept raises on purpose; its message says what to fix."""


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


class StoreUnavailable(KeptError, ConnectionError):
    """Transient: the store cannot take writes now, and may again later
    (after an operator's fix or a restart). Nothing that depends on the
    write may be confirmed; the work is held and retried, never dropped."""

    transient = True
    action = "kept retries on its own"


class MessageNotStored(KeptError):
    """`handle` could not store the incoming message, or `edit` / `delete`
    could not store their change (database locked past its busy timeout, disk
    full, I/O error). Nothing was answered; the channel must not confirm the
    message to its platform, and should offer it again once storage
    recovers. The store's own error is the `__cause__`."""

    @property
    def action(self) -> str:
        """What the operator should do, for the log line."""
        return storage_action(self.__cause__ or self)

    @property
    def deterministic(self) -> bool:
        """The store refused a value it can never take (not an outage):
        retrying cannot help, so the channel confirms the message instead of
        holding it."""
        return refused_value(self.__cause__ or self)
