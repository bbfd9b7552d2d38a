"""SessionLocks: one turn at a time per session, shared by the chat turns
and the heartbeat's turns so their replies never interleave.

A session's lock exists only while a turn holds it or waits for it: idle
chats leave nothing behind, however many a long-running process has seen.
asyncio.Lock wakes its waiters first-in, first-out, so turns of one session
run in arrival order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass
class _Entry:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # holding or waiting


class SessionLocks:
    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    @asynccontextmanager
    async def hold(self, session_key: str) -> AsyncIterator[None]:
        """Run the body as the session's only turn."""
        entry = self._entries.get(session_key)
        if entry is None:
            entry = self._entries[session_key] = _Entry()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[session_key]

    def __len__(self) -> int:
        """Sessions with a turn running or waiting."""
        return len(self._entries)
