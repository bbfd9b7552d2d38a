"""Sending at Telegram's pace: throttled before the request, not only after a 429.

python-telegram-bot's AIORateLimiter does the throttling (aiolimiter leaky
buckets: one for the whole bot, one per group), on the ExtBot every kept
request goes through. What kept sets on it:

- `max_retries=0`: a 429 goes straight back to channels/telegram/send.py,
  whose at-most-once rules decide whether to wait and retry.
- Budgets that hold over any window, not only on average. A leaky bucket of
  capacity `max_rate` lets a full bucket's burst go at once and then drains
  at max_rate / time_period: PTB's default for groups (20 per 60 s) sends a
  burst of 40 messages as 20 at once and 19 more within the same minute.
  A `Budget` of at most `limit` in any `window` seconds, `burst` at once, is
  a bucket of capacity `burst` draining (limit - burst) per window, so no
  window ever holds more than `limit`.
- Only messages count: "typing…" and the admin check of a group command are
  not messages, and would otherwise eat a busy group's twenty a minute.

Private chats: AIORateLimiter gives them no bucket of their own (only the
overall one); Telegram's "about one message a second" per private chat
tolerates bursts, and kept sends a private chat one reply per message.

The buckets live in the process: with several workers each keeps its own,
so the overall budget is per worker, and a group's replies (sent by the one
worker holding the chat) share the minute with check-ins and reminders that
another worker may send.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from telegram.ext import AIORateLimiter

JSONDict = dict[str, Any]

# Requests with a chat that are not messages: never held for a chat's budget.
NOT_MESSAGES = frozenset({"sendChatAction", "getChatMember", "getChat"})


@dataclass(frozen=True, slots=True)
class Budget:
    """At most `limit` requests in any `window` seconds, up to `burst` of them at once."""

    limit: int
    window: float
    burst: int

    def __post_init__(self) -> None:
        if not 0 < self.burst < self.limit or self.window <= 0:
            raise ValueError(f"a budget needs 0 < burst < limit and a window > 0: {self}")

    def bucket(self) -> tuple[float, float]:
        """(max_rate, time_period) of the aiolimiter bucket that keeps this budget."""
        return float(self.burst), self.burst * self.window / (self.limit - self.burst)


@dataclass(frozen=True, slots=True)
class Pace:
    # Telegram: about 30 messages a second in all, 20 a minute per group.
    overall: Budget = Budget(limit=30, window=1.0, burst=10)
    group: Budget = Budget(limit=20, window=60.0, burst=8)


TELEGRAM_PACE = Pace()


class _QuietFinal429(logging.Filter):
    """With max_retries=0 PTB logs every 429 as an exception with its
    traceback; kept logs the 429 itself, once, with what it does about it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Rate limit hit after maximum")


_PTB_LIMITER_LOG = logging.getLogger("telegram.ext.AIORateLimiter")
if not any(isinstance(f, _QuietFinal429) for f in _PTB_LIMITER_LOG.filters):
    _PTB_LIMITER_LOG.addFilter(_QuietFinal429())


class PacedSends(AIORateLimiter):
    """AIORateLimiter with kept's budgets; requests that are no message pass."""

    def __init__(self, pace: Pace = TELEGRAM_PACE) -> None:
        overall_rate, overall_period = pace.overall.bucket()
        group_rate, group_period = pace.group.bucket()
        super().__init__(
            overall_max_rate=overall_rate,
            overall_time_period=overall_period,
            group_max_rate=group_rate,
            group_time_period=group_period,
            max_retries=0,
        )

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, bool | JSONDict | list[JSONDict]]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> bool | JSONDict | list[JSONDict]:
        if endpoint in NOT_MESSAGES:
            return await callback(*args, **kwargs)
        return await super().process_request(
            callback, args, kwargs, endpoint, data, rate_limit_args
        )
