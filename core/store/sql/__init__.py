"""The store ports implemented once in SQL over a dialect (core/store/dialect.py);
each backend supplies a `Database` (database.py) and what really differs
(full-text search, migrations, PostgreSQL's locks and wake-ups).

database.py    the Database / Transaction port the backends' runners implement
transcript.py  the transcript Store: sessions, messages, their lifecycle
index.py       the FullTextIndex port each backend's full-text rows implement
"""
