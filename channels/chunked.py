"""Sending a message with buttons: split like any message, the buttons on
its LAST chunk (the one read after the whole text), on both platforms.

The result follows ChannelAdapter.send: the first chunk's id is the one
recorded; a failure on the first chunk is the platform's answer, a failure
after it leaves the message partly sent, so its outcome is unknown and it is
never repeated.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from channels.base import split_message
from core.logs import event
from core.messages import Action, Outbound, SendResult, Target

log = logging.getLogger("kept.channels")

# (target, text, reply_to, actions) -> the platform's answer for one chunk.
SendChunk = Callable[[Target, str, str | None, Sequence[Action]], Awaitable[SendResult]]


async def send_with_actions(
    outbound: Outbound, limit: int, send_chunk: SendChunk, *, platform: str
) -> SendResult:
    chunks = split_message(outbound.text, limit)
    first: SendResult | None = None
    reply_to = outbound.reply_to_platform_id
    for n, chunk in enumerate(chunks, start=1):
        actions = outbound.actions if n == len(chunks) else ()
        result = await send_chunk(outbound.target, chunk, reply_to, actions)
        if not result.ok:
            event(
                log,
                logging.WARNING,
                "send_failed",
                platform=platform,
                chat=outbound.target.chat_id,
                thread=outbound.target.thread_id,
                chunk=n,
                error=result.error,
                retryable=result.retryable,
            )
            if first is None:
                return result
            return SendResult(message_id=first.message_id, error=result.error, unknown=True)
        first = first or result
        reply_to = None
    return first or SendResult(error="nothing to send")
