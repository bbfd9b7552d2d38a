"""The adapter's connection to the Bot API over its life: connect (retried
with backoff in the background while the API does not answer), the menu of
commands, the intake in its mode (arrival.py), and the order things stop in.

A token the Bot API rejects (or any other fixable problem) fails the start
at once, as one line; an API that does not answer (network, 5xx) does not:
the connection stays down (/readyz says so, nothing is sent through it) and
keeps trying on the injected clock."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from telegram import Bot
from telegram.error import TelegramError
from telegram.ext import ExtBot
from telegram.request import HTTPXRequest

from channels.base import ChannelStartError
from channels.context import ChannelContext
from channels.telegram.arrival import Arrival, PollTimes, start_arrival
from channels.telegram.commands import BOT_COMMANDS
from channels.telegram.connect import TelegramUnreachable, connect
from channels.telegram.intake import Processor, UpdateIntake
from channels.telegram.pace import Pace
from channels.telegram.send import scrub
from channels.telegram.shared_updates import SharedUpdates
from core.config.model import TelegramConfig
from core.logs import event

log = logging.getLogger("kept.telegram")

# Retrying a Bot API that did not answer at start: 1, 2, 4 … seconds, at most this.
MAX_CONNECT_BACKOFF = 60.0
# getUpdates failures in a row that make the adapter not ready (one or two
# are a blip; the loop backs off 1, 2, 4 … seconds between them).
POLL_FAILURES_NOT_READY = 3
# Connections beyond what the pace lets out at once, and the typing it
# allows besides: getUpdates, admin checks, a callback's answer.
SPARE_CONNECTIONS = 8


class TelegramConnection:
    """The bot, its token and the intake, from `start` to `close`; `started`
    is told the intake's mode once updates come in."""

    def __init__(
        self,
        ctx: ChannelContext,
        process: Processor,
        started: Callable[[str], None],
        *,
        times: PollTimes,
        pace: Pace,
        worker: str,
    ) -> None:
        self._ctx = ctx
        self._process = process
        self._announce = started
        self._times = times
        self._pace = pace
        self._worker = worker
        self.bot: Bot | None = None
        self.token = ""
        self.username = ""
        self.intake: UpdateIntake | None = None
        # Several workers on PostgreSQL: the queue of polled updates.
        self.shared_updates: SharedUpdates | None = None
        self.leader_looks = 0  # times this worker asked for the polling role
        self._connecting: asyncio.Task[None] | None = None
        self._leading: asyncio.Task[None] | None = None

    def _config(self) -> TelegramConfig:
        return self._ctx.config().channels.telegram

    @property
    def bot_id(self) -> int | None:
        return self.bot.id if self.bot is not None else None

    @property
    def connected(self) -> bool:
        """Token accepted and updates coming in (polling, webhook or queue),
        and polling not failing again and again."""
        intake = self.intake
        return (
            self.bot is not None
            and intake is not None
            and intake.poll_failures < POLL_FAILURES_NOT_READY
        )

    @property
    def polling(self) -> bool:
        """Whether this worker calls getUpdates now."""
        return self.intake is not None and self.intake.polling

    async def start(self) -> None:
        tg = self._config()
        try:
            bot, token = await connect(
                tg, self._ctx.environ, request=self._request, pace=self._pace
            )
        except TelegramUnreachable as exc:
            self._connecting = asyncio.create_task(
                self._connect_later(exc), name="telegram-connect"
            )
            return
        await self._started(bot, token, tg)

    async def _connect_later(self, first: TelegramUnreachable) -> None:
        failures, error = 1, first
        while True:
            wait = error.retry_after or min(MAX_CONNECT_BACKOFF, 2.0 ** (failures - 1))
            event(
                log,
                logging.WARNING if failures < 5 else logging.ERROR,
                "telegram_unreachable",
                error=str(error),
                failures=failures,
                retry_in_s=wait,
                action="kept keeps trying and is not ready until it connects; check the "
                "network or channels.telegram.baseUrl",
            )
            await self._ctx.clock.sleep(wait)
            tg = self._config()
            try:
                bot, token = await connect(
                    tg, self._ctx.environ, request=self._request, pace=self._pace
                )
                await self._started(bot, token, tg)
                return
            except TelegramUnreachable as exc:
                failures, error = failures + 1, exc
            except ChannelStartError as exc:  # e.g. the token, rejected once it answered
                event(
                    log,
                    logging.ERROR,
                    "telegram_start_failed",
                    error=str(exc),
                    action="fix it and restart kept; Telegram stays off (not ready) until then",
                )
                return

    async def _started(self, bot: ExtBot[None], token: str, tg: TelegramConfig) -> None:
        self.bot, self.token, self.username = bot, token, bot.username
        try:
            await bot.set_my_commands(BOT_COMMANDS)
        except TelegramError as exc:  # the menu is a convenience; the commands work without
            event(
                log, logging.WARNING, "telegram_commands_menu_failed", error=scrub(str(exc), token)
            )
        intake = UpdateIntake(self._process, self._ctx.clock, secret=token, parked=self._ctx.parked)
        try:
            arrival = await self._start_arrival(bot, intake, tg, token)
        except BaseException:
            await intake.stop(0)
            await bot.shutdown()
            self.bot = None
            raise
        self.intake = intake
        self._announce(arrival.mode)

    async def _start_arrival(
        self, bot: Bot, intake: UpdateIntake, tg: TelegramConfig, token: str
    ) -> Arrival:
        arrival = await start_arrival(
            self._ctx,
            bot,
            intake,
            tg,
            token=token,
            times=self._times,
            worker=self._worker,
            looked=self._looked,
        )
        self.shared_updates, self._leading = arrival.shared_updates, arrival.leading
        return arrival

    def _request(self) -> HTTPXRequest:
        """The HTTP client: one connection for each message the pace lets out
        at once and each chat it lets type, and a few more. Not PTB's 256:
        httpcore looks through its pool on every request."""
        t = self._times.request_timeout
        size = 2 * self._pace.overall.limit + SPARE_CONNECTIONS
        return HTTPXRequest(
            connection_pool_size=size,
            connect_timeout=t,
            read_timeout=t,
            write_timeout=t,
            pool_timeout=t,
        )

    def _looked(self) -> None:
        self.leader_looks += 1

    async def stop_taking(self, grace: float) -> None:
        """No more updates: stop connecting, give up the polling role, and let
        the intake finish what it has for `grace` seconds."""
        connecting, self._connecting = self._connecting, None
        if connecting is not None:
            connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await connecting
        leading, self._leading = self._leading, None
        if leading is not None:
            leading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await leading
            if self._ctx.leadership is not None and self.bot is not None:
                await self._ctx.leadership.resign(f"telegram-poll:{self.bot.id}")
        if self.shared_updates is not None:
            await self.shared_updates.stop_claiming()
        if self.intake is not None:
            await self.intake.stop(grace)
            self.intake = None
        if self.shared_updates is not None:
            await self.shared_updates.close()
            self.shared_updates = None

    async def close(self) -> None:
        """Release the bot (after the last send)."""
        if self.bot is not None:
            await self.bot.shutdown()
            self.bot = None
