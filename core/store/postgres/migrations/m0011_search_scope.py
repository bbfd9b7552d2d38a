"""Search rows carry their agent and the span of ids they fall in, so a
search reads only its own agent's rows, newest first
(core/store/postgres/search.py).

- `agent_id`: the session's agent, filled on write, so an agent scope is a
  column of the row rather than a join with `sessions` for every candidate.
- `span`: two lexemes generated from the two, `<agent>` and
  `<agent>:<message_id >> SPAN_BITS>` (an agent id never holds a colon: it
  is a field of the session key), in the same GIN index as `search` (a
  second column). A search names its agent, or the agent's spans in a
  range of ids, and the index intersects them with the query's lexemes
  before any row is read. (A b-tree range ANDed with the GIN bitmap would
  do the same only when the planner picks it, and its row estimates for
  bigram phrases, whose lexemes always come together, are far too low for
  that.)

The table is built again rather than updated in place: an UPDATE of every
row would write each one's lexemes into the GIN index a second time and
leave the table twice its size until a vacuum; a fresh table with its
indexes built afterwards costs one pass. Rows keep their physical order.

The GIN index keeps a short pending list (`gin_pending_list_limit`, in kB):
every statement of a search scans the whole list of entries not yet merged
into the index, and live writes merge it as they go, a small step each
time, instead of letting it grow to the 4 MB default.
"""

# Ids per span (2**SPAN_BITS); core/store/postgres/search.py builds the same
# lexemes, and a test checks the two agree.
SPAN_BITS = 14

SQL = f"""
-- Building the GIN index takes fewer passes with more memory.
SET LOCAL maintenance_work_mem = '256MB';

CREATE TABLE message_search_0007 (
    message_id  bigint NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    session_id  bigint NOT NULL,
    agent_id    text NOT NULL,
    search      tsvector NOT NULL,
    span        tsvector NOT NULL GENERATED ALWAYS AS (array_to_tsvector(
                    ARRAY[agent_id, agent_id || ':' || (message_id >> {SPAN_BITS})::text]
                )) STORED
);

INSERT INTO message_search_0007(message_id, session_id, agent_id, search)
SELECT ms.message_id, ms.session_id, s.agent_id, ms.search
FROM message_search ms JOIN sessions s ON s.id = ms.session_id;

DROP TABLE message_search;
ALTER TABLE message_search_0007 RENAME TO message_search;
ALTER TABLE message_search ADD CONSTRAINT message_search_pkey PRIMARY KEY (message_id);
ALTER TABLE message_search RENAME CONSTRAINT message_search_0007_message_id_fkey
    TO message_search_message_id_fkey;

CREATE INDEX message_search_words ON message_search USING gin (search, span)
    WITH (gin_pending_list_limit = 1024);
CREATE INDEX message_search_session ON message_search(session_id, message_id);
"""
