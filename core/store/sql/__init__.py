"""The store ports implemented once in SQL over a dialect (core/store/dialect.py);
each backend supplies a `Database` (database.py) and what really differs
(full-text search, migrations, PostgreSQL's locks and wake-ups).

database.py    the Database / Transaction port the backends' runners implement
app_state.py   the AppStateStore (small values the bot keeps about itself)
extraction_jobs.py  the ExtractionJobStore (the extraction queue) and the PauseStore
parked.py      ParkedUpdates (updates parked after failing while others were stored)
reminders.py   the ReminderStore
users.py       the UserZoneStore (each user's own time zone)
transcript.py  the transcript Store: sessions, messages, their lifecycle
index.py       the FullTextIndex port each backend's full-text rows implement
"""
