"""The limits' ports: rates, token budgets and the record of what each
model call used. Implemented once in SQL (core/store/sql/limits.py), so
every worker on one database counts against the same rows.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from core.metrics import Limit

SubjectKind = Literal["user", "chat", "bot"]
UsageGrouping = Literal["user", "chat", "agent", "role", "model"]


@dataclass(frozen=True, slots=True)
class Subject:
    """Who a limit counts: a platform user, a shared chat, or the whole bot
    (kind 'bot', platform and id empty)."""

    kind: SubjectKind
    platform: str = ""
    subject_id: str = ""

    @property
    def limit(self) -> Limit:
        """The limit a token budget of this subject is, for metrics."""
        return "user_tokens" if self.kind == "user" else f"{self.kind}_tokens"  # type: ignore[return-value]


BOT = Subject("bot")


@dataclass(frozen=True, slots=True)
class RateRule:
    """A subject may send `per_minute` messages at once, then one every
    60 / `per_minute` seconds (GCRA: core/limits/admission.py)."""

    subject: Subject
    per_minute: int


@dataclass(frozen=True, slots=True)
class RateVerdict:
    allowed: bool
    # The rule that refused, when one did.
    limit: Limit | None = None
    # When the refusing rule takes a message again.
    retry_at: datetime | None = None
    # The first refusal of this window: the sender is told, once.
    notify: bool = False


ALLOWED = RateVerdict(True)


@dataclass(frozen=True, slots=True)
class Cap:
    subject: Subject
    tokens: int


@dataclass(frozen=True, slots=True)
class Hold:
    """Tokens set aside for a call under way, on `day`, of each subject."""

    subjects: tuple[Subject, ...]
    day: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Spent:
    """The first cap a call would go past: nothing was held."""

    cap: Cap
    spent: int


@dataclass(frozen=True, slots=True)
class CallUsage:
    """What one model call used, and for whom."""

    at: datetime
    agent_id: str
    role: str
    model: str
    platform: str | None
    user_id: str | None
    chat_id: str | None
    shared: bool
    tokens_in: int
    tokens_out: int
    estimated: bool  # the endpoint said nothing; counted from characters


@dataclass(frozen=True, slots=True)
class UsageLine:
    """One group of `kept usage`: calls and tokens (and how many estimated)."""

    key: str
    calls: int
    tokens_in: int
    tokens_out: int
    estimated_calls: int
    # Per model: (tokens in, tokens out), for prices that differ by model.
    by_model: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Admission:
    """What a user's message decides in its own insert's transaction
    (Store.admit_message): its rates, and when its turn's first call is
    capped, that call's hold (taken before the prompt is built, so it
    holds the most such a prompt can be: core/limits/admission.py)."""

    rules: tuple[RateRule, ...]
    now: datetime
    caps: tuple[Cap, ...] = ()
    day: str = ""
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class Admitted:
    verdict: RateVerdict
    # The first call's hold (None: nothing capped, or the message was
    # refused); Spent: a cap is reached, the turn makes no call.
    hold: Hold | Spent | None = None


class BudgetStore(abc.ABC):
    @abc.abstractmethod
    async def hold(self, caps: Sequence[Cap], day: str, tokens: int) -> Hold | Spent:
        """Set `tokens` aside on `day` for each capped subject, in one
        transaction, when each has spent + held below its cap; otherwise
        Spent (the first cap reached) and nothing held."""

    @abc.abstractmethod
    async def release(self, hold: Hold) -> None:
        """A call that used nothing (it failed): its tokens are free again."""

    @abc.abstractmethod
    async def record(
        self, usage: CallUsage, subjects: Sequence[Subject], day: str, hold: Hold | None
    ) -> None:
        """In one transaction: the call's row, its tokens added to each
        subject's day, and its hold (if any) given back."""

    @abc.abstractmethod
    async def first_notice(self, subject: Subject, day: str) -> bool:
        """True once per subject and day: the first to ask tells the subject
        their budget is spent; every later ask (any worker) gets False."""

    @abc.abstractmethod
    async def spent(self, subjects: Sequence[Subject], day: str) -> dict[Subject, int]:
        """Tokens each subject spent on `day` (absent: none)."""


class UsageStore(abc.ABC):
    @abc.abstractmethod
    async def usage(self, since: datetime, by: UsageGrouping) -> list[UsageLine]:
        """Model calls since `since`, grouped `by`, largest first."""

    @abc.abstractmethod
    async def user_usage(self, platform: str, user_id: str, since: datetime) -> UsageLine:
        """One user's calls since `since` (key: "platform:user")."""
