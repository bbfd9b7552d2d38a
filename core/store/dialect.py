"""What differs between SQLite and PostgreSQL inside SQL written once
(core/store/sql/): placeholders, how a time is stored, booleans, and the
clause that claims rows another worker may be claiming; and, for migration
DDL written once (core/store/migration_ddl.py), the column types.

SQL under core/store/sql/ is written with `?` placeholders, times bound
through `time()` and read back through `from_time()`, and truth bound as a
parameter or compared with `TRUE`/`FALSE` spelt by the dialect. A backend's
runner hands every statement through `sql()` before it reaches the driver.
Everything else both databases read alike: `ON CONFLICT … DO UPDATE` with
`excluded`, `RETURNING`, `count(*)`, `coalesce`, `IN (…)`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Literal

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def _refuse_naive(value: datetime) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        # A naive time is ambiguous; storing it as UTC would silently shift it.
        raise ValueError(f"naive datetime {value!r}: the store needs timezone-aware times")


def to_ms(value: datetime) -> int:
    """Aware datetime → integer milliseconds since the epoch (UTC): how
    SQLite stores a time."""
    _refuse_naive(value)
    return (value - _EPOCH) // _MS


def from_ms(value: int) -> datetime:
    return _EPOCH + value * _MS


def utc(value: datetime) -> datetime:
    """An aware datetime as UTC; a naive one is refused."""
    _refuse_naive(value)
    return value.astimezone(UTC)


def placeholders(count: int) -> str:
    """`?, ?, ?` for an `IN (…)` list or a VALUES row of `count` values."""
    return ", ".join("?" * count)


# The words of migration DDL (`Dialect.ddl`) as SQLite, then PostgreSQL spell
# them. SQLite stores a time as INTEGER milliseconds since the epoch, UTC
# (`to_ms`), and its INTEGER PRIMARY KEY is the rowid, assigned on insert.
_DDL_WORDS = {
    "text": ("TEXT", "text"),
    "integer": ("INTEGER", "integer"),
    "bigint": ("INTEGER", "bigint"),
    "real": ("REAL", "double precision"),
    "time": ("INTEGER", "timestamptz"),
    "generated_id": ("INTEGER PRIMARY KEY", "bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
    "without_rowid": (" WITHOUT ROWID", ""),
}


def _ddl_words(spelling: int) -> Mapping[str, str]:
    return MappingProxyType({word: spelt[spelling] for word, spelt in _DDL_WORDS.items()})


class Dialect:
    """The part of a statement or a value that one database spells its own way."""

    name: Literal["sqlite", "postgres"]
    # Appended to a SELECT that picks rows to claim: PostgreSQL locks them
    # and passes over rows another transaction holds; SQLite has one writer
    # at a time, so its transaction already excludes every other claimer.
    skip_locked: str
    true: str
    false: str
    # Whether `UPDATE … FROM (…) AS t … RETURNING` may return t's columns
    # (the rows as they were before the update): PostgreSQL's can, SQLite's
    # returns only the updated table's.
    returning_from: bool
    # One millisecond, added to a stored time (`last_fired_at + …`).
    millisecond: str

    def sql(self, text: str) -> str:
        """`text` as the driver takes it."""
        raise NotImplementedError

    def time(self, value: datetime) -> Any:
        """An aware datetime as this database stores it."""
        raise NotImplementedError

    def from_time(self, value: Any) -> datetime:
        """A stored time as an aware datetime in UTC."""
        raise NotImplementedError

    def maybe_time(self, value: datetime | None) -> Any:
        return None if value is None else self.time(value)

    def from_maybe_time(self, value: Any) -> datetime | None:
        return None if value is None else self.from_time(value)

    # `a <null_safe_equal> b`: equal, or both NULL. SQLite spells it `IS`
    # (`IS NOT DISTINCT FROM` only since 3.39); PostgreSQL's `IS` takes no
    # expression on its right.
    null_safe_equal: str

    def in_list(self, values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        """`IN (?, ?, …)` for a non-empty list, with its parameters."""
        return f"IN ({placeholders(len(values))})", tuple(values)

    def unindexed(self, column: str) -> str:
        """`column` in a WHERE term the planner is not to answer from an
        index on it (where another index is the better way in)."""
        return column

    # Appended to a SELECT whose rows the transaction goes on to change:
    # PostgreSQL locks them; SQLite's one writer already holds them.
    for_update: str
    # Joins its right side after its left, as written: SQLite's planner
    # takes CROSS JOIN as that order; PostgreSQL orders joins itself.
    join_in_order: str

    # The function that returns the larger of its arguments.
    greatest_function: str

    def greatest(self, left: str, right: str) -> str:
        """SQL for the larger of two expressions."""
        return f"{self.greatest_function}({left}, {right})"

    def as_number(self, text: str) -> str:
        """SQL ordering the text expression `text` by its integer value;
        text that is not a number sorts below every number."""
        raise NotImplementedError

    # The attribute of a driver's exception that names its error, read
    # without importing the driver, and the names of the two constraint
    # violations the stores tell apart.
    error_attribute: str
    unique_violation: str
    foreign_key_violation: str

    def is_unique_violation(self, exc: BaseException) -> bool:
        """Whether the driver's `exc` is a unique constraint refusing a row."""
        return getattr(exc, self.error_attribute, None) == self.unique_violation

    def is_foreign_key_violation(self, exc: BaseException) -> bool:
        return getattr(exc, self.error_attribute, None) == self.foreign_key_violation

    # What `ddl` fills in.
    ddl_words: Mapping[str, str]

    def ddl(self, template: str, **own: str) -> str:
        """A migration's DDL `template` in this database's words: the column
        types `{text}`, `{integer}`, `{bigint}`, `{real}` and `{time}`,
        `{generated_id}` (an id the database assigns, the primary key),
        `{without_rowid}` closing a table SQLite keeps in primary key order,
        and the step's `own` words (a column each backend defines its way)."""
        return template.format_map({**self.ddl_words, **own})


class SqliteDialect(Dialect):
    name = "sqlite"
    skip_locked = ""
    true = "1"
    false = "0"
    returning_from = False
    millisecond = "1"

    def sql(self, text: str) -> str:
        return text

    def time(self, value: datetime) -> int:
        return to_ms(value)

    def from_time(self, value: Any) -> datetime:
        return from_ms(value)

    null_safe_equal = "IS"

    def unindexed(self, column: str) -> str:
        # A unary plus makes the term unusable for an index on the column.
        return f"+{column}"

    for_update = ""
    join_in_order = "CROSS JOIN"

    greatest_function = "max"

    def as_number(self, text: str) -> str:
        # CAST makes text that is not a number 0.
        return f"CAST({text} AS INTEGER)"

    error_attribute = "sqlite_errorname"
    unique_violation = "SQLITE_CONSTRAINT_UNIQUE"
    foreign_key_violation = "SQLITE_CONSTRAINT_FOREIGNKEY"

    # pysqlite3 (core/store/sqlite/driver.py) reports the primary result
    # code, SQLITE_CONSTRAINT, for every constraint; SQLite's message then
    # says which one, in words it has kept since 3.8.2.
    def is_unique_violation(self, exc: BaseException) -> bool:
        return super().is_unique_violation(exc) or _constraint(exc, "UNIQUE constraint failed")

    def is_foreign_key_violation(self, exc: BaseException) -> bool:
        return super().is_foreign_key_violation(exc) or _constraint(
            exc, "FOREIGN KEY constraint failed"
        )

    ddl_words = _ddl_words(0)


def _constraint(exc: BaseException, words: str) -> bool:
    named = getattr(exc, SqliteDialect.error_attribute, None) == "SQLITE_CONSTRAINT"
    return named and str(exc).startswith(words)


@lru_cache(maxsize=2048)
def _format_style(text: str) -> str:
    # psycopg takes %s and reads a lone % as the start of one.
    return text.replace("%", "%%").replace("?", "%s")


class PostgresDialect(Dialect):
    name = "postgres"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    true = "TRUE"
    false = "FALSE"
    returning_from = True
    millisecond = "interval '1 millisecond'"

    def sql(self, text: str) -> str:
        return _format_style(text)

    def time(self, value: datetime) -> datetime:
        # Refused when naive: PostgreSQL would read it in the session's zone.
        _refuse_naive(value)
        return value

    def from_time(self, value: Any) -> datetime:
        # psycopg returns timestamptz in the session's zone (UTC, as a
        # ZoneInfo); records carry datetime.UTC on both backends.
        return utc(value)

    null_safe_equal = "IS NOT DISTINCT FROM"

    def in_list(self, values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        # One array parameter however long the list.
        return "= ANY(?)", (list(values),)

    for_update = " FOR UPDATE"
    join_in_order = "JOIN"

    greatest_function = "greatest"

    def as_number(self, text: str) -> str:
        # NULL (sorted last by the caller's NULLS LAST) for text that is not a number.
        return f"CASE WHEN {text} ~ '^[0-9]{{1,30}}$' THEN {text}::numeric END"

    # SQLSTATEs of psycopg's errors.
    error_attribute = "sqlstate"
    unique_violation = "23505"
    foreign_key_violation = "23503"

    ddl_words = _ddl_words(1)


SQLITE = SqliteDialect()
POSTGRES = PostgresDialect()
