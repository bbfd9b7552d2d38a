"""Storage failures injected at the store boundary, for the tests that show
a message nobody could store is never confirmed and never lost."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from core.limits.store import Admission, Admitted
from core.store import MessageRecord, NewMessage, Store
from core.store.sqlite.driver import sqlite3

DISK_FULL = "database or disk is full"


class DiskFull:
    """While `active`, storing a user message (of `sessions`, or any) or an
    edit fails as SQLite fails on a full disk; `failures` counts the refusals."""

    def __init__(self, store: Store, *, sessions: Collection[str] | None = None) -> None:
        self.active = True
        self.failures = 0
        self._sessions = sessions
        real = store.add_message

        async def add_message(message: NewMessage) -> MessageRecord:
            if self.active and message.role == "user" and self._matches(message.session_key):
                self.failures += 1
                raise sqlite3.OperationalError(DISK_FULL)
            return await real(message)

        real_admit = store.admit_message

        async def admit_message(
            message: NewMessage, admission: Admission
        ) -> tuple[MessageRecord, Admitted]:
            # The same message, stored with its limits decided (core/limits/).
            if self.active and message.role == "user" and self._matches(message.session_key):
                self.failures += 1
                raise sqlite3.OperationalError(DISK_FULL)
            return await real_admit(message, admission)

        real_edit = store.edit_message

        async def edit_message(**fields: Any) -> MessageRecord | None:
            if self.active and self._sessions is None:
                self.failures += 1
                raise sqlite3.OperationalError(DISK_FULL)
            return await real_edit(**fields)

        store.add_message = add_message  # type: ignore[method-assign]
        store.admit_message = admit_message  # type: ignore[method-assign]
        store.edit_message = edit_message  # type: ignore[method-assign]

    def _matches(self, session_key: str) -> bool:
        return self._sessions is None or session_key in self._sessions


class Unstorable:
    """Storing a user message of `sessions` hands the real store its text with
    `poison` added after core made it storable: the backend's driver refuses
    it as it refuses such text for real (SQLite: a lone surrogate cannot be
    encoded; PostgreSQL: text cannot hold NUL). `attempts` counts the tries."""

    def __init__(self, store: Store, *, sessions: Collection[str], poison: str) -> None:
        self.attempts = 0
        real = store.add_message

        async def add_message(message: NewMessage) -> MessageRecord:
            if message.role == "user" and message.session_key in sessions:
                self.attempts += 1
                # Past NewMessage's own cleaning, as text that skipped it would be.
                object.__setattr__(message, "text", message.text + poison)
            return await real(message)

        real_admit = store.admit_message

        async def admit_message(
            message: NewMessage, admission: Admission
        ) -> tuple[MessageRecord, Admitted]:
            if message.role == "user" and message.session_key in sessions:
                self.attempts += 1
                object.__setattr__(message, "text", message.text + poison)
            return await real_admit(message, admission)

        store.add_message = add_message  # type: ignore[method-assign]
        store.admit_message = admit_message  # type: ignore[method-assign]
