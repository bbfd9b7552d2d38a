"""SessionLocks: one turn at a time per session, shared by the chat turns
and the heartbeat's turns so their replies never interleave.

A session's lock exists only while a turn holds it or waits for it: idle
chats leave nothing behind, however many a long-running process has seen.
asyncio.Lock wakes its waiters first-in, first-out, so turns of one session
run in arrival order. KeyedLocks is the same for any key (a Discord
channel held for its catch-up, say).

Several workers on one database (PostgreSQL) also need the session to be
theirs alone across processes: SessionLocks then takes the backend's
`SessionGuard` after its own lock, so one waiter per worker asks the database,
and a turn of one chat runs on one worker at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass
class _Entry:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # holding or waiting


class KeyedLocks(Generic[K]):
    """A lock per key that exists only while it is held or awaited."""

    def __init__(self) -> None:
        self._entries: dict[K, _Entry] = {}

    @asynccontextmanager
    async def hold(self, key: K) -> AsyncIterator[None]:
        """Run the body as the key's only holder."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[key]

    def __len__(self) -> int:
        """Keys held or waited for."""
        return len(self._entries)


class SessionGuard(Protocol):
    """Exclusion across processes, held in the database: of a session (one
    worker's turn at a time), and of a role (one leader, e.g. the one worker
    that may poll Telegram's getUpdates)."""

    def hold(self, session_key: str) -> AbstractAsyncContextManager[None]: ...

    def try_hold(self, session_key: str) -> AbstractAsyncContextManager[bool]:
        """Hold the session if no other process does (True), else do not
        wait (False)."""
        ...

    async def try_lead(self, role: str) -> bool:
        """True while this worker is `role`'s one holder: takes the role if
        no live worker holds it; asked again, says whether it still does (a
        worker that dies loses it, so another takes over)."""
        ...

    async def resign(self, role: str) -> None: ...

    async def close(self) -> None: ...


class SessionLocks(KeyedLocks[str]):
    """Per session key: the turns of one session, one at a time (in this
    process, and across workers when a `shared` guard is given)."""

    def __init__(self, shared: SessionGuard | None = None) -> None:
        super().__init__()
        self._shared = shared

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        async with super().hold(key):
            if self._shared is None:
                yield
                return
            async with self._shared.hold(key):
                yield

    @asynccontextmanager
    async def hold_unless_elsewhere(self, key: str) -> AsyncIterator[bool]:
        """Wait for this process's turn of the session, then hold it only if
        no other worker does: True when held. For work another worker may
        just as well do (a due check-in), rather than wait behind it."""
        async with super().hold(key):
            if self._shared is None:
                yield True
                return
            async with self._shared.try_hold(key) as held:
                yield held
