"""Persistence for sessions and transcripts: the Store port and its records.

The port lives in base.py, backends in their own packages (sqlite/), and
`core.store.backends.open_backend(url)` picks one for a `storage.url`.
Importing this package never imports a backend.
"""

from core.store.base import (
    INDEXED_KINDS,
    INDEXED_ROLES,
    DuplicateMessage,
    ImportRow,
    MessageKind,
    MessageRecord,
    NewMessage,
    Role,
    SearchHit,
    SearchScope,
    SessionRecord,
    Store,
    UnknownSession,
    is_indexed,
)
from core.store.errors import MigrationError

__all__ = [
    "INDEXED_KINDS",
    "INDEXED_ROLES",
    "DuplicateMessage",
    "ImportRow",
    "MessageKind",
    "MessageRecord",
    "MigrationError",
    "NewMessage",
    "Role",
    "SearchHit",
    "SearchScope",
    "SessionRecord",
    "Store",
    "UnknownSession",
    "is_indexed",
]
