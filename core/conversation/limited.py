"""A conversation's limits (core/limits/) as a user meets them: a message
stored with its limits decided, the one notice when it is over a rate, the
answer when a token budget is spent, and the hold its turn's first call
uses (taken where the message is stored, so it costs no transaction).

The ConversationManager asks this at each step of a turn; the decisions
themselves are the database's (Store.admit_message, the Meter)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

from core.clock import Clock
from core.config.model import KeptConfig
from core.limits import Admissions, BudgetSpent, Meter
from core.limits.notices import budget_notice, rate_notice
from core.limits.store import ALLOWED, Admitted, Hold, RateVerdict, Spent
from core.logs import event
from core.messages import Inbound, Outbound, Sender
from core.store.base import MessageRecord, NewMessage, SessionRecord, Store
from core.tools import ToolRegistry

log = logging.getLogger("kept.conversation")

# The text of the row that answers a message a spent budget left unanswered.
BUDGET_MARKER = "(not answered: the token budget is spent)"


class FirstHold:
    """The hold a message's admission took for its turn's first call, used
    by that call only (later tool rounds hold their own)."""

    __slots__ = ("_held",)

    def __init__(self, held: Hold | Spent | None) -> None:
        self._held = held

    def take(self) -> Hold | Spent | None:
        held, self._held = self._held, None
        return held


class ConversationLimits:
    def __init__(
        self,
        *,
        store: Store,
        sender: Sender,
        meter: Meter,
        clock: Clock,
        config: Callable[[], KeptConfig],
        tools: ToolRegistry,
        admissions: Admissions | None,
    ) -> None:
        self._store = store
        self._sender = sender
        self._meter = meter
        self._clock = clock
        self._config = config
        self._tools = tools
        # None: no limits (tests, benchmarks that measure without).
        self._admissions = admissions
        # Chats whose message holds its turn's first call (`first_hold_slot`).
        self._pre_holds: set[str] = set()

    @contextlib.contextmanager
    def first_hold_slot(self, session_key: str) -> Iterator[bool]:
        """Whether a message of this chat may hold its turn's first call at
        admission: one at a time in this process, so a burst stored before
        its first turn starts does not hold a whole prompt for each message
        (later turns hold at their own call)."""
        mine = session_key not in self._pre_holds
        if mine:
            self._pre_holds.add(session_key)
        try:
            yield mine
        finally:
            if mine:
                self._pre_holds.discard(session_key)

    async def store_message(
        self, inbound: Inbound, message: NewMessage, *, hold_first: bool
    ) -> tuple[MessageRecord, Admitted]:
        """The message stored, its limits decided in the same transaction
        (core/limits/admission.py): over a rate it is kept `limited`."""
        admission = None
        if self._admissions is not None:
            agent = self._config().agent_or_default(inbound.agent_id)
            specs = self._tools.specs()
            tools_chars = self._meter.tools_chars(specs) if specs else 0
            admission = self._admissions.admission(
                inbound, agent, tools_chars, self._clock.now(), hold_first=hold_first
            )
        if admission is None:
            return await self._store.add_message(message), Admitted(ALLOWED)
        return await self._store.admit_message(message, admission)

    async def tell_limited(
        self, inbound: Inbound, user: MessageRecord, verdict: RateVerdict
    ) -> None:
        """A message over a rate is stored and not answered; its sender is
        told when they may write again, once a window (the store says
        whether this is the first refusal of it, for every worker)."""
        event(
            log,
            logging.INFO,
            "message_limited",
            agent=inbound.agent_id,
            session=inbound.session_key,
            message=user.id,
            limit=verdict.limit,
            retry_at=verdict.retry_at,
            told=verdict.notify,
            action="none needed; raise limits.perUser/perChat.messagesPerMinute if real "
            "users hit it",
        )
        if not verdict.notify or verdict.retry_at is None:
            return
        shared = inbound.chat_kind != "private"
        await self._sender.send(
            Outbound(
                target=inbound.target,
                text=rate_notice(verdict.retry_at, self._clock.now(), shared=shared),
                reply_to_platform_id=inbound.platform_message_id if shared else None,
            )
        )

    async def over_budget(
        self, session: SessionRecord, user: MessageRecord, spent: BudgetSpent
    ) -> tuple[MessageRecord, bool]:
        """A token budget is spent: the message is answered by a notice the
        first time this subject meets it today (whichever worker), by a
        silent marker after that, so a spent budget never answers a flood
        message by message. Either row marks the message answered (kind
        `error`: never in the model's history), so recovery leaves it. The
        row stored, and whether it is a notice to send."""
        try:
            tell = await self._meter.first_notice(spent)
        except Exception as exc:
            event(
                log, logging.WARNING, "budget_notice_unknown", session=session.key, error=repr(exc)
            )
            tell = False
        event(
            log,
            logging.INFO,
            "budget_spent",
            agent=session.agent_id,
            session=session.key,
            message=user.id,
            budget=spent.subject.kind,
            resets_at=spent.resets_at,
            told=tell,
            action="raise limits.*tokensPerDay, or see `kept usage --by user`",
        )
        now = self._clock.now()
        reply = await self._store.add_message(
            NewMessage(
                session_key=session.key,
                role="assistant",
                text=budget_notice(spent, now) if tell else BUDGET_MARKER,
                ts=now,
                kind="error",
                in_reply_to=user.id,
                send_state="stored" if tell else None,
            )
        )
        return reply, tell

    async def give_back(self, first: FirstHold) -> None:
        """The first call's hold, if no call of the turn used it (the
        message was answered elsewhere, or the turn failed first)."""
        if (unused := first.take()) is not None:
            await self._meter.give_back(unused)
