"""Several workers, one polled Telegram bot: the worker that polls hands every
update to all workers through the database (core/store/updates.py).

getUpdates allows one consumer per token, so one worker polls (the leader,
adapter.py). It writes each batch into the shared queue (the raw update, its
id, the bot and the chat it belongs to) and only then lets the offset pass
it: nothing is confirmed to Telegram before it is safe. Putting an update id
that is already there is a no-op.

Every worker, the leader too, consumes the queue: it claims the waiting
updates of a few chats (worker id + lease on the injected clock), feeds them
in order into its own intake's chat queues (channels/telegram/intake.py: the same
processor, the same "safe once stored" rule, a held message keeps its row),
and marks each row done once its update is safe. A chat under another
worker's live claim is skipped, so one chat's updates are processed in order
and by one worker at a time. A worker that dies leaves its claims to expire;
another takes them then (a message already stored is not stored twice, and
its answer is not repeated: a turn answers only what its chat still owes).
A worker that stops releases what it has not made safe.

Wake-up: LISTEN/NOTIFY on the queue (a put notifies at commit); a worker
that finishes a chat looks again at once (the chat may have more waiting,
which nobody was told about); and every LOOK_EVERY seconds on the injected
clock, for claims whose lease ran out and a notification lost with its
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial

from telegram import Bot, Update

from channels.telegram.intake import Polled, UpdateIntake, chat_key_of
from channels.telegram.parking import source_of
from channels.telegram.send import scrub
from core.clock import Clock, sleep_or_until_set
from core.locks import SessionGuard
from core.logs import event
from core.store.updates import NewUpdate, QueuedUpdate, UpdateQueue

log = logging.getLogger("kept.telegram")

# How long a claim vouches for its updates; renewed while they are held.
CLAIM_LEASE = 30.0
RENEW_EVERY = 10.0
# The fallback look at the queue, for expired claims and lost notifications.
LOOK_EVERY = 5.0
# Chats a worker holds at once, and takes per claim: a burst is shared out
# among the workers instead of going to whoever looked first.
MAX_CLAIMED_CHATS = 32
CHATS_PER_CLAIM = 8
MAX_BACKOFF = 30.0
# How often a worker that does not poll Telegram looks whether the poller is
# gone (a dead worker's role is free at once; this bounds the takeover).
LEADER_CHECK = 2.0


class SharedUpdates:
    def __init__(
        self,
        queue: UpdateQueue,
        intake: UpdateIntake,
        bot: Bot,
        clock: Clock,
        *,
        worker: str,
        secret: str = "",
        max_claimed_chats: int = MAX_CLAIMED_CHATS,
    ) -> None:
        self._queue = queue
        self._intake = intake
        self._bot = bot
        self._clock = clock
        self._worker = worker
        self._secret = secret  # the bot token, scrubbed from logged errors
        self._max_claimed_chats = max_claimed_chats
        self.source = source_of(bot)
        self._held: set[int] = set()  # queue row ids claimed by us, not done yet
        # Per chat key: the task feeding that chat's claimed updates into the intake.
        self._chats: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        # Set at stop; the loops also look at it, because a driver may turn
        # a cancellation that hits it mid-call into an error of its own.
        self._stopping = asyncio.Event()
        self._loops: list[asyncio.Task[None]] = []
        self._renewer: asyncio.Task[None] | None = None

    # --- the polling side ------------------------------------------------------------

    async def put(self, polled: list[Polled]) -> None:
        """The intake's sink: the batch is safe once this returns."""
        # ASCII JSON: a lone surrogate in a message (valid JSON, not UTF-8)
        # must not make the whole batch unwritable.
        items = [
            NewUpdate(update.update_id, chat_key_of(update), json.dumps(raw))
            for raw, update in polled
        ]
        await self._queue.put(self.source, items, now=self._clock.now())

    # --- the consuming side ----------------------------------------------------------

    def start(self) -> None:
        # Every worker consumes, so every worker may park (the leader polls too).
        self._intake.start_parking(self._bot)
        self._loops = [
            asyncio.create_task(self._consume(), name="telegram-shared-updates"),
            asyncio.create_task(self._listen(), name="telegram-shared-updates-listen"),
        ]
        self._renewer = asyncio.create_task(self._renew(), name="telegram-shared-updates-renew")

    async def _listen(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                await self._queue.listen(self.source, self._on_put)
                return  # the queue was closed
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                action = f"check the database; the queue is read every {LOOK_EVERY:g} s meanwhile"
                await self._back_off("listen", logging.WARNING, failures, exc, action)

    async def _back_off(
        self, step: str, level: int, failures: int, exc: Exception, action: str
    ) -> None:
        """Log a failed `step` and wait 1, 2, 4 … seconds (at most MAX_BACKOFF)."""
        wait = min(MAX_BACKOFF, 2.0 ** (failures - 1))
        event(
            log,
            level,
            f"telegram_handoff_{step}_failed",
            failures=failures,
            retry_in_s=wait,
            error=repr(exc),
            action=action,
        )
        await sleep_or_until_set(self._clock, wait, self._stopping)

    def _on_put(self) -> None:
        self._wake.set()

    async def _consume(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            room = self._max_claimed_chats - len(self._chats)
            self._wake.clear()
            if room <= 0:
                await self._wake.wait()  # a chat finished
                continue
            now = self._clock.now()
            try:
                rows = await self._queue.claim(
                    self.source,
                    worker=self._worker,
                    now=now,
                    lease_until=now + timedelta(seconds=CLAIM_LEASE),
                    chats=min(room, CHATS_PER_CLAIM),
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                action = "check the database; waiting updates stay in the queue"
                await self._back_off("claim", logging.ERROR, failures, exc, action)
                continue
            failures = 0
            if rows:
                self._start_chats(rows)
                continue  # more may be waiting
            await sleep_or_until_set(self._clock, LOOK_EVERY, self._wake)

    def _start_chats(self, rows: Sequence[QueuedUpdate]) -> None:
        by_chat: dict[str, list[QueuedUpdate]] = {}
        for row in rows:
            self._held.add(row.id)
            by_chat.setdefault(row.chat_key, []).append(row)
        for chat_key, chat_rows in by_chat.items():
            # Ours already (a lease renewed too late, taken again): after it.
            previous = self._chats.get(chat_key)
            task = asyncio.create_task(
                self._drain(chat_rows, previous), name=f"telegram-shared-updates-{chat_key}"
            )
            self._chats[chat_key] = task
            task.add_done_callback(partial(self._chat_done, chat_key))

    def _chat_done(self, chat_key: str, task: asyncio.Task[None]) -> None:
        if self._chats.get(chat_key) is task:
            del self._chats[chat_key]
        self._wake.set()  # room for another chat, and this one may have more waiting

    async def _drain(
        self, rows: Sequence[QueuedUpdate], previous: asyncio.Task[None] | None
    ) -> None:
        """Feed one chat's claimed updates into the intake, in order, and mark
        each done once it is safe. A held message holds the rest of its chat
        (and its rows stay claimed); at stop, what is not safe stays ours
        until `close` releases it."""
        if previous is not None:
            await asyncio.wait([previous])
        submitted = [(row, self._submit(row)) for row in rows]
        safe: list[int] = []
        for row, made_safe in submitted:
            if made_safe is not None and not made_safe.done():
                await self._done(safe)
                safe = []
                await asyncio.wait([made_safe])
            if made_safe is not None and made_safe.cancelled():
                break  # stopping
            safe.append(row.id)
        await self._done(safe)

    def _submit(self, row: QueuedUpdate) -> asyncio.Future[None] | None:
        """Into the intake's queue of its chat; what resolves once the update
        is safe (None: nothing to wait for, it is safe already or unreadable)."""
        try:
            raw = json.loads(row.payload)
            update = Update.de_json(raw, self._bot)
        except Exception as exc:
            event(
                log,
                logging.ERROR,
                "telegram_update_unreadable",
                update=row.update_id,
                error=scrub(repr(exc), self._secret),
            )
            return None
        job = self._intake.submit(update, raw)
        return job.safe if job is not None else None

    async def _done(self, ids: list[int]) -> None:
        if not ids:
            return
        try:
            await self._queue.done(ids, now=self._clock.now())
        except Exception as exc:
            event(
                log,
                logging.WARNING,
                "telegram_handoff_done_failed",
                updates=len(ids),
                error=repr(exc),
                action="none: another worker takes them after the lease; a stored message "
                "is not stored or answered twice",
            )
        finally:
            self._held.difference_update(ids)

    async def _renew(self) -> None:
        while True:
            await self._clock.sleep(RENEW_EVERY)
            ids = list(self._held)
            if not ids:
                continue
            until = self._clock.now() + timedelta(seconds=CLAIM_LEASE)
            try:
                kept = await self._queue.renew(ids, worker=self._worker, lease_until=until)
            except Exception as exc:
                event(
                    log,
                    logging.WARNING,
                    "telegram_handoff_renew_failed",
                    updates=len(ids),
                    error=repr(exc),
                    action="check the database; another worker takes these chats over if "
                    "their lease runs out",
                )
                continue
            lost = (set(ids) - set(kept)) & self._held  # not done meanwhile
            if lost:
                event(
                    log,
                    logging.WARNING,
                    "telegram_handoff_claim_lost",
                    updates=len(lost),
                    action="none: another worker took them over after their lease ran out",
                )

    # --- stopping ----------------------------------------------------------------

    async def stop_claiming(self) -> None:
        """Take no more chats; those in hand go on (and keep their lease)."""
        self._stopping.set()
        loops, self._loops = self._loops, []
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)

    async def close(self) -> None:
        """After the intake stopped (its updates are safe or given up): give
        back every claim still held, so other workers take those chats now
        rather than after the lease."""
        await self.stop_claiming()
        chats = list(self._chats.values())
        await asyncio.gather(*chats, return_exceptions=True)
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None
        try:
            released = await self._queue.release(worker=self._worker)
        except Exception as exc:
            event(
                log,
                logging.WARNING,
                "telegram_handoff_release_failed",
                error=repr(exc),
                action="none: other workers take this worker's chats after the lease",
            )
            return
        if released:
            event(log, logging.INFO, "telegram_handoff_released", updates=released)


async def poll_while_leader(
    leadership: SessionGuard,
    bot: Bot,
    intake: UpdateIntake,
    shared_updates: SharedUpdates,
    clock: Clock,
    *,
    poll_timeout: float,
    read_timeout: float,
    looked: Callable[[], None] = lambda: None,
) -> None:
    """getUpdates allows one consumer per token: with several workers on one
    database, the worker holding the role polls, the others look again every
    LEADER_CHECK seconds and take over when it is gone. The poller writes
    what it gets into the update queue and every worker answers from it."""
    role = f"telegram-poll:{bot.id}"
    while True:
        leader = await leadership.try_lead(role)
        looked()
        if leader and not intake.polling:
            intake.start_polling(
                bot, timeout=poll_timeout, read_timeout=read_timeout, sink=shared_updates.put
            )
            event(log, logging.INFO, "telegram_polling_leader", bot_id=bot.id)
        elif not leader and intake.polling:
            await intake.stop_polling()
            event(
                log,
                logging.WARNING,
                "telegram_polling_lost",
                bot_id=bot.id,
                action="none: another worker polls now",
            )
        await clock.sleep(LEADER_CHECK)
