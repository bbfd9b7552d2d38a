"""Sending at Telegram's pace: held back before the request, and under flood
control held until Telegram takes it.

Every request kept makes goes through the ExtBot's rate limiter, PacedSends.
What it keeps:

- Sliding windows, not leaky buckets: at most `limit` messages in any
  `window` seconds, for the whole bot (Telegram: about 30 a second) and per
  group (20 a minute). A slot is held from the moment a request leaves until
  `window` seconds after its answer came back, so the platform, which counts
  when a request arrives, never sees more than `limit` in any window however
  the requests were spread on the way; a full queue sustains `limit` a
  window, less only the round trip. The limits sit one under Telegram's.
- Flood control: a 429 means Telegram did not take the message, so sending
  it again cannot make a second copy. Every send of the bot (not only the
  refused one) waits out the `retry_after`, then the refused message is
  sent again, as often as it takes, until `flood_deadline` (minutes, far
  longer than any flood wait) has passed since it first asked to go out.
  After a flood the overall limit drops to what Telegram took in the window
  before it, and climbs back by one every `recover_after` seconds without
  one: a limit lower than kept's (a shared token, a throttled bot) costs
  one flood, not one per window.
- Only messages count (and wait): "typing…", the admin check of a group
  command, a button's answer are not messages, and would otherwise eat a
  busy group's twenty a minute.
- The moment a message leaves: a send may carry a `Departure`
  (channels/base.py) as its `rate_limit_args`; it is called after the
  waiting, just before the first request goes to Telegram, so a reply is
  recorded as `sending` only once it has left the process.

Private chats get no window of their own (only the overall one): Telegram's
"about one message a second" per private chat tolerates bursts, and kept
sends a private chat one reply per message.

The windows live in the process: with several workers each keeps its own,
so the overall budget is per worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from telegram.error import RetryAfter
from telegram.ext import BaseRateLimiter

from channels.departure import Departure
from channels.telegram.send import retry_after_seconds
from core.logs import event
from core.metrics import recorder

log = logging.getLogger("kept.telegram")

JSONDict = dict[str, Any]

# "typing…" is no message: it never waits for a budget.
NOT_MESSAGES = frozenset({"sendChatAction"})
# What puts a message in a chat (sendMessage, editMessageText, copyMessage…);
# everything else (getMe, setMyCommands, answerCallbackQuery) is no message.
MESSAGE_VERBS = ("send", "edit", "copy", "forward")


def is_message(endpoint: str) -> bool:
    return endpoint.startswith(MESSAGE_VERBS) and endpoint not in NOT_MESSAGES


class PaceClock(Protocol):
    """The clock the windows run on: the event loop's by default (a test's
    virtual one makes a minute of pacing take milliseconds)."""

    def time(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    def time(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass(frozen=True, slots=True)
class Budget:
    """At most `limit` messages in any `window` seconds."""

    limit: int
    window: float

    def __post_init__(self) -> None:
        if self.limit < 1 or self.window <= 0:
            raise ValueError(f"a budget needs a limit >= 1 and a window > 0: {self}")


@dataclass(frozen=True, slots=True)
class Pace:
    # Telegram: about 30 messages a second in all, 20 a minute per group.
    overall: Budget = Budget(limit=29, window=1.0)
    group: Budget = Budget(limit=19, window=60.0)
    # How long a message refused by flood control is tried again.
    flood_deadline: float = 600.0
    # After a flood, the overall limit climbs back by one this often.
    recover_after: float = 60.0
    clock: PaceClock = field(default_factory=LoopClock, compare=False)


TELEGRAM_PACE = Pace()


class _Window:
    """Slots of one sliding window: each held while its request is on the
    way (until = inf) and for `window` seconds after its answer."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self._until: list[float] = []

    def wait(self, now: float, limit: int) -> float:
        """Seconds until a slot is free (0: now; inf: when a request ends)."""
        self._until = [u for u in self._until if u > now]
        if len(self._until) < limit:
            return 0.0
        return sorted(self._until)[len(self._until) - limit] - now

    def take(self) -> None:
        self._until.append(math.inf)

    def done(self, now: float) -> None:
        """One request on the way came back: its slot frees a window later."""
        with contextlib.suppress(ValueError):
            self._until.remove(math.inf)
        self._until.append(now + self.budget.window)

    @property
    def idle(self) -> bool:
        return not self._until


class PacedSends(BaseRateLimiter[Departure]):
    """kept's pace for every Bot API request (see the module docstring)."""

    def __init__(self, pace: Pace = TELEGRAM_PACE) -> None:
        self._pace = pace
        self._clock = pace.clock
        self._overall = _Window(pace.overall)
        self._groups: dict[int | str, _Window] = {}
        self._group_turns: dict[int | str, asyncio.Lock] = {}
        self._turn = asyncio.Lock()  # FIFO: messages leave in the order they asked
        self._changed = asyncio.Event()
        self._paused_until = 0.0
        self._ceiling = pace.overall.limit
        self._flood_at: float | None = None
        self._calm_since = 0.0
        self._accepted: deque[float] = deque()

    async def initialize(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    @property
    def limit(self) -> int:
        """The overall limit now (lower than the budget's after a flood)."""
        return self._ceiling

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, bool | JSONDict | list[JSONDict]]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: Departure | None,
    ) -> bool | JSONDict | list[JSONDict]:
        if not is_message(endpoint):
            return await callback(*args, **kwargs)
        group = _group_of(data.get("chat_id"))
        deadline = self._clock.time() + self._pace.flood_deadline
        while True:
            if group is not None:
                await self._group_slot(group)
            await self._overall_slot()
            try:
                if rate_limit_args is not None:
                    await rate_limit_args.leave()
                result = await callback(*args, **kwargs)
            except RetryAfter as exc:
                self._answered(group, accepted=False)
                wait = retry_after_seconds(exc)
                self._flooded(wait, endpoint, data.get("chat_id"))
                if self._clock.time() + wait > deadline:
                    raise
                recorder().send_retry("telegram")
                continue
            except BaseException:
                self._answered(group, accepted=False)
                raise
            self._answered(group, accepted=True)
            return result

    # --- windows ------------------------------------------------------------------

    async def _overall_slot(self) -> None:
        async with self._turn:
            while True:
                now = self._clock.time()
                self._recover(now)
                paused = self._paused_until - now
                wait = max(paused, self._overall.wait(now, self._ceiling))
                if wait <= 0:
                    break
                await self._sleep_or_change(wait)
            self._overall.take()

    async def _group_slot(self, group: int | str) -> None:
        window = self._groups.setdefault(group, _Window(self._pace.group))
        turn = self._group_turns.setdefault(group, asyncio.Lock())
        async with turn:
            while (wait := window.wait(self._clock.time(), self._pace.group.limit)) > 0:
                await self._sleep_or_change(wait)
            window.take()

    def _answered(self, group: int | str | None, *, accepted: bool) -> None:
        now = self._clock.time()
        self._overall.done(now)
        if group is not None:
            self._groups[group].done(now)
            self._forget_idle_groups(now)
        if accepted:
            self._accepted.append(now)
        # Kept as far back as a flood's reckoning looks (see _recover).
        horizon = min(now, self._flood_at if self._flood_at is not None else now)
        while self._accepted and self._accepted[0] <= horizon - self._pace.overall.window:
            self._accepted.popleft()
        self._changed.set()
        self._changed = asyncio.Event()

    async def _sleep_or_change(self, seconds: float) -> None:
        """Sleep `seconds` (a window's slot frees), or until a request comes
        back (a slot that was waiting for its answer frees a window later)."""
        changed = asyncio.ensure_future(self._changed.wait())
        tasks = {changed}
        if math.isfinite(seconds):
            tasks.add(asyncio.ensure_future(self._clock.sleep(seconds)))
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()

    def _forget_idle_groups(self, now: float) -> None:
        if len(self._groups) < 1000:
            return
        for group in [g for g, w in self._groups.items() if w.wait(now, 1) == 0 and w.idle]:
            turn = self._group_turns.get(group)
            if turn is None or not turn.locked():
                self._groups.pop(group, None)
                self._group_turns.pop(group, None)

    # --- flood control --------------------------------------------------------------

    def _flooded(self, wait: float, endpoint: str, chat: object) -> None:
        recorder().rate_limited("telegram")
        now = self._clock.time()
        if now < self._paused_until and self._flood_at is not None:
            self._paused_until = max(self._paused_until, now + wait)
            return  # the same flood: others of the burst refused with it
        self._paused_until = now + wait
        self._flood_at = now
        event(
            log,
            logging.WARNING,
            "telegram_flood_wait",
            wait_s=wait,
            method=endpoint,
            chat=chat,
            limit=self._ceiling,
            action="none needed: every send waits, then the refused ones are sent again; "
            "if this repeats, another program may be sending with this bot's token",
        )

    def _recover(self, now: float) -> None:
        """At the end of a flood wait: the overall limit becomes what
        Telegram took in the window before it; later, one more every
        `recover_after` seconds without a flood."""
        flood_at = self._flood_at
        if flood_at is not None and now >= self._paused_until:
            window = self._pace.overall.window
            took = sum(1 for t in self._accepted if flood_at - window < t <= self._paused_until)
            self._ceiling = max(1, min(self._ceiling, took))
            self._flood_at = None
            self._calm_since = now
            return
        calm = now - self._calm_since >= self._pace.recover_after
        if flood_at is None and calm and self._ceiling < self._pace.overall.limit:
            self._ceiling += 1
            self._calm_since = now


def _group_of(chat_id: object) -> int | str | None:
    """The chat when it is a group, supergroup or channel (a negative id, or
    an @username, which only those have); None for a private chat."""
    if isinstance(chat_id, str):
        try:
            chat_id = int(chat_id)
        except ValueError:
            return chat_id
    if isinstance(chat_id, int) and chat_id < 0:
        return chat_id
    return None
