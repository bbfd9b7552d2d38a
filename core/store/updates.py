"""The update queue's port: platform updates handed from the one worker that
receives them to every worker, through the database.

A platform that allows one consumer per bot (Telegram's getUpdates) is
polled by one worker; with several workers it writes each update here and
may confirm it to the platform once `put` returned (the row is committed).
Every worker then claims the updates of a chat and processes them.

The payload is opaque here: the platform's own update, as the channel
serialised it. A chat's updates are processed in order and by one worker at
a time: a chat whose oldest update is under another worker's live claim is not
claimable, so a chat's later updates wait behind its earlier ones. A worker
that dies leaves its claims to expire (its lease, on the injected clock);
one that stops releases them.

Only a backend shared by several processes has one (PostgreSQL); with SQLite
a single process keeps its updates in memory.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

# A processed update's id is kept this long, so the same update put again (a
# poller that died between writing it and confirming it to the platform) is
# a no-op: Telegram keeps an unconfirmed update for 24 hours at most.
DONE_RETENTION = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class NewUpdate:
    update_id: int  # the platform's id, unique per source
    # What must be processed in order, by one worker at a time: the chat
    # (e.g. `chat:42`), kept in the column `lane`.
    chat_key: str
    payload: str  # the platform's update, opaque to core


@dataclass(frozen=True, slots=True)
class QueuedUpdate:
    id: int  # the queue's own id: the order updates were put in
    update_id: int
    chat_key: str
    payload: str


class UpdateQueue(abc.ABC):
    @abc.abstractmethod
    async def put(self, source: str, updates: Sequence[NewUpdate], *, now: datetime) -> int:
        """Store the updates of `source` (a platform and bot, e.g.
        `telegram:4242`) durably, in order, and wake the listeners; an update
        id already put is skipped. Returns how many were new. Raises when they
        could not be stored: nothing may be confirmed to the platform then."""

    @abc.abstractmethod
    async def claim(
        self,
        source: str,
        *,
        worker: str,
        now: datetime,
        lease_until: datetime,
        chats: int,
    ) -> list[QueuedUpdate]:
        """Claim every waiting update of up to `chats` chats, oldest chat
        first, for `worker` until `lease_until`. A chat is claimable when its
        oldest waiting update is unclaimed or its lease ran out before `now`;
        a chat under another live claim is skipped, never waited for.
        Returned in queue order."""

    @abc.abstractmethod
    async def renew(self, ids: Sequence[int], *, worker: str, lease_until: datetime) -> list[int]:
        """Extend `worker`'s claim on the updates it still holds; returns the
        ids it does (one missing was taken over after its lease ran out)."""

    @abc.abstractmethod
    async def done(self, ids: Sequence[int], *, now: datetime) -> None:
        """The updates are safe (stored, handled, or judged irrelevant):
        never hand them out again, and drop their payload. Their ids are
        remembered for DONE_RETENTION so a repeat `put` is a no-op."""

    @abc.abstractmethod
    async def release(self, *, worker: str) -> int:
        """Give up every update `worker` holds (at stop), so others take them
        at once; returns how many."""

    @abc.abstractmethod
    async def listen(self, source: str, on_put: Callable[[], None]) -> None:
        """Call `on_put` whenever updates of `source` are put, by any worker,
        until cancelled; `on_put` is called once when listening starts, for
        what was put before. Raises when the connection is lost (the caller
        retries)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop listening; the stores' shared connection is closed with them."""
