"""The last guard of Telegram's intake: an update that keeps failing while
other chats' updates are stored is parked, and replayed when asked.

The intake (intake.py) decides when: after PARK_AFTER tries of a store error
of the transient class, and only once other chats' updates were made safe
meanwhile (the store is up; it is this update). Parking writes the update as
Telegram sent it and its error into the parked updates (core/store/parked.py);
only once that is written may the intake confirm it. A parking that fails
(the store is down after all) leaves the update held, as before.

`kept updates retry` only marks parked updates for a replay: the running bot
looks every REPLAY_EVERY seconds (at once when it starts), feeds each back
into the intake's chat queues as if Telegram had sent it now (the same
processing, token, pace and session locks), and forgets it once it is safe;
one that fails again is parked again, with its new error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from telegram import Bot, Update

from channels.telegram.send import scrub
from core.clock import Clock
from core.errors import MessageNotStored
from core.logs import event
from core.metrics import recorder
from core.store.errors import root_cause
from core.store.parked import ParkedUpdate, ParkedUpdates

log = logging.getLogger("kept.telegram")

# Tries (about 30 s of backoff) before an update that keeps failing while
# other chats' updates are stored is parked.
PARK_AFTER = 5
# How often the running bot looks for parked updates `kept updates retry` asked to replay.
REPLAY_EVERY = 5.0


class Replayed(Protocol):
    """What the intake hands back for a replayed update (its chat queue's job)."""

    @property
    def safe(self) -> asyncio.Future[None]: ...

    @property
    def parked(self) -> bool: ...


# Puts an update back into the intake's chat queues, though it was confirmed.
Resubmit = Callable[[Update, dict[str, Any]], Replayed | None]


def source_of(bot: Bot) -> str:
    """Whose updates: the platform and the bot."""
    return f"telegram:{bot.id}"


def _chat(update: Update) -> int | None:
    chat = update.effective_chat
    return chat.id if chat is not None else None


class UpdateParking:
    def __init__(self, store: ParkedUpdates, clock: Clock, *, secret: str = "") -> None:
        self._store = store
        self._clock = clock
        self._secret = secret  # the bot token, scrubbed from logged errors
        self._source = ""  # known once started
        self._replayer: asyncio.Task[None] | None = None

    async def park(
        self,
        update: Update,
        raw: dict[str, Any] | None,
        chat_key: str,
        exc: MessageNotStored,
        tries: int,
    ) -> bool:
        """Write the update and its error into the parked updates; True once
        written (the update may be confirmed), False when not started yet or
        the write failed too (it is held then)."""
        if not self._source:
            return False
        cause = scrub(root_cause(exc), self._secret)
        parked = ParkedUpdate(
            source=self._source,
            update_id=update.update_id,
            chat_key=chat_key,
            # ASCII JSON: storable whatever the text holds.
            payload=json.dumps(raw if raw is not None else update.to_dict()),
            error=cause,
            tries=tries,
            parked_at=self._clock.now(),
        )
        try:
            await self._store.park(parked)
        except Exception as park_exc:
            event(
                log,
                logging.ERROR,
                "telegram_park_failed",
                update=update.update_id,
                error=scrub(repr(park_exc), self._secret),
                action=exc.action,
            )
            return False
        recorder().update_parked("telegram")
        event(
            log,
            logging.ERROR,
            "telegram_update_parked",
            update=update.update_id,
            chat=_chat(update),
            tries=tries,
            cause=cause,
            action="other chats are stored, this update keeps failing: see `kept doctor`; "
            "once the cause is fixed, `kept updates retry` replays it",
        )
        return True

    def start(self, bot: Bot, resubmit: Resubmit) -> None:
        """Park under this bot's name, and replay what `kept updates retry` asks for."""
        self._source = source_of(bot)
        if self._replayer is None:
            self._replayer = asyncio.create_task(
                self._replays(bot, resubmit), name="telegram-replays"
            )

    async def stop(self) -> None:
        if self._replayer is not None:
            self._replayer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._replayer
            self._replayer = None

    async def _replays(self, bot: Bot, resubmit: Resubmit) -> None:
        failures = 0
        while True:
            try:
                await self.replay(bot, resubmit)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                if failures == 1:  # one line per outage
                    event(
                        log,
                        logging.WARNING,
                        "telegram_replay_failed",
                        error=scrub(repr(exc), self._secret),
                        action="check the database; asked replays wait there meanwhile",
                    )
            await self._clock.sleep(REPLAY_EVERY)

    async def replay(self, bot: Bot, resubmit: Resubmit) -> int:
        """Feed the parked updates whose replay was asked for back into the
        chat queues; forget each once it is safe (one parked again stays). Returns
        how many were replayed."""
        taken = await self._store.take_retries(self._source)
        replayed: list[tuple[Update, Replayed]] = []
        for parked in taken:
            raw = json.loads(parked.payload)
            update = Update.de_json(raw, bot)
            job = resubmit(update, raw)
            if job is not None:
                replayed.append((update, job))
        for update, job in replayed:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(job.safe)
            if job.safe.done() and not job.safe.cancelled() and not job.parked:
                await self._store.resolve(self._source, update.update_id)
                event(
                    log,
                    logging.INFO,
                    "telegram_update_replayed",
                    update=update.update_id,
                    chat=_chat(update),
                )
        return len(replayed)
