"""Getting updates from Telegram without ever losing one.

Telegram forgets an update once it is confirmed: by the next `getUpdates`
whose offset is past it (polling), or by a 200 answer (webhook). So nothing
is confirmed before it is safe: a message stored in the transcript (its
answer may still be under way: a restart answers stored-but-unanswered
messages), a command or button handled, an update judged irrelevant.
python-telegram-bot's Updater confirms each batch before the handlers run,
which is why the loop here calls `getUpdates` itself.

Updates of one chat are processed one after another, in order; chats run
side by side. A chat's queue moves on once its update is safe, not once the model
has answered, so a long turn holds up neither its chat's next message (the
ConversationManager queues the turns of a session in order) nor the poller.

A message that cannot be stored (database locked, disk full) holds its chat's queue:
it is retried with backoff while the chat's later updates wait behind it,
and it stays unconfirmed, since the polling offset never passes the oldest
update that is not safe yet. Other chats go on. An update id is remembered
as seen only once it is safe, so a re-delivery of one that never was (after
a restart, or a webhook retry) is processed.

Two exceptions keep one bad update from holding its chat forever. A store
error of the deterministic class (a value the database can never take,
core/store/errors.py) is never retried: the update is confirmed, and a
message's sender was told that kept could not read it (channels/base.py).
And an update that still fails after PARK_AFTER tries while other chats'
updates were stored meanwhile (so the store is up, and it is this update)
is parked (parking.py), then confirmed; `kept updates retry` has the
running bot replay it through the same chat queues.

With several workers on PostgreSQL the poller has a sink instead
(channels/telegram/shared_updates.py): a batch is safe once the sink wrote it to the
queue every worker reads, and only then does the offset pass it. Those
workers feed the updates they claim into their own intake's chat queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import warnings
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from telegram import Bot, Update
from telegram.error import Conflict, EndPointNotFound, InvalidToken, RetryAfter, TimedOut
from telegram.warnings import PTBUserWarning

from channels.context import WebRoutes
from channels.listener import ServedApp, serve_app
from channels.telegram.parking import PARK_AFTER, UpdateParking
from channels.telegram.send import retry_after_seconds, scrub
from core.clock import Clock, sleep_or_until_set
from core.errors import MessageNotStored
from core.logs import event
from core.store.errors import root_cause
from core.store.parked import ParkedUpdates

log = logging.getLogger("kept.telegram")

ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
MAX_POLL_BACKOFF = 30.0
# Storing a held message is retried after 1, 2, 4 … seconds, at most this far apart.
MAX_STORE_BACKOFF = 30.0
# While a message is held, Telegram answers every getUpdates at once (the
# held update is still there), so other chats are polled at this pace.
HELD_POLL_EVERY = 2.0
SEEN_LIMIT = 10_000
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

MarkSafe = Callable[[], None]
# Raises MessageNotStored when the update's message could not be stored: the
# chat's queue then holds it and tries again.
Processor = Callable[[Update, MarkSafe], Awaitable[None]]
# An update as Telegram sent it, and as PTB reads it.
Polled = tuple[dict[str, Any], Update]
# Makes a polled batch safe somewhere else (the queue every worker reads);
# raises when it could not, and the batch then stays unconfirmed.
Sink = Callable[[list[Polled]], Awaitable[None]]


@dataclass(slots=True)
class _Job:
    update: Update
    safe: asyncio.Future[None]
    on_safe: Callable[[_Job], None]
    held: bool = False
    # The update as Telegram sent it (what a parked update keeps); None: read back from PTB.
    raw: dict[str, Any] | None = None
    # Made safe by being parked, not by being processed.
    parked: bool = False

    def mark_safe(self) -> None:
        if not self.safe.done():
            self.safe.set_result(None)
            self.on_safe(self)

    @property
    def settled(self) -> bool:
        """Safe, or held for a storage retry: nothing more will happen soon."""
        return self.safe.done() or self.held


@dataclass(slots=True)
class _ChatQueue:
    jobs: deque[_Job] = field(default_factory=deque)
    worker: asyncio.Task[None] | None = None


def chat_key_of(update: Update) -> str:
    """The key of an update's chat: updates with one key share a queue (and
    so keep their order)."""
    chat = update.effective_chat
    if chat is not None:
        return f"chat:{chat.id}"
    user = update.effective_user
    return f"user:{user.id}" if user is not None else "other"


class UpdateIntake:
    """A queue per chat, plus the two ways updates arrive (polling, webhook)."""

    def __init__(
        self,
        process: Processor,
        clock: Clock,
        *,
        secret: str = "",
        parked: ParkedUpdates | None = None,
    ) -> None:
        self._process = process
        self._clock = clock
        self._secret = secret  # the bot token, scrubbed from logged errors
        # Where an update that keeps failing alone is parked; None: it is held.
        self._parking = UpdateParking(parked, clock, secret=secret) if parked is not None else None
        # Updates the processor made safe (stored, handled): whether other
        # chats get on while one update keeps failing.
        self._progress = 0
        self._chat_queues: dict[str, _ChatQueue] = {}
        # Updates taken in and not safe yet, by id: the polling offset never
        # passes the lowest of them.
        self._open: dict[int, _Job] = {}
        # Update ids already safe, so a redelivery in this process (a
        # confirming poll that failed, a webhook retry) is dropped here; after
        # a restart the store's duplicate check does the same for messages.
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._changed = asyncio.Event()
        self._poller: asyncio.Task[None] | None = None
        self._served: ServedApp | None = None
        # getUpdates failures in a row now (0 after an answer): readiness.
        self.poll_failures = 0
        self._unmount: Callable[[], None] | None = None
        self._closing = False

    # --- chat queues ---------------------------------------------------------------

    @property
    def busy_chats(self) -> int:
        """Chats with updates in hand or waiting: an idle chat has no queue."""
        return len(self._chat_queues)

    def submit(self, update: Update, raw: dict[str, Any] | None = None) -> _Job | None:
        """Queue an update (or find it already queued); None for an update
        that is already safe. `raw` is the update as Telegram sent it."""
        uid = update.update_id
        if uid in self._seen:
            return None
        if (job := self._open.get(uid)) is not None:
            return job
        job = _Job(update, asyncio.get_running_loop().create_future(), self._on_safe, raw=raw)
        self._open[uid] = job
        key = chat_key_of(update)
        queue = self._chat_queues.setdefault(key, _ChatQueue())
        queue.jobs.append(job)
        if queue.worker is None:
            queue.worker = asyncio.create_task(self._drain(key, queue), name=f"telegram-{key}")
        return job

    def _on_safe(self, job: _Job) -> None:
        uid = job.update.update_id
        self._open.pop(uid, None)
        self._seen[uid] = None
        while len(self._seen) > SEEN_LIMIT:
            self._seen.popitem(last=False)
        self._changed.set()

    async def _drain(self, key: str, queue: _ChatQueue) -> None:
        try:
            while queue.jobs:
                job = queue.jobs[0]
                try:
                    await self._run(job)
                except asyncio.CancelledError:
                    # Stopping mid-update: it stays unconfirmed, so Telegram
                    # delivers it again after the restart.
                    job.safe.cancel()
                    raise
                queue.jobs.popleft()
                job.mark_safe()
        finally:
            queue.worker = None
            if not queue.jobs:
                self._chat_queues.pop(key, None)

    async def _run(self, job: _Job) -> None:
        """Process one update; a message that cannot be stored is tried again
        (with backoff, on the injected clock) until it is, holding its chat's queue;
        unless the store refused it for good (confirmed at once), or it keeps
        failing while other chats get on (parked, then confirmed)."""
        failures = 0
        progress_before = self._progress

        def made_safe() -> None:
            if not job.safe.done():
                self._progress += 1
            job.mark_safe()

        while True:
            try:
                await self._process(job.update, made_safe)
            except MessageNotStored as exc:
                if exc.deterministic:
                    self._refused(job, exc)
                    break
                failures += 1
                if (
                    failures >= PARK_AFTER
                    and self._progress > progress_before
                    and await self._park(job, exc, failures)
                ):
                    break
                job.held = True
                self._changed.set()
                wait = min(MAX_STORE_BACKOFF, 2.0 ** (failures - 1))
                event(
                    log,
                    logging.ERROR,
                    "telegram_store_failed",
                    update=job.update.update_id,
                    chat=_chat_of(job.update),
                    failures=failures,
                    retry_in_s=wait,
                    error=scrub(repr(exc.__cause__ or exc), self._secret),
                    action=exc.action,
                )
                await self._clock.sleep(wait)
                continue
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
            if failures:
                event(
                    log,
                    logging.INFO,
                    "telegram_store_recovered",
                    update=job.update.update_id,
                    chat=_chat_of(job.update),
                    failures=failures,
                )
            break
        job.held = False

    def _refused(self, job: _Job, exc: MessageNotStored) -> None:
        """The store can never take what this update carries (an edit, say:
        a message's own refusal was answered by the channel): confirmed, not
        retried."""
        event(
            log,
            logging.ERROR,
            "telegram_update_refused",
            update=job.update.update_id,
            chat=_chat_of(job.update),
            cause=scrub(root_cause(exc), self._secret),
            action=exc.action,
        )

    async def _park(self, job: _Job, exc: MessageNotStored, tries: int) -> bool:
        """Parked (so it may be confirmed), or False: nowhere to park it, or
        that failed too (it is held then, as before)."""
        if self._parking is None:
            return False
        chat_key = chat_key_of(job.update)
        job.parked = await self._parking.park(job.update, job.raw, chat_key, exc, tries)
        return job.parked

    def _resubmit(self, update: Update, raw: dict[str, Any]) -> _Job | None:
        """A parked update, confirmed when it was parked, into its chat's queue again."""
        self._seen.pop(update.update_id, None)
        return self.submit(update, raw)

    def start_parking(self, bot: Bot) -> None:
        """Park under `bot`'s name from now on, and replay what `kept
        updates retry` asks for (also for a worker that only consumes the
        update queue: shared_updates.py)."""
        if self._parking is not None:
            self._parking.start(bot, self._resubmit)

    async def _settled(self, jobs: Iterable[_Job]) -> None:
        """Wait until every job is safe or held for a retry."""
        waiting = list(jobs)
        while not all(job.settled for job in waiting):
            self._changed.clear()
            await self._changed.wait()

    # --- polling ------------------------------------------------------------------

    def start_polling(
        self, bot: Bot, *, timeout: float, read_timeout: float, sink: Sink | None = None
    ) -> None:
        """Call getUpdates until stopped. With a `sink`, each batch is handed
        to it instead of this intake's chat queues, and confirmed once the sink
        returned (channels/telegram/shared_updates.py: several workers)."""
        poll = self._poll(bot, poll_seconds=timeout, read_seconds=read_timeout, sink=sink)
        self._poller = asyncio.create_task(poll, name="telegram-poll")
        self.start_parking(bot)

    async def _fetch(
        self, bot: Bot, offset: int | None, poll_seconds: float, read_seconds: float
    ) -> tuple[list[Polled], int | None]:
        """One getUpdates: the updates PTB can read (with their JSON), and
        the offset just past the whole batch. Raw JSON rather than `bot.get_updates`, which fails
        the entire batch when one update does not parse: that batch would
        come back forever and block every later message."""
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
        updates: list[Polled] = []
        for item in raw or ():
            try:
                updates.append((item, Update.de_json(item, bot)))
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

    def _offset(self, past: int | None) -> int | None:
        """Confirms everything before the oldest update that is not safe yet
        (or the whole of what was fetched, when all of it is)."""
        return min(self._open) if self._open else past

    async def _poll(
        self, bot: Bot, *, poll_seconds: float, read_seconds: float, sink: Sink | None
    ) -> None:
        past: int | None = None  # just past the newest update fetched (and safe)
        failures = 0
        sink_failures = 0
        while True:
            wait: float | None = None
            error = ""
            try:
                # With a sink, nothing polled is in this intake's chat queues: what
                # is past `past` was handed off.
                offset = past if sink is not None else self._offset(past)
                polled, fetched_past = await self._fetch(bot, offset, poll_seconds, read_seconds)
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
                failures = self.poll_failures = 0
                if sink is not None and polled:
                    sink_failures = await self._hand_off(sink, polled, sink_failures)
                    if sink_failures:
                        continue  # not safe: the next request asks for the batch again
                if fetched_past is not None:
                    past = fetched_past if past is None else max(past, fetched_past)
                if sink is not None:
                    continue
                jobs = list(self._submit_all(polled))
                # The next request confirms what is safe by then.
                await self._settled(jobs)
                if any(job.held for job in self._open.values()):
                    # A held update comes back on every request: do not spin.
                    self._changed.clear()
                    await sleep_or_until_set(self._clock, HELD_POLL_EVERY, self._changed)
                continue
            failures += 1
            self.poll_failures = failures
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

    def _submit_all(self, polled: Iterable[Polled]) -> Iterable[_Job]:
        for raw, update in polled:
            job = self.submit(update, raw)
            if job is not None:
                yield job

    async def _hand_off(self, sink: Sink, polled: list[Polled], failures: int) -> int:
        """Hand the batch to the sink, `failures` hand-offs in a row having
        failed; returns that count: 0 once the sink took it, else one more
        (after a backoff)."""
        try:
            await sink(polled)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failures += 1
            wait = min(MAX_STORE_BACKOFF, 2.0 ** (failures - 1))
            event(
                log,
                logging.ERROR,
                "telegram_handoff_failed",
                updates=len(polled),
                failures=failures,
                retry_in_s=wait,
                error=scrub(repr(exc), self._secret),
                action="check the database: the updates stay with Telegram until they are written",
            )
            await self._clock.sleep(wait)
            return failures
        if failures:
            event(log, logging.INFO, "telegram_handoff_recovered", failures=failures)
        return 0

    # --- webhook --------------------------------------------------------------------

    async def start_webhook(
        self,
        bot: Bot,
        *,
        host: str,
        port: int,
        path: str,
        secret_token: str,
        shared: WebRoutes | None = None,
    ) -> None:
        """Serve `path` on host:port: on the `shared` listener when it is
        that address (one port for the webhook, /healthz and /metrics),
        else on a server of its own."""
        receive = self._webhook_handler(bot, secret_token)
        self.start_parking(bot)
        if shared is not None and shared.serves(host, port):
            shared.mount(path, receive)
            self._unmount = lambda: shared.unmount(path)
            return
        app = web.Application()
        app.router.add_post(path, receive)
        # Header timeout and connection cap: the webhook's port faces the internet.
        self._served = await serve_app(app, host, port, clock=self._clock)

    def _webhook_handler(
        self, bot: Bot, secret_token: str
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def receive(request: web.Request) -> web.Response:
            if self._closing:
                return web.Response(status=503)  # Telegram retries it after the restart
            given = request.headers.get(SECRET_HEADER, "")
            if not hmac.compare_digest(given.encode(), secret_token.encode()):
                event(log, logging.WARNING, "telegram_webhook_refused", remote=request.remote)
                return web.Response(status=403)
            try:
                raw = await request.json()
                update = Update.de_json(raw, bot)
            except Exception as exc:
                event(log, logging.WARNING, "telegram_webhook_bad_body", error=repr(exc))
                return web.Response(status=400)
            job = self.submit(update, raw)
            if job is not None:
                # Answering 200 is the confirmation: only once it is safe. A
                # message held for a storage retry gets a 503 instead, so
                # Telegram delivers it again later; the retry goes on here.
                await asyncio.shield(self._settled([job]))
                if not job.safe.done() or job.safe.cancelled():
                    return web.Response(status=503)
            return web.Response(text="ok")

        return receive

    # --- stopping --------------------------------------------------------------------

    async def stop_polling(self) -> None:
        """Stop calling getUpdates (another worker polls now); updates taken
        in go on through their chat queues."""
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._poller
            self._poller = None

    @property
    def polling(self) -> bool:
        return self._poller is not None and not self._poller.done()

    async def stop(self, grace: float) -> None:
        """Take in nothing more; give the chat queues `grace` seconds to finish their
        updates, then cancel them (those stay unconfirmed)."""
        self._closing = True
        await self.stop_polling()
        if self._parking is not None:
            await self._parking.stop()
        workers = [queue.worker for queue in self._chat_queues.values() if queue.worker is not None]
        if workers:
            await asyncio.wait(workers, timeout=grace)
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        for job in self._open.values():
            job.safe.cancel()
        self._open.clear()
        self._chat_queues.clear()
        self._changed.set()
        if self._served is not None:
            await self._served.stop()
            self._served = None
        if self._unmount is not None:
            self._unmount()
            self._unmount = None


def _chat_of(update: Update) -> int | None:
    chat = update.effective_chat
    return chat.id if chat is not None else None
