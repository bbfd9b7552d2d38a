"""User text → FTS5 expressions over the `words` and `grams` columns.

A query is text, never FTS syntax. It is read as a list of items:

- a bare word (`budget`, `e-mail`, `東京タワー`); a trailing `*` asks for a prefix;
- a "quoted phrase", whose words must appear in this order, next to each other.

Items are ANDed. Each item is normalised with the index's `normalize()` and
cut into *units*: runs of word tokens go to the `words` column as one FTS5
phrase, runs of unspaced scripts (CJK, Thai…) go to the `grams` column as a
phrase of their bigrams (see `core.search.ngrams`). Every unit is written as
a quoted FTS5 string behind a column filter, so operators typed by the user
(AND, NEAR(, -x, col:x, parentheses, ^) are only ever searched for as text,
and a unit without a single token character is dropped (an empty FTS5
phrase silently matches nothing, even inside an AND).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from core.search.ngrams import is_gram_char, run_tokens
from core.search.normalize import normalize

WORDS = "words"
GRAMS = "grams"

# Bounds that keep a 4 KB paste from becoming a pathological FTS5 query;
# past them the query only gets looser (fewer ANDed units), never invalid.
MAX_UNITS = 24
MAX_PHRASE_TOKENS = 48
# A one-letter prefix ("a*") would merge the posting lists of a sizeable part
# of the vocabulary; such a word is searched as written instead.
MIN_WORD_PREFIX = 2


@dataclass(frozen=True, slots=True)
class QueryUnit:
    """One ANDed unit as tokens, for a backend that builds its own query
    syntax (PostgreSQL's tsquery) instead of FTS5's."""

    column: str  # WORDS or GRAMS
    # Words as typed (a backend folds them as it folds indexed words), or
    # grams-column tokens; matched as a phrase, in order.
    tokens: tuple[str, ...]
    prefix: bool  # the last token is a prefix


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What the store needs to run one search."""

    # Every unit ANDed, e.g. `{words}: "new york" AND {grams}: "东京 京都"`.
    expression: str
    # The whole query as one phrase, when it has several units in one column
    # and no prefix: messages matching it rank above the rest.
    phrase: str | None
    # Normalised words and unspaced-script runs, for snippets.
    terms: tuple[str, ...]
    # The same two as tokens: `units` are what `expression` ANDs, `phrase_unit`
    # is what `phrase` matches.
    units: tuple[QueryUnit, ...] = ()
    phrase_unit: QueryUnit | None = None


@dataclass(slots=True)
class _Unit:
    column: str
    # Words (for `words`) or runs (for `grams`), in order.
    parts: list[str]
    prefix: bool = False


def _quote(tokens: list[str]) -> str:
    return '"' + " ".join(tokens).replace('"', '""') + '"'


def _is_token_char(char: str) -> bool:
    # unicode61 with categories 'L* N* Co M*' (see core/store/sqlite/fts.py). Marks
    # count, so Thai and Devanagari words stay whole.
    category = unicodedata.category(char)
    return category[0] in "LNM" or category == "Co"


def _has_base(word: str) -> bool:
    # remove_diacritics may empty a token of combining marks alone.
    return any(_is_token_char(ch) and unicodedata.category(ch)[0] != "M" for ch in word)


def _units(normalized: str) -> list[_Unit]:
    """Cut one normalised item into column units.

    Consecutive tokens of one column form one unit, whatever separates them:
    the words of "new, york" are one phrase, and so are "e-mail"'s. Items
    never contain the spaces that separate bare words (see `_split_items`).
    """
    units: list[_Unit] = []
    token: list[str] = []
    column: str | None = None

    def flush() -> None:
        if not token:
            return
        text = "".join(token)
        token.clear()
        if column == WORDS and not _has_base(text):
            return
        if column is None:
            return
        if units and units[-1].column == column:
            units[-1].parts.append(text)
        else:
            units.append(_Unit(column, [text]))

    for char in normalized:
        if is_gram_char(char):
            kind: str | None = GRAMS
        elif _is_token_char(char):
            kind = WORDS
        else:
            kind = None
        if kind != column:
            flush()
            column = kind
        if kind is not None:
            token.append(char)
    flush()
    return units


def _gram_tokens(runs: list[str], prefix: bool) -> tuple[list[str], bool]:
    """Grams-column tokens of consecutive runs, matching how they were indexed.

    A run that ends inside the phrase was followed by a break in the indexed
    text too, so its trailing unigram is part of the phrase; the last run may
    continue in the message, so it is matched by its bigrams only. A last run
    of one character has no bigram: it becomes a prefix, which matches both
    the bigrams it starts and a trailing unigram.
    """
    tokens: list[str] = []
    for run in runs[:-1]:
        tokens.extend(run_tokens(run))
    last = runs[-1]
    if len(last) == 1:
        tokens.append(last)
        prefix = True
    else:
        tokens.extend(last[i : i + 2] for i in range(len(last) - 1))
    return tokens, prefix


def _query_unit(unit: _Unit) -> QueryUnit:
    if unit.column == WORDS:
        tokens = unit.parts[:MAX_PHRASE_TOKENS]
        prefix = unit.prefix and len(tokens[-1]) >= MIN_WORD_PREFIX
    else:
        tokens, prefix = _gram_tokens(unit.parts, unit.prefix)
        tokens = tokens[:MAX_PHRASE_TOKENS]
        # A cut phrase keeps its head; its prefix mark belonged to the tail.
        prefix = prefix and len(tokens) < MAX_PHRASE_TOKENS
    return QueryUnit(unit.column, tuple(tokens), prefix)


def _expression(unit: QueryUnit) -> str:
    return f"{{{unit.column}}}: {_quote(list(unit.tokens))}" + (" *" if unit.prefix else "")


def _split_items(text: str) -> list[tuple[str, bool]]:
    """(text, is_phrase) items; an unpaired quote is just a separator."""
    pieces = text.split('"')
    if len(pieces) % 2 == 0:
        pieces[-2:] = [pieces[-2] + " " + pieces[-1]]
    items: list[tuple[str, bool]] = []
    for index, piece in enumerate(pieces):
        if index % 2:
            items.append((piece, True))
        else:
            items.extend((word, False) for word in piece.split())
    return items


def _phrase_of_all(units: list[_Unit]) -> QueryUnit | None:
    if len(units) < 2 or any(u.prefix for u in units):
        return None
    columns = {u.column for u in units}
    if len(columns) != 1:
        return None
    if columns == {WORDS}:
        return _query_unit(_Unit(WORDS, [p for u in units for p in u.parts]))
    # Unspaced scripts are written without spaces, so "北京 天气" as a phrase
    # is the run "北京天气".
    return _query_unit(_Unit(GRAMS, ["".join(p for u in units for p in u.parts)]))


def build_query(text: str) -> SearchQuery | None:
    """Parse user text; None when it holds nothing searchable."""
    # Lone surrogates cannot be encoded for SQLite, and carry no words anyway.
    text = text.encode("utf-8", "ignore").decode("utf-8")
    units: list[_Unit] = []
    for item, is_phrase in _split_items(text):
        prefix = not is_phrase and item.endswith("*")
        item_units = _units(normalize(item.rstrip("*") if prefix else item))
        if item_units and prefix:
            item_units[-1].prefix = True
        units.extend(item_units)
    query_units = tuple(dict.fromkeys(_query_unit(u) for u in units))[:MAX_UNITS]
    if not query_units:
        return None
    terms = tuple(dict.fromkeys(p for u in units for p in u.parts))
    phrase = _phrase_of_all(units)
    return SearchQuery(
        " AND ".join(map(_expression, query_units)),
        None if phrase is None else _expression(phrase),
        terms,
        query_units,
        phrase,
    )
