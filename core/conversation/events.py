"""What a finished turn tells the rest of kept: the reply event the
extraction queue (and any other on_reply hook) receives once a reply went
out, with the stored rows it is about."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.store.base import MessageRecord, SessionRecord


@dataclass(frozen=True, slots=True)
class ReplyEvent:
    """What the on_reply hooks see after a reply went out."""

    session: SessionRecord
    user_message: MessageRecord
    reply: MessageRecord
    sender_id: str | None
    turn_kind: str = "conversation"


ReplyHook = Callable[[ReplyEvent], Awaitable[None]]
