"""The parked updates' port: the last guard against one update that keeps
failing while every other chat's updates are stored.

Such an update (its processing failed past a few tries, the store's error
transient, yet other chats' updates were stored meanwhile) is written here
as the platform sent it, with its error, and only then confirmed to the
platform: the chat it holds up moves on, and nothing is lost. `kept doctor`
lists what is parked; `kept updates retry` asks for a replay, which the
running bot takes (`take_retries`) and feeds back through its own
processing; an update that is safe at last is removed (`resolve`), one that
fails again is parked again with its new error.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from datetime import datetime

from core.messages import storable


@dataclass(frozen=True, slots=True)
class ParkedUpdate:
    source: str  # whose updates: a platform and bot, e.g. `telegram:4242`
    update_id: int  # the platform's id, unique per source
    chat_key: str  # the chat it belongs to (e.g. `chat:42`; the column `lane`)
    payload: str  # the platform's update (JSON), opaque to core
    error: str  # the error of its last try, one line
    tries: int  # how often it was tried before it was parked (all parkings)
    parked_at: datetime
    # When `kept updates retry` asked for a replay not taken yet; None: none asked.
    retry_requested_at: datetime | None = None

    def __post_init__(self) -> None:
        # The error names the driver's complaint, which may quote the text.
        object.__setattr__(self, "error", storable(self.error))


class ParkedUpdates(abc.ABC):
    @abc.abstractmethod
    async def park(self, update: ParkedUpdate) -> None:
        """Store `update` durably; one parked before (same source and id)
        takes the new error and parking time, its tries added, and its replay
        request cleared. Raises when it could not be stored: the update must
        then not be confirmed."""

    @abc.abstractmethod
    async def listing(self, *, limit: int = 100) -> list[ParkedUpdate]:
        """Parked updates, oldest first, at most `limit`."""

    @abc.abstractmethod
    async def count(self) -> int: ...

    @abc.abstractmethod
    async def request_retry(self, *, now: datetime) -> int:
        """Ask for a replay of every parked update; returns how many are
        waiting for one now."""

    @abc.abstractmethod
    async def take_retries(self, source: str, *, limit: int = 100) -> list[ParkedUpdate]:
        """The parked updates of `source` whose replay was asked for, oldest
        first, each handed out once: its request is cleared in the same
        statement (the row stays until `resolve`)."""

    @abc.abstractmethod
    async def resolve(self, source: str, update_id: int) -> None:
        """A replayed update is safe at last: forget it."""
