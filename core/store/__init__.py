"""Persistence for sessions and transcripts: the Store port and its records.

The port lives in base.py, backends in their own packages (sqlite/), and
`core.store.backends.open_backend(url)` picks one for a `storage.url`.
Importing this package never imports a backend.
"""

from core.store.base import (
    DuplicateMessage,
    ImportRow,
    MessageRecord,
    NewMessage,
    SearchHit,
    SearchScope,
    Store,
    UnknownSession,
)
from core.store.errors import MigrationError

__all__ = [
    "DuplicateMessage",
    "ImportRow",
    "MessageRecord",
    "MigrationError",
    "NewMessage",
    "SearchHit",
    "SearchScope",
    "Store",
    "UnknownSession",
]
