"""Sending something the user did not just ask for (a check-in, a reminder)
at most once.

A send is retried only when the platform certainly did not take it
(`SendResult.retryable`: connection refused, 429, 5xx before acceptance).
A send whose fate is unknown (timeout after the request went out) is never
repeated: a user gets at most one copy, even if that means none.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from core.clock import Clock
from core.messages import ChatKind, Outbound, Sender, SendResult, Target
from core.metrics import recorder

DEFAULT_ATTEMPTS = 4
BASE_BACKOFF = 2.0
MAX_BACKOFF = 60.0

Outcome = Literal["sent", "failed", "unknown"]
T = TypeVar("T")


class AccessCheck(Protocol):
    """Whether a chat is still served, asked just before something kept
    sends on its own (a check-in, a reminder): access is decided by the
    settings and approvals now, not by those of the time it was scheduled."""

    async def refusal(self, target: Target, chat_kind: ChatKind, member: str | None) -> str | None:
        """None when `target` is served now (a private chat: for `member`,
        the user it belongs to; a group: the group); else why it is not."""
        ...


class ServeAll:
    """The AccessCheck of a process without access rules (tests, tools)."""

    async def refusal(self, target: Target, chat_kind: ChatKind, member: str | None) -> str | None:
        return None


@dataclass(frozen=True, slots=True)
class Delivery:
    outcome: Outcome
    result: SendResult
    attempts: int

    @property
    def message_id(self) -> str | None:
        return self.result.message_id if self.outcome == "sent" else None


async def deliver_once(
    sender: Sender,
    outbound: Outbound,
    clock: Clock,
    *,
    max_attempts: int = DEFAULT_ATTEMPTS,
) -> Delivery:
    attempts = 0
    while True:
        attempts += 1
        result = await sender.send(outbound)
        if result.ok:
            return Delivery("sent", result, attempts)
        if result.unknown:
            return Delivery("unknown", result, attempts)
        if not result.retryable or attempts >= max_attempts:
            return Delivery("failed", result, attempts)
        wait = result.retry_after if result.retry_after is not None else _backoff(attempts)
        recorder().send_retry(outbound.target.platform)
        await clock.sleep(min(wait, MAX_BACKOFF))


def _backoff(attempt: int) -> float:
    return min(MAX_BACKOFF, BASE_BACKOFF * 2 ** (attempt - 1))


async def settle_despite_cancel(work: Awaitable[T]) -> T:
    """Run a claim's bookkeeping (release, fail) to its end even when the
    caller is cancelled again meanwhile; that cancellation is then re-raised.
    A claim's record must not stop half-way because a stop came twice."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task
        raise
