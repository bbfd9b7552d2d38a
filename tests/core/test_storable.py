"""Text made storable once (core.messages.storable) where an Inbound, a
transcript row, an import row, a reminder or a follow-up is built; and the
two classes of store errors (core/store/errors.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from core.errors import MessageNotStored
from core.messages import Inbound, Target, storable
from core.store.base import ImportRow, NewMessage
from core.store.errors import REFUSED_ACTION, refused_value, root_cause, storage_action
from core.store.errors import store_error_class as cls
from core.store.sqlite.driver import sqlite3

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_lone_surrogates_become_the_replacement_character_and_nul_goes() -> None:
    assert storable("a\ud800b") == "a\ufffdb"
    assert storable("\udfffend") == "\ufffdend"
    assert storable("x\x00y\x00") == "xy"
    # A pair spelled as two surrogates is the character it spells.
    assert storable("\ud83d\ude00") == "\U0001f600"
    ordinary = "Grüße, 日本語, e\u0301\u0301\u0301, \U0001f600, tab\tnewline\n"
    assert storable(ordinary) is ordinary
    assert storable("a\ud800\x00b").encode("utf-8") == "a\ufffdb".encode()


def test_what_is_built_from_outside_text_is_storable() -> None:
    inbound = Inbound("main", Target("telegram", "1"), "private", "1", "hi\x00 \ud800", NOW)
    assert inbound.text == "hi \ufffd"
    row = NewMessage("k", "assistant", "answer\x00\udc00", NOW, payload='{"a": "\ud800"}')
    assert (row.text, row.payload) == ("answer\ufffd", '{"a": "\ufffd"}')
    assert ImportRow("k", "user", "imp\x00orted", NOW).text == "imported"


def _driver_error(text: str) -> BaseException:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (x TEXT)")
    try:
        db.execute("INSERT INTO t VALUES (?)", (text,))
    except BaseException as exc:
        return exc
    raise AssertionError("stored")


def _wrapped(cause: BaseException) -> MessageNotStored:
    try:
        raise MessageNotStored("message 5 was not stored") from cause
    except MessageNotStored as exc:
        return exc


@pytest.mark.parametrize(
    "error",
    [
        _driver_error("a\ud800"),  # SQLite: UnicodeEncodeError
        psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"),
        psycopg.errors.UntranslatableCharacter("unsupported Unicode escape sequence"),
        psycopg.errors.CheckViolation("new row violates check constraint"),
        psycopg.errors.ProgramLimitExceeded("index row size exceeds maximum"),
        sqlite3.DataError("string or blob too big"),
        sqlite3.IntegrityError("CHECK constraint failed: role"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_value_the_store_can_never_take_is_deterministic(error: BaseException) -> None:
    assert cls(error) == "deterministic"
    wrapped = _wrapped(error)
    assert wrapped.deterministic
    assert wrapped.action == REFUSED_ACTION
    assert root_cause(wrapped).startswith(type(error).__name__ + ": ")


@pytest.mark.parametrize(
    "error",
    [
        sqlite3.OperationalError("database is locked"),
        sqlite3.OperationalError("database or disk is full"),
        sqlite3.OperationalError("disk I/O error"),
        sqlite3.ProgrammingError("Cannot operate on a closed database."),
        psycopg.OperationalError("connection lost"),
        psycopg.errors.SerializationFailure("could not serialize access"),
        psycopg.errors.DeadlockDetected("deadlock detected"),
        psycopg.errors.DiskFull("could not extend file"),
        psycopg.errors.AdminShutdown("terminating connection"),
        TimeoutError(),
        RuntimeError("store is not open"),
    ],
    ids=lambda e: type(e).__name__ + ":" + str(e)[:12],
)
def test_an_outage_is_transient(error: BaseException) -> None:
    assert cls(error) == "transient"
    assert not _wrapped(error).deterministic
    assert not refused_value(error)
    assert storage_action(error) != REFUSED_ACTION


def test_the_models_answers_are_storable_where_they_come_in() -> None:
    from core.llm import Completion, ToolCall

    call = ToolCall("c1", "schedule_reminder", '{"text": "pills \ud800\x00"}')
    done = Completion("answer \udfff\x00", [call], "stop", "m")
    assert done.text == "answer \ufffd"
    assert done.tool_calls[0].arguments == '{"text": "pills \ufffd"}'
