"""Getting updates from Telegram without ever losing one.

Telegram forgets an update once it is confirmed: by the next `getUpdates`
whose offset is past it (polling), or by a 200 answer (webhook). So nothing
is confirmed before it is safe: a message stored in the transcript (its
answer may still be under way: a restart answers stored-but-unanswered
messages), a command or button handled, an update judged irrelevant.
python-telegram-bot's Updater confirms each batch before the handlers run,
which is why the loop here calls `getUpdates` itself.

Updates of one chat are processed one after another, in order; chats run
side by side. A lane moves on once its update is safe, not once the model
has answered, so a long turn holds up neither its chat's next message (the
ConversationManager queues the turns of a session in order) nor the poller.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import warnings
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from telegram import Bot, Update
from telegram.error import Conflict, EndPointNotFound, InvalidToken, RetryAfter, TimedOut
from telegram.warnings import PTBUserWarning

from channels.telegram_send import retry_after_seconds, scrub
from core.clock import Clock
from core.logs import event

log = logging.getLogger("kept.telegram")

ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
MAX_POLL_BACKOFF = 30.0
SEEN_LIMIT = 10_000
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

MarkSafe = Callable[[], None]
Processor = Callable[[Update, MarkSafe], Awaitable[None]]


@dataclass(slots=True)
class _Job:
    update: Update
    safe: asyncio.Future[None]

    def mark_safe(self) -> None:
        if not self.safe.done():
            self.safe.set_result(None)


def lane_of(update: Update) -> str:
    """Updates of one chat share a lane (and so keep their order)."""
    chat = update.effective_chat
    if chat is not None:
        return f"chat:{chat.id}"
    user = update.effective_user
    return f"user:{user.id}" if user is not None else "other"


class UpdateIntake:
    """Lanes per chat, plus the two ways updates arrive (polling, webhook)."""

    def __init__(self, process: Processor, clock: Clock, *, secret: str = "") -> None:
        self._process = process
        self._clock = clock
        self._secret = secret  # the bot token, scrubbed from logged errors
        self._queues: dict[str, deque[_Job]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        # Update ids already taken in, so a redelivery in this process (a
        # confirming poll that failed, a webhook retry) is dropped here; after
        # a restart the store's duplicate check does the same for messages.
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._poller: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self._closing = False

    # --- lanes ------------------------------------------------------------------

    def submit(self, update: Update) -> asyncio.Future[None] | None:
        """Queue an update; the future resolves once it is safe to confirm.
        None for an update id already taken in."""
        if update.update_id in self._seen:
            return None
        self._seen[update.update_id] = None
        while len(self._seen) > SEEN_LIMIT:
            self._seen.popitem(last=False)
        job = _Job(update, asyncio.get_running_loop().create_future())
        key = lane_of(update)
        self._queues.setdefault(key, deque()).append(job)
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._drain(key), name=f"telegram-{key}")
        return job.safe

    async def _drain(self, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue:
                job = queue.popleft()
                try:
                    await self._process(job.update, job.mark_safe)
                except asyncio.CancelledError:
                    # Stopping mid-update: it stays unconfirmed, so Telegram
                    # delivers it again after the restart.
                    job.safe.cancel()
                    raise
                except Exception as exc:
                    # Confirmed anyway: an update that always fails must not
                    # block every later one (the error is in the log).
                    event(
                        log,
                        logging.ERROR,
                        "telegram_update_failed",
                        update=job.update.update_id,
                        error=scrub(repr(exc), self._secret),
                    )
                job.mark_safe()
        finally:
            self._workers.pop(key, None)
            if not queue:
                self._queues.pop(key, None)

    # --- polling ------------------------------------------------------------------

    def start_polling(self, bot: Bot, *, timeout: float, read_timeout: float) -> None:
        poll = self._poll(bot, poll_seconds=timeout, read_seconds=read_timeout)
        self._poller = asyncio.create_task(poll, name="telegram-poll")

    async def _fetch(
        self, bot: Bot, offset: int | None, poll_seconds: float, read_seconds: float
    ) -> tuple[list[Update], int | None]:
        """One getUpdates: the updates PTB can read, and the offset that
        confirms the whole batch. Raw JSON rather than `bot.get_updates`,
        which fails the entire batch when one update does not parse: that
        batch would come back forever and block every later message."""
        params: dict[str, object] = {
            "timeout": int(poll_seconds),
            "allowed_updates": ALLOWED_UPDATES,
        }
        if offset is not None:
            params["offset"] = offset
        with warnings.catch_warnings():
            # PTB suggests its own get_updates for this endpoint; see above.
            warnings.simplefilter("ignore", PTBUserWarning)
            raw = await bot.do_api_request(
                "getUpdates", api_kwargs=params, read_timeout=read_seconds + poll_seconds
            )
        updates: list[Update] = []
        for item in raw or ():
            try:
                updates.append(Update.de_json(item, bot))
            except Exception as exc:
                event(
                    log,
                    logging.ERROR,
                    "telegram_update_unreadable",
                    update=item.get("update_id"),
                    error=repr(exc),
                )
        ids = [int(item["update_id"]) for item in raw or () if "update_id" in item]
        return updates, (max(ids) + 1 if ids else offset)

    async def _poll(self, bot: Bot, *, poll_seconds: float, read_seconds: float) -> None:
        offset: int | None = None
        failures = 0
        while True:
            wait: float | None = None
            error = ""
            try:
                updates, next_offset = await self._fetch(bot, offset, poll_seconds, read_seconds)
            except asyncio.CancelledError:
                raise
            except TimedOut:
                continue  # an idle long poll outlived its read timeout: ask again
            except RetryAfter as exc:
                wait = retry_after_seconds(exc)
                error = "flood control"
            except (InvalidToken, EndPointNotFound):
                # do_api_request reports a 401/404 after start-up as
                # EndPointNotFound; getUpdates exists, so it is the token.
                error = "the token was rejected (revoked in @BotFather?)"
            except Conflict as exc:
                # Another process polls with this token, or a webhook is set.
                error = f"conflict: {exc}"
            except Exception as exc:
                error = scrub(str(exc) or repr(exc), self._secret)
            else:
                failures = 0
                pending = [f for f in map(self.submit, updates) if f is not None]
                if pending:
                    await asyncio.gather(*pending)
                # Only now: the next request confirms this batch.
                offset = next_offset
                continue
            failures += 1
            wait = wait if wait is not None else min(MAX_POLL_BACKOFF, 2.0 ** (failures - 1))
            event(
                log,
                logging.WARNING if failures < 5 else logging.ERROR,
                "telegram_poll_failed",
                error=error,
                failures=failures,
                retry_in_s=wait,
            )
            await self._clock.sleep(wait)

    # --- webhook --------------------------------------------------------------------

    async def start_webhook(
        self, bot: Bot, *, host: str, port: int, path: str, secret_token: str
    ) -> None:
        async def receive(request: web.Request) -> web.Response:
            if self._closing:
                return web.Response(status=503)  # Telegram retries it after the restart
            given = request.headers.get(SECRET_HEADER, "")
            if not hmac.compare_digest(given.encode(), secret_token.encode()):
                event(log, logging.WARNING, "telegram_webhook_refused", remote=request.remote)
                return web.Response(status=403)
            try:
                update = Update.de_json(await request.json(), bot)
            except Exception as exc:
                event(log, logging.WARNING, "telegram_webhook_bad_body", error=repr(exc))
                return web.Response(status=400)
            safe = self.submit(update)
            if safe is not None:
                # Answering 200 is the confirmation: only once it is safe.
                await asyncio.shield(safe)
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_post(path, receive)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()

    # --- stopping --------------------------------------------------------------------

    async def stop(self, grace: float) -> None:
        """Take in nothing more; give lanes `grace` seconds to finish their
        updates, then cancel them (those stay unconfirmed)."""
        self._closing = True
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._poller
            self._poller = None
        workers = list(self._workers.values())
        if workers:
            await asyncio.wait(workers, timeout=grace)
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        for queue in self._queues.values():
            for job in queue:
                job.safe.cancel()
        self._queues.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
