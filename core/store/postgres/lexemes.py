"""kept's tokenizer for PostgreSQL: a message's `tsvector` and a query's
`tsquery`, built in Python from the same normalisation as the SQLite index.

PostgreSQL's own parser would cut Thai and Devanagari at their vowel marks
and knows nothing of kept's folding, so neither `to_tsvector` nor
`to_tsquery` is used: both sides are written as literals (`%s::tsvector`,
`%s::tsquery`), whose input functions take each quoted lexeme as it is
(`simple` semantics: no stemming, no stop words).

A document is `normalize(text)` split into the two columns of
`core.search.ngrams.split_columns`:

- word tokens are runs of letters, digits, marks and private-use
  characters (what SQLite's unicode61 tokenizer keeps with kept's
  categories), with Latin/Greek/Cyrillic diacritics folded away, as
  `remove_diacritics 2` does;
- gram tokens are the bigrams (and trailing unigrams) of unspaced scripts,
  taken whole.

Words take positions 1…n in order, grams continue after them, so `<->`
phrases behave like FTS5 phrases within each column. The two token sets
never overlap (a word token holds no gram character), so one tsvector holds
both without a column tag.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain

from core.search.ngrams import split_columns
from core.search.normalize import normalize
from core.search.query import WORDS, QueryUnit
from core.search.snippet import DIACRITICS

# PostgreSQL's limits: a lexeme of at most 2046 bytes, positions up to 16383
# (later words share the last one), and at most 1 MB of lexemes per value.
MAX_LEXEME_BYTES = 2046
MAX_POSITION = 16383
MAX_DOCUMENT_BYTES = 900_000

# Letters and digits are the only ASCII token characters.
_ASCII_WORD = re.compile(r"[0-9A-Za-z]+")

_TOKEN_CHAR: dict[str, bool] = {}


def _is_token_char(char: str) -> bool:
    known = _TOKEN_CHAR.get(char)
    if known is None:
        # unicode61 with categories 'L* N* Co M*' (core/store/sqlite/fts.py).
        category = unicodedata.category(char)
        known = category[0] in "LNM" or category == "Co"
        if len(_TOKEN_CHAR) < 100_000:
            _TOKEN_CHAR[char] = known
    return known


def _word_tokens(words: str) -> Iterator[str]:
    token: list[str] = []
    for char in words:
        if _is_token_char(char):
            token.append(char)
        elif token:
            yield "".join(token)
            token.clear()
    if token:
        yield "".join(token)


def fold_word(token: str) -> str:
    """A word token as it is indexed and searched: diacritics removed, cut to
    PostgreSQL's lexeme limit ('' when nothing is left)."""
    if not token.isascii():
        token = unicodedata.normalize(
            "NFC", DIACRITICS.sub("", unicodedata.normalize("NFD", token))
        )
    return _fit(token)


def _fit(lexeme: str) -> str:
    # A cut that is the same on both sides keeps an overlong word findable.
    data = lexeme.encode("utf-8")
    if len(data) <= MAX_LEXEME_BYTES:
        return lexeme
    return data[:MAX_LEXEME_BYTES].decode("utf-8", "ignore")


def document_lexemes(text: str) -> dict[str, list[int]]:
    """Lexeme → its positions in the message, in order."""
    words, grams = split_columns(normalize(text))
    if words.isascii():
        tokens: Iterable[str] = map(_fit, _ASCII_WORD.findall(words))
    else:
        tokens = map(fold_word, _word_tokens(words))
    found: dict[str, list[int]] = {}
    size = 0
    position = 0
    for lexeme in chain(tokens, map(_fit, grams.split())):
        if not lexeme:
            continue
        position = min(position + 1, MAX_POSITION)
        positions = found.get(lexeme)
        if positions is None:
            size += len(lexeme.encode("utf-8")) + 8
            if size > MAX_DOCUMENT_BYTES:
                break  # a pasted book: its first megabyte is searchable
            found[lexeme] = [position]
        elif positions[-1] != position:
            positions.append(position)
    return found


def quote_lexeme(lexeme: str) -> str:
    """A lexeme as a quoted tsvector/tsquery literal."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_literal(text: str) -> str:
    """The `tsvector` input for a message's text ('' for no lexeme)."""
    return " ".join(
        f"{quote_lexeme(lexeme)}:{','.join(map(str, positions))}"
        for lexeme, positions in document_lexemes(text).items()
    )


def _unit_lexemes(unit: QueryUnit) -> list[str]:
    if unit.column == WORDS:
        return [lexeme for lexeme in map(fold_word, unit.tokens) if lexeme]
    return [lexeme for lexeme in map(_fit, unit.tokens) if lexeme]


def unit_tsquery(unit: QueryUnit) -> str | None:
    """One unit as a tsquery phrase (`'a' <-> 'b':*`); None when folding
    left nothing of it."""
    lexemes = _unit_lexemes(unit)
    if not lexemes:
        return None
    parts = [quote_lexeme(lexeme) for lexeme in lexemes]
    if unit.prefix:
        parts[-1] += ":*"
    return "(" + " <-> ".join(parts) + ")"


def query_tsquery(units: Sequence[QueryUnit]) -> str | None:
    """Every unit ANDed; None when nothing searchable is left."""
    parts = [p for p in map(unit_tsquery, units) if p is not None]
    return " & ".join(dict.fromkeys(parts)) if parts else None
