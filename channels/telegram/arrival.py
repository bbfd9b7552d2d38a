"""How updates arrive: this worker polls getUpdates itself, or one worker
(the one holding the polling lease) polls and hands every update to all
workers through the store's queue (shared_updates.py), or Telegram posts them to
kept's webhook."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from telegram import Bot
from telegram.error import TelegramError

from channels.context import ChannelContext
from channels.telegram.connect import start_webhook
from channels.telegram.intake import UpdateIntake
from channels.telegram.send import scrub
from channels.telegram.shared_updates import SharedUpdates, poll_while_leader
from core.config.model import TelegramConfig
from core.logs import event

log = logging.getLogger("kept.telegram")


@dataclass
class Arrival:
    """What a started intake runs on: `mode` for the start line; with several
    workers, the shared update queue and the task that polls while this worker leads."""

    mode: str
    shared_updates: SharedUpdates | None = None
    leading: asyncio.Task[None] | None = None


@dataclass(frozen=True)
class PollTimes:
    poll_timeout: float
    request_timeout: float
    max_claimed_chats: int


async def start_arrival(
    ctx: ChannelContext,
    bot: Bot,
    intake: UpdateIntake,
    tg: TelegramConfig,
    *,
    token: str,
    times: PollTimes,
    worker: str,
    looked: Callable[[], None],
) -> Arrival:
    """Start `intake` in the mode the config and the store call for."""
    hook = tg.webhook
    if hook is not None:
        await start_webhook(bot, intake, hook, ctx.environ, token=token, shared=ctx.web)
        return Arrival("webhook")
    try:
        # A webhook left over from another deployment makes getUpdates
        # fail with 409; removing it keeps its pending updates.
        await bot.delete_webhook(drop_pending_updates=False)
    except TelegramError as exc:
        event(log, logging.WARNING, "telegram_delete_webhook_failed", error=scrub(str(exc), token))
    if ctx.leadership is None or ctx.updates is None:
        intake.start_polling(bot, timeout=times.poll_timeout, read_timeout=times.request_timeout)
        return Arrival("polling")
    shared_updates = SharedUpdates(
        ctx.updates,
        intake,
        bot,
        ctx.clock,
        worker=ctx.worker or worker,
        secret=token,
        max_claimed_chats=times.max_claimed_chats,
    )
    shared_updates.start()
    leading = asyncio.create_task(
        poll_while_leader(
            ctx.leadership,
            bot,
            intake,
            shared_updates,
            ctx.clock,
            poll_timeout=times.poll_timeout,
            read_timeout=times.request_timeout,
            looked=looked,
        ),
        name="telegram-leader",
    )
    return Arrival("polling (one worker polls, every worker answers)", shared_updates, leading)
