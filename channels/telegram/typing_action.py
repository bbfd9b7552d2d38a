"""\"typing…\" while a model call runs, within the pace: no more chats show
it at once than the pace lets replies out, so a burst spends no more on
chat actions than on its replies."""

from __future__ import annotations

from collections.abc import Callable

from telegram import Bot
from telegram.constants import ChatAction
from telegram.error import TelegramError

from channels.telegram.messages import chat_id_param
from channels.telegram.pace import Pace
from core.clock import Clock
from core.messages import Target

TYPING_EVERY = 4.5  # Telegram shows "typing…" for 5 s per chat action


class TypingIndicator:
    def __init__(self, bot: Callable[[], Bot | None], pace: Pace, clock: Clock) -> None:
        self._bot = bot
        self._pace = pace
        self._clock = clock
        self._typing = 0  # chats showing "typing…" now

    async def keep_typing(self, target: Target) -> None:
        """Until cancelled; none when as many chats as the pace lets out at
        once type already, or the bot is not connected."""
        bot = self._bot()
        if bot is None or self._typing >= self._pace.overall.limit:
            return
        thread = int(target.thread_id) if target.thread_id is not None else None
        self._typing += 1
        try:
            while True:
                try:
                    await bot.send_chat_action(
                        chat_id_param(target.chat_id), ChatAction.TYPING, message_thread_id=thread
                    )
                except TelegramError:
                    return  # cosmetic: a chat we cannot type in will show the reply's error
                await self._clock.sleep(TYPING_EVERY)
        finally:
            self._typing -= 1
