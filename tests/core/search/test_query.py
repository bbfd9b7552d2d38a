"""User text → FTS5 expressions (core.search.query)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.search.query import MAX_UNITS, build_query
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.fts import COLUMNS, TOKENIZE, session_filter
from tests.core.store.test_contract import HOSTILE_BITS, hostile_text


@pytest.mark.parametrize(
    ("text", "expression", "phrase", "terms"),
    [
        ("hello", '{words}: "hello"', None, ("hello",)),
        ("Hello WORLD", '{words}: "hello" AND {words}: "world"', '{words}: "hello world"',
         ("hello", "world")),
        ('"new york" pizza*', '{words}: "new york" AND {words}: "pizza" *', None,
         ("new", "york", "pizza")),
        ("e-mail", '{words}: "e mail"', None, ("e", "mail")),
        ("北", '{grams}: "北" *', None, ("北",)),
        ("北京", '{grams}: "北京"', None, ("北京",)),
        ("東京都", '{grams}: "東京 京都"', None, ("東京都",)),
        ('"東京 の 天気"', '{grams}: "東京 京 の 天気"', None, ("東京", "の", "天気")),
        ("北京 天气", '{grams}: "北京" AND {grams}: "天气"', '{grams}: "北京 京天 天气"',
         ("北京", "天气")),
        ("iPhoneを買った", '{words}: "iphone" AND {grams}: "を買 買っ った"', None,
         ("iphone", "を買った")),
        ("ภาษาไทย", '{grams}: "ภา าษ ษา าไ ไท ทย"', None, ("ภาษาไทย",)),
        ("İSTANBUL", '{words}: "istanbul"', None, ("istanbul",)),
        ("می\u200cخواهم", '{words}: "میخواهم"', None, ("میخواهم",)),
        ("a*", '{words}: "a"', None, ("a",)),  # a one-letter prefix is a word
        ("dup dup", '{words}: "dup"', '{words}: "dup dup"', ("dup",)),
        ('say "hi', '{words}: "say" AND {words}: "hi"', '{words}: "say hi"', ("say", "hi")),
        ("NEAR(x, 2)", '{words}: "near x" AND {words}: "2"', '{words}: "near x 2"',
         ("near", "x", "2")),
    ],
)  # fmt: skip
def test_build_query(
    text: str, expression: str, phrase: str | None, terms: tuple[str, ...]
) -> None:
    query = build_query(text)
    assert query is not None
    assert (query.expression, query.phrase, query.terms) == (expression, phrase, terms)


@pytest.mark.parametrize(
    "text", ["", "  ", "*", '"', '""', "()", "!!! ???", "😀👍🏽", "\ud800", "\u0301"]
)
def test_nothing_searchable(text: str) -> None:
    assert build_query(text) is None
    # Beside a word, the word alone is searched.
    query = build_query(f"{text} hello")
    assert query is not None and query.terms == ("hello",)


def test_huge_queries_are_bounded() -> None:
    query = build_query(" ".join(f"w{i}" for i in range(1000)))
    assert query is not None and query.expression.count(" AND ") == MAX_UNITS - 1
    long_phrase = build_query('"' + "字" * 4000 + '"')
    assert long_phrase is not None and len(long_phrase.expression) < 1000


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        f"CREATE VIRTUAL TABLE messages_fts USING fts5({', '.join(COLUMNS)}, "
        f'tokenize = "{TOKENIZE}")'
    )
    conn.execute("INSERT INTO messages_fts VALUES ('near word body x', '東京 京都 都', 's1')")
    return conn


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.one_of(hostile_text, st.text(), st.lists(st.sampled_from(HOSTILE_BITS)).map(" ".join))
)
def test_every_expression_is_valid_fts5(fts: sqlite3.Connection, text: str) -> None:
    query = build_query(text)
    if query is None:
        return
    for expression in (query.expression, query.phrase):
        if expression is None:
            continue
        fts.execute(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (expression,)
        ).fetchall()
        scoped = f"({expression}) AND {session_filter(1)}"
        fts.execute(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (scoped,)
        ).fetchall()
    assert all(term == term.strip() and term for term in query.terms)
