"""Catching up on what was said on Discord while kept was away.

Discord re-delivers nothing: a message sent while the bot was down, or one
it received but could not store, is only in the channel's history. So:

- on every READY (first connect and every full reconnect; a RESUME replays
  what was missed itself) every Discord session kept knows is *behind*;
- a live message that could not be stored makes its channel behind too, and
  the catch-up is retried with bounded backoff on the injected clock until
  storing works again.

A channel that is behind is caught up by fetching its history after the
newest stored user message id (at most HISTORY_WINDOW back, HISTORY_LIMIT
messages) and handing each message, oldest first, to the live path, which
applies the same rules (addressed to the bot, allow-lists) and stores it
under its platform id: the store's duplicate check keeps anything from
being answered twice.

Order: one message or catch-up at a time per channel. A live message waits
until its channel's catch-up is listed and done, so what was said before it
is answered first; one the catch-up already handled from history is a
duplicate by then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta

import aiohttp
import discord

from channels.discord.errors import describe
from channels.discord.scope import PLATFORM, ChatRef, ref_of_session
from core.clock import Clock, sleep_or_until_set
from core.errors import MessageNotStored
from core.locks import KeyedLocks
from core.logs import event
from core.store import Store
from core.store.errors import storage_action

log = logging.getLogger("kept.discord")

HISTORY_WINDOW = timedelta(hours=24)
HISTORY_LIMIT = 100
RETRY_FIRST = 1.0  # seconds
RETRY_MAX = 60.0

# A channel's history after a message id, oldest first.
FetchHistory = Callable[[ChatRef, int], Awaitable[list[discord.Message]]]
# The live path for one fetched message; raises MessageNotStored.
Deliver = Callable[[discord.Message, ChatRef], Awaitable[None]]


class StorageDown(Exception):
    """A fetched message could not be stored: this pass stops here."""


@dataclass
class _Behind:
    ref: ChatRef
    # The id of the first message that could not be stored, when known: the
    # history is read from just before it if its session has no stored id.
    first_missing: int | None = None
    caught_up: asyncio.Event = field(default_factory=asyncio.Event)


class CatchUp:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        fetch: FetchHistory,
        deliver: Deliver,
    ) -> None:
        self._store = store
        self._clock = clock
        self._fetch = fetch
        self._deliver = deliver
        self._behind: dict[int, _Behind] = {}
        # A channel's lock exists only while a message or a catch-up holds it.
        self._channel_locks: KeyedLocks[int] = KeyedLocks()
        self._listed = asyncio.Event()
        self._listed.set()
        self._kick = asyncio.Event()
        self._list_wanted = False
        self._storage_failing = False
        self._task: asyncio.Task[None] | None = None
        # Live messages waiting for their channel (read by tests and operators).
        self.held = 0
        self._stopped = False

    # --- what the adapter tells it -----------------------------------------------

    def connected(self) -> None:
        """A READY: every known channel may have missed messages. Live
        messages wait until the channels are listed (else a live message
        stored first would hide the older ones from the history read)."""
        if self._stopped:
            # Started again after a stop, which released the waiters: what is
            # still behind must hold live messages again.
            self._stopped = False
            for behind in self._behind.values():
                behind.caught_up = asyncio.Event()
        self._listed.clear()
        self._list_wanted = True
        self._kick.set()
        self._wake()

    def not_stored(self, ref: ChatRef, message_id: int, error: BaseException) -> None:
        """A live message of `ref` could not be stored: the channel is behind
        from that message on."""
        behind = self._behind.get(ref.channel_id)
        if behind is None:
            self._behind[ref.channel_id] = _Behind(ref, message_id)
        elif behind.first_missing is None or message_id < behind.first_missing:
            behind.first_missing = message_id
        self._storage_failed(error, channel=ref.channel_id, message=message_id)
        self._wake()

    @asynccontextmanager
    async def hold_channel(self, channel_id: int) -> AsyncIterator[bool]:
        """Hold `channel_id` for a live message: entered once the channel is
        caught up and no other message of it is being handled. Yields False
        when the adapter stopped meanwhile: the message, never stored, is
        left to the next start's catch-up."""
        async with AsyncExitStack() as holding:
            self.held += 1
            try:
                await self._listed.wait()
                while not self._stopped:
                    behind = self._behind.get(channel_id)
                    if behind is not None:
                        await behind.caught_up.wait()
                        continue
                    await holding.enter_async_context(self._channel_locks.hold(channel_id))
                    if channel_id not in self._behind:
                        break
                    await holding.aclose()  # fell behind while we queued: wait for that first
            finally:
                self.held -= 1
            yield not self._stopped

    def behind(self) -> list[int]:
        return sorted(self._behind)

    @property
    def busy_channels(self) -> int:
        """Channels with a message or catch-up in hand or waiting."""
        return len(self._channel_locks)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        # Nothing will catch up any more: waiting live messages give up.
        self._stopped = True
        self._listed.set()
        for behind in self._behind.values():
            behind.caught_up.set()

    async def idle(self) -> None:
        """Wait until nothing is behind (tests)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    # --- the work -------------------------------------------------------------------

    def _wake(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="discord-catch-up")

    async def _run(self) -> None:
        delay = RETRY_FIRST
        while self._list_wanted or self._behind:
            try:
                done = await self._pass()
            except Exception as exc:
                # Whatever it was, live messages wait on this loop: keep going.
                event(
                    log,
                    logging.ERROR,
                    "discord_catch_up_failed",
                    error=repr(exc),
                    action="none: retried with backoff; report it if it repeats",
                )
                done = False
            if done:
                delay = RETRY_FIRST
                continue
            await self._backoff(delay)
            delay = min(delay * 2, RETRY_MAX)

    async def _backoff(self, delay: float) -> None:
        """Sleep on the clock; a READY cuts it short, since live messages
        wait for its listing."""
        self._kick.clear()
        await sleep_or_until_set(self._clock, delay, self._kick)

    async def _pass(self) -> bool:
        """One round over every channel behind; False when something must be
        retried later."""
        try:
            sessions = await self._store.sessions_with_last_platform_id(PLATFORM)
        except Exception as exc:
            self._storage_failed(exc)
            return False
        newest: dict[int, int] = {}
        for session, last in sessions:
            ref = ref_of_session(session)
            if ref is None:
                continue
            if self._list_wanted:
                self._behind.setdefault(ref.channel_id, _Behind(ref))
            if last is not None and last.isdigit():
                newest[ref.channel_id] = max(newest.get(ref.channel_id, 0), int(last))
        self._list_wanted = False
        self._listed.set()
        complete = True
        for channel_id in list(self._behind):
            try:
                if not await self._catch_up(channel_id, newest.get(channel_id)):
                    complete = False
            except StorageDown as exc:
                self._storage_failed(exc.__cause__ or exc, channel=channel_id)
                return False
        if complete and self._storage_failing:
            self._storage_failing = False
            event(log, logging.INFO, "discord_storage_recovered", action="none")
        return complete

    async def _catch_up(self, channel_id: int, newest: int | None) -> bool:
        behind = self._behind[channel_id]
        ref = behind.ref
        floor = discord.utils.time_snowflake(self._clock.now() - HISTORY_WINDOW)
        if newest is None and behind.first_missing is not None:
            newest = behind.first_missing - 1
        after = max(newest or 0, floor)
        async with self._channel_locks.hold(channel_id):
            try:
                messages = await self._fetch(ref, after)
            except (discord.Forbidden, discord.NotFound) as exc:
                # Gone, or no Read Message History: retrying cannot help.
                event(
                    log,
                    logging.WARNING,
                    "discord_catch_up_skipped",
                    channel=channel_id,
                    error=describe(exc),
                    action="give the bot Read Message History in this channel",
                )
                self._done(channel_id)
                return True
            except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
                event(
                    log,
                    logging.WARNING,
                    "discord_catch_up_failed",
                    channel=channel_id,
                    error=describe(exc),
                    action="none: retried with backoff",
                )
                return False
            for message in messages:
                try:
                    await self._deliver(message, ref)
                except MessageNotStored as exc:
                    raise StorageDown() from exc
            self._done(channel_id)
            if messages:
                event(
                    log,
                    logging.INFO,
                    "discord_caught_up",
                    channel=channel_id,
                    read=len(messages),
                    since=after,
                )
        return True

    def _done(self, channel_id: int) -> None:
        behind = self._behind.pop(channel_id, None)
        if behind is not None:
            behind.caught_up.set()

    def _storage_failed(self, error: BaseException, **fields: object) -> None:
        # One line per outage, not one per retry.
        if self._storage_failing:
            return
        self._storage_failing = True
        event(
            log,
            logging.ERROR,
            "discord_storage_failed",
            **fields,
            error=repr(error.__cause__ or error),
            action=storage_action(error.__cause__ or error)
            + "; then the held messages are answered in order",
        )
