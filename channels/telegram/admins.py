"""Whether a user administers a chat (getChatMember), for the commands and
tools only an admin may use; when Telegram cannot say, the answer is no."""

from __future__ import annotations

import logging

from telegram import Bot
from telegram.constants import ChatMemberStatus
from telegram.error import TelegramError

from channels.telegram.messages import chat_id_param
from channels.telegram.send import scrub
from core.logs import event
from core.messages import Target

log = logging.getLogger("kept.telegram")

ADMIN_STATUSES = {ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR}


async def chat_admin(bot: Bot | None, target: Target, user_id: str, *, token: str) -> bool:
    """An administrator or the creator of the chat."""
    if bot is None or not user_id.lstrip("-").isdigit():
        return False
    try:
        member = await bot.get_chat_member(chat_id_param(target.chat_id), int(user_id))
    except TelegramError as exc:
        event(
            log,
            logging.WARNING,
            "telegram_admin_check_failed",
            chat=target.chat_id,
            error=scrub(str(exc), token),
        )
        return False  # refuse when unsure
    return member.status in ADMIN_STATUSES
