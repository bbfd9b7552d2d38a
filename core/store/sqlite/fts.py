"""What one message's full-text row holds, shared by the store and migrations.

`messages_fts` (see steps 2 and 6) has one row per active indexed
message, and three columns:

- `words`: normalize(text) with unspaced-script runs blanked out, for the
  unicode61 tokenizer (diacritics removed);
- `grams`: the bigrams of those runs (core.search.ngrams);
- `session`: one token naming the message's session (`s<id>`). A session
  search ANDs it into the MATCH expression, so FTS5 intersects posting
  lists instead of the SQL joining every hit of a common word to messages
  just to drop the other sessions' rows.

Its rowid is `slot * AGENT_SPAN + message id`, where the slot is the
agent's number (table `agents`, copied to `sessions.agent_slot`): each
agent's rows form one rowid range, so an agent-wide search is a range that
FTS5 seeks to in each posting list instead of a per-candidate check.

Changing what a row holds means a step that rebuilds the table (as step 2
does from `index_values`).
"""

from __future__ import annotations

from core.search.ngrams import split_columns
from core.search.normalize import normalize

COLUMNS: tuple[str, ...] = ("words", "grams", "session")

# Marks (M*) are token characters: the default set would cut Thai and
# Devanagari words at every vowel sign.
TOKENIZE = "unicode61 remove_diacritics 2 categories 'L* N* Co M*'"

# Message ids stay far below this (2^40, about a trillion).
AGENT_SPAN = 1 << 40


def rowid_sql(session_id: str, message_id: str) -> str:
    """SQL for the index rowid of a message, from SQL expressions naming its
    session id and its id."""
    return (
        f"(SELECT agent_slot FROM sessions WHERE id = {session_id}) * {AGENT_SPAN} + {message_id}"
    )


# Parameters: message id, session id, then index_values().
INSERT = (
    f"INSERT INTO messages_fts(rowid, {', '.join(COLUMNS)}) "
    f"VALUES ({rowid_sql('?2', '?1')}, ?3, ?4, ?5)"
)

# bm25 weights, in COLUMNS order: the session token never scores.
BM25 = "bm25(messages_fts, 1.0, 1.0, 0.0)"


def session_token(session_id: int) -> str:
    return f"s{session_id}"


def session_filter(session_id: int) -> str:
    """An FTS5 clause matching only the rows of one session."""
    return f'{{session}}: "{session_token(session_id)}"'


def agent_range(slot: int) -> tuple[int, int]:
    """[low, high) of the rowids of one agent's rows."""
    return slot * AGENT_SPAN, (slot + 1) * AGENT_SPAN


def index_values(text: str, session_id: int) -> tuple[str, str, str]:
    """The column values of a message's full-text row, in COLUMNS order."""
    words, grams = split_columns(normalize(text))
    return words, grams, session_token(session_id)
