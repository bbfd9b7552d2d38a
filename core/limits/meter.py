"""Every model call, metered: checked against the token budgets before it
is made, counted after.

A call is made only when every capped subject it is charged to (its user,
its shared chat, the whole bot) has spent + held below the cap, and the
same transaction holds the call's most: its prompt's characters (a token
is almost never shorter than a character) plus the role's output cap. A
second worker deciding meanwhile sees that hold, so however many workers
call at once, a day's spend passes a cap by at most one call's worth.
After the call the endpoint's `usage` replaces the hold (estimated from
characters when the endpoint gives none, and marked so). A call that fails
gives its hold back; a worker killed mid-call leaves it held until the day
ends, which errs on the side of the cap.

Who pays is the caller's to say (`Payer`): a chat turn's sender, an
extraction's or a check-in's member and chat. Nothing here reads a
message's text for that.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any, Protocol

from core.clock import Clock
from core.config.model import KeptConfig
from core.errors import KeptError
from core.limits.store import BOT, BudgetStore, CallUsage, Cap, Hold, Spent, Subject
from core.llm import Completion, Model, Role
from core.logs import event
from core.metrics import recorder

log = logging.getLogger("kept.limits")

# Characters per token when an endpoint reports no usage: a fair average
# for English; the hold uses one character a token, the bound.
CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Payer:
    """Whom a call is charged to: a platform user, and the chat it is for
    (`shared`: a group, whose own budget applies too)."""

    agent_id: str
    platform: str | None = None
    user_id: str | None = None
    chat_id: str | None = None
    shared: bool = False

    def subjects(self) -> list[Subject]:
        found = []
        if self.platform is not None and self.user_id is not None:
            found.append(Subject("user", self.platform, self.user_id))
        if self.shared and self.platform is not None and self.chat_id is not None:
            found.append(Subject("chat", self.platform, self.chat_id))
        found.append(BOT)
        return found


class BudgetSpent(KeptError):
    """A cap was reached: the call was not made."""

    def __init__(self, spent: Spent, day: str, resets_at: datetime) -> None:
        super().__init__(
            f"{spent.cap.subject.kind} budget spent ({spent.spent} of {spent.cap.tokens} tokens)"
        )
        self.spent = spent
        self.day = day
        self.resets_at = resets_at

    @property
    def subject(self) -> Subject:
        return self.spent.cap.subject


def budget_day(now: datetime) -> str:
    """The UTC day a budget counts (ISO date)."""
    return now.astimezone(UTC).date().isoformat()


def next_reset(now: datetime) -> datetime:
    """The next UTC midnight: when every day's budget starts again."""
    day = now.astimezone(UTC).date() + timedelta(days=1)
    return datetime.combine(day, time(0), tzinfo=UTC)


def caps_for(config: KeptConfig, subjects: list[Subject]) -> list[Cap]:
    limits = config.limits
    caps = []
    for subject in subjects:
        tokens = {
            "user": limits.per_user.tokens_per_day,
            "chat": limits.per_chat.tokens_per_day,
            "bot": limits.tokens_per_day,
        }[subject.kind]
        if tokens is not None:
            caps.append(Cap(subject, tokens))
    return caps


class ToolsChars:
    """The length of a tools list as sent, measured once per list: the tool
    registry hands out one list until a tool is added."""

    def __init__(self) -> None:
        self._seen: tuple[int, int] | None = None

    def __call__(self, tools: list[dict[str, Any]]) -> int:
        if self._seen is not None and self._seen[0] == id(tools):
            return self._seen[1]
        chars = len(json.dumps(tools))
        self._seen = (id(tools), chars)
        return chars


def prompt_chars(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    tools_chars: Callable[[list[dict[str, Any]]], int] = lambda t: len(json.dumps(t)),
) -> int:
    """The characters a call sends the model: its messages' texts, its tool
    calls' arguments, and the tools' descriptions."""
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        for call in message.get("tool_calls") or ():
            total += len(call.get("function", {}).get("arguments", ""))
    if tools:
        total += tools_chars(tools)
    return total


def _estimate(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


class Meter:
    """The model, as every caller uses it: charged to a payer. With no
    `budgets` (tests, benchmarks) nothing is held or stored; the tokens
    are still counted in the metrics."""

    def __init__(
        self,
        model: Model,
        *,
        config: Callable[[], KeptConfig],
        clock: Clock,
        budgets: BudgetStore | None = None,
    ) -> None:
        self._model = model
        self._config = config
        self._clock = clock
        self._budgets = budgets
        self._tools_chars = ToolsChars()

    @property
    def model(self) -> Model:
        return self._model

    async def complete(
        self,
        payer: Payer,
        role: Role,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        held: Hold | Spent | None = None,
    ) -> Completion:
        """One call for `payer`; BudgetSpent (and no call) when a cap is
        reached. `held`: the call's hold (or its refusal), already decided
        where the message was stored (core/limits/admission.py)."""
        config = self._config()
        subjects = payer.subjects()
        chars = prompt_chars(messages, tools, self._tools_chars)
        now = self._clock.now()
        day = budget_day(now)
        if held is None and self._budgets is not None and (caps := caps_for(config, subjects)):
            held = await self._budgets.hold(caps, day, chars + config.llm.output_cap(role))
        if isinstance(held, Spent):
            recorder().over_limit(held.cap.subject.limit)
            raise BudgetSpent(held, day, next_reset(now))
        hold = held
        try:
            completion = await self._model.complete(
                role, messages, tools=tools, temperature=temperature
            )
        except BaseException:
            if hold is not None:
                await self.give_back(hold)
            raise
        await self._count(payer, role, subjects, day, hold, chars, completion)
        return completion

    async def _count(
        self,
        payer: Payer,
        role: Role,
        subjects: list[Subject],
        day: str,
        hold: Hold | None,
        chars: int,
        completion: Completion,
    ) -> None:
        usage = completion.usage
        if usage is not None:
            tokens_in, tokens_out = usage.prompt_tokens, usage.completion_tokens
        else:
            written = len(completion.text) + sum(len(c.arguments) for c in completion.tool_calls)
            tokens_in, tokens_out = _estimate(chars), _estimate(written)
        recorder().model_tokens(role, "in", tokens_in)
        recorder().model_tokens(role, "out", tokens_out)
        if self._budgets is None:
            return
        record = CallUsage(
            at=self._clock.now(),
            agent_id=payer.agent_id,
            role=role,
            model=completion.model,
            platform=payer.platform,
            user_id=payer.user_id,
            chat_id=payer.chat_id,
            shared=payer.shared,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            estimated=usage is None,
        )
        try:
            await self._budgets.record(record, subjects, hold.day if hold else day, hold)
        except Exception as exc:
            # The call was made and its answer is good: the turn goes on.
            # Its hold stays until the day ends, so no cap is passed for it.
            event(
                log,
                logging.ERROR,
                "usage_not_recorded",
                agent=payer.agent_id,
                role=role,
                user=payer.user_id,
                tokens=tokens_in + tokens_out,
                error=repr(exc),
                action="check the database; this call's tokens are missing from `kept usage`",
            )

    def tools_chars(self, tools: list[dict[str, Any]]) -> int:
        """The characters of a tools list as sent (measured once per list)."""
        return self._tools_chars(tools)

    async def give_back(self, hold: Hold | Spent) -> None:
        """A hold taken for a call that failed or was never made: its tokens
        are free again (when that cannot be stored, it counts until the day
        ends, on the side of the cap)."""
        if not isinstance(hold, Hold) or self._budgets is None:
            return
        try:
            await self._budgets.release(hold)
        except Exception as exc:
            event(
                log,
                logging.WARNING,
                "budget_hold_kept",
                subjects=",".join(f"{s.kind}:{s.platform}:{s.subject_id}" for s in hold.subjects),
                tokens=hold.tokens,
                error=repr(exc),
                note="the hold counts until the day ends",
            )

    def charged_to(self, payer: Payer) -> Model:
        """The model as a caller that takes any Model sees it (extraction,
        the heartbeat), every call charged to `payer`."""
        return _Charged(self, payer)

    async def first_notice(self, spent: BudgetSpent) -> bool:
        """Whether the payer is to be told their budget is spent: once per
        subject and day, whichever worker asks first."""
        if self._budgets is None:
            return True
        return await self._budgets.first_notice(spent.subject, spent.day)


class _Charged:
    def __init__(self, meter: Meter, payer: Payer) -> None:
        self._meter = meter
        self._payer = payer

    async def complete(
        self,
        role: Role,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
    ) -> Completion:
        return await self._meter.complete(
            self._payer, role, messages, tools=tools, temperature=temperature
        )


class PayingScope(Protocol):
    """What a follow-up scope (core/commitments/model.Scope) says of whom a
    call about it is for."""

    agent_id: str
    platform: str
    chat_id: str
    sender_id: str | None
    chat_kind: str


def scope_payer(scope: PayingScope) -> Payer:
    """Whom a call about a follow-up scope (an extraction, a check-in) is
    charged to: its member (in a private chat, the chat's user) and, in a
    group, the group."""
    shared = scope.chat_kind != "private"
    user = scope.sender_id if scope.sender_id is not None else (None if shared else scope.chat_id)
    return Payer(scope.agent_id, scope.platform, user, scope.chat_id, shared)
