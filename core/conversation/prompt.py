"""The chat model's context for one turn: the system prompt and the kept
part of the history.

The system prompt tells the model where it writes — which platform, which
kind of chat, and what renders there — and the user's local time in their
own zone, so "tomorrow at 9" and "at 9am" mean the user's 9 o'clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from core.config.model import AgentConfig
from core.messages import ChatKind
from core.store.base import MessageRecord

# What the platform makes of the model's text.
RENDERING: dict[str, str] = {
    "telegram": (
        "Your reply is shown in Telegram: Markdown (bold, italic, inline code, code "
        "blocks, links, lists, quotes) is converted to Telegram's formatting, and headings "
        "become bold lines. Tables do not render there: use short lists instead."
    ),
    "discord": (
        "Your reply is shown in Discord, which renders Markdown (bold, italic, code "
        "blocks, links, lists, quotes, headings). Tables do not render: use lists."
    ),
    "console": (
        "Your reply is shown in a terminal as plain text: write without Markdown formatting."
    ),
}
_UNKNOWN_PLATFORM = "Keep formatting simple: plain sentences and short lists."

CHAT_KINDS: dict[ChatKind, str] = {
    "private": "a private chat with one person",
    "group": "a group chat: several people read your replies",
    "channel": "a channel: everyone in it reads your replies",
}

# The kinds of stored rows the model sees again; tool rows are left out.
HISTORY_KINDS = ("text", "checkin", "reminder")


@dataclass(frozen=True, slots=True)
class TurnPlace:
    """Where and when a turn happens, as the prompt tells the model."""

    platform: str
    chat_kind: ChatKind
    now: datetime
    timezone: str  # the user's own zone, else the agent's
    own_zone: bool  # the user set `timezone` themselves


def system_prompt(agent: AgentConfig, place: TurnPlace) -> str:
    """The agent's own prompt, then where the turn is and the user's time."""
    local = place.now.astimezone(ZoneInfo(place.timezone))
    platform = place.platform.capitalize() if place.platform in RENDERING else place.platform
    whose = (
        "That is the user's own time zone."
        if place.own_zone
        else "The user has set no time zone of their own; that is the default."
    )
    where = (
        f"This conversation is on {platform}, in {CHAT_KINDS.get(place.chat_kind, 'a chat')}. "
        f"{RENDERING.get(place.platform, _UNKNOWN_PLATFORM)}"
    )
    # The model cannot resolve "tomorrow at 9" for reminders without today.
    when = (
        f"Current time for the user: {local.strftime('%A %Y-%m-%d %H:%M')} "
        f"({place.timezone}). {whose}"
    )
    return f"{agent.system_prompt}\n\n{when}\n{where}"


def history_messages(rows: Sequence[MessageRecord], budget: int) -> list[dict[str, Any]]:
    """The newest of `rows` (oldest first, as the store reads them) that fit
    `budget` characters, oldest first."""
    kept: list[dict[str, Any]] = []
    # Past tool rows are left out: a trimmed history could orphan a tool
    # result from its call, which OpenAI-compatible servers reject.
    for row in reversed(rows):
        if row.kind not in HISTORY_KINDS or row.role not in ("user", "assistant"):
            continue
        budget -= len(row.text)
        if budget < 0:
            break
        kept.append({"role": row.role, "content": row.text})
    kept.reverse()
    return kept


def chat_messages(
    agent: AgentConfig, place: TurnPlace, rows: Sequence[MessageRecord], user_text: str
) -> list[dict[str, Any]]:
    """The whole context of a chat turn: system prompt, history, the user's message."""
    history = history_messages(rows, agent.history_chars - len(user_text))
    return [
        {"role": "system", "content": system_prompt(agent, place)},
        *history,
        {"role": "user", "content": user_text},
    ]
