"""What one message's full-text row holds, shared by the store and migrations.

`messages_fts` (see migration 0002) has one row per active indexed message,
rowid = message id, and three columns:

- `words`: normalize(text) with unspaced-script runs blanked out, for the
  unicode61 tokenizer (diacritics removed);
- `grams`: the bigrams of those runs (core.search.ngrams);
- `session`: one token naming the message's session (`s<id>`). A session
  search ANDs it into the MATCH expression, so FTS5 intersects posting
  lists instead of the SQL joining every hit of a common word to messages
  just to drop the other sessions' rows.

Changing what a row holds means a migration that rebuilds the table (as
0002 does from `index_values`).
"""

from __future__ import annotations

from core.search.ngrams import split_columns
from core.search.normalize import normalize

COLUMNS: tuple[str, ...] = ("words", "grams", "session")

# Marks (M*) are token characters: the default set would cut Thai and
# Devanagari words at every vowel sign.
TOKENIZE = "unicode61 remove_diacritics 2 categories 'L* N* Co M*'"

INSERT = f"INSERT INTO messages_fts(rowid, {', '.join(COLUMNS)}) VALUES (?{', ?' * len(COLUMNS)})"

# bm25 weights, in COLUMNS order: the session token never scores.
BM25 = "bm25(messages_fts, 1.0, 1.0, 0.0)"


def session_token(session_id: int) -> str:
    return f"s{session_id}"


def session_filter(session_id: int) -> str:
    """An FTS5 clause matching only the rows of one session."""
    return f'{{session}}: "{session_token(session_id)}"'


def index_values(text: str, session_id: int) -> tuple[str, str, str]:
    """The column values of a message's full-text row, in COLUMNS order."""
    words, grams = split_columns(normalize(text))
    return words, grams, session_token(session_id)
