"""One heartbeat turn for one scope: claim, ask the model, send once, record.

The turn owns its scope's claim (core/delivery/claim.py): `claimed` during the
model call, `sending` from its own fenced transaction just before the platform
call. Stopped before that, the claim is released (nothing was sent); stopped
after it, the commitment ends `failed` (the send may have happened, so it is
never repeated).

The destination is the scope stored with the commitments (platform, chat,
thread) and nothing else; the model's text is only ever the message body. In
a group, the check-in replies to the member's own message it is about.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from core.clock import Clock
from core.commitments.model import Commitment, Scope
from core.delivery.claim import take_despite_cancel
from core.delivery.mirror import mirror_sent
from core.delivery.send import AccessCheck, ServeAll, deliver_once
from core.heartbeat.claim import FollowUpClaim
from core.heartbeat.prompt import build_messages, clean_checkin, same_text
from core.heartbeat.store import HeartbeatStore
from core.limits.meter import BudgetSpent, Meter, scope_payer
from core.llm import LLMError, Model
from core.messages import Outbound, Sender, Target, followup_actions
from core.metrics import recorder
from core.store.base import Store

DUPLICATE_WINDOW = timedelta(hours=24)

TurnOutcome = Literal[
    "sent",
    "ok",
    "duplicate",
    "failed",
    "model_failed",
    "lost_claim",
    "switched_off",
    "not_served",
    "budget_spent",
]


@dataclass(frozen=True, slots=True)
class TurnResult:
    outcome: TurnOutcome
    commitment_ids: tuple[str, ...]
    message_id: str | None = None
    error: str | None = None


class HeartbeatTurn:
    def __init__(
        self,
        *,
        store: HeartbeatStore,
        transcript: Store,
        llm: Model,
        sender: Sender,
        clock: Clock,
        worker: str,
        on_sent: Callable[[Scope, str], None] | None = None,
        access: AccessCheck | None = None,
        meter: Meter | None = None,
    ) -> None:
        self._store = store
        self._transcript = transcript
        self._llm = llm
        # Each check-in's call charged to its scope's member and chat
        # (core/limits/); None: calls go to `llm` uncounted (tests).
        self._meter = meter
        self._sender = sender
        self._clock = clock
        self._worker = worker
        self._on_sent = on_sent
        # Who is served now (revoked users, removed groups get nothing).
        self._access: AccessCheck = access if access is not None else ServeAll()

    @property
    def worker(self) -> str:
        return self._worker

    async def refusal(self, scope: Scope) -> str | None:
        """Why the scope's chat is not served now (its member revoked or
        blocked, its group no longer listed), None when it is."""
        target = Target(scope.platform, scope.chat_id, scope.thread_id)
        return await self._access.refusal(target, scope.chat_kind, scope.sender_id)

    async def claim(
        self, scopes: Sequence[Scope], *, per_scope: int, lease: timedelta
    ) -> list[FollowUpClaim]:
        """Claim (phase `claimed`) up to `per_scope` due rows of each scope
        for this worker, in one statement: one claim per scope that got rows,
        in the order of `scopes`. `lease` covers the wait for the turn, the
        model call and the send."""
        if not scopes:
            return []

        async def take() -> list[FollowUpClaim]:
            now = self._clock.now()
            rows = await self._store.claim_due(
                scopes, per_scope=per_scope, worker=self._worker, now=now, lease_until=now + lease
            )
            by_scope: dict[Scope, list[Commitment]] = {}
            for c in rows:
                by_scope.setdefault(c.scope, []).append(c)
            return [
                FollowUpClaim(
                    s, by_scope[s], store=self._store, worker=self._worker, clock=self._clock,
                    lease=lease,
                )
                for s in scopes
                if s in by_scope
            ]  # fmt: skip

        return await take_despite_cancel(take())

    async def run(
        self,
        claim: FollowUpClaim,
        *,
        timezone: str,
        may_send: Callable[[], bool] = lambda: True,
    ) -> TurnResult:
        """Ask, send once, with the scope's claim (see `claim`), which this
        settles whatever happens. `may_send` is asked again just before
        sending (config read live)."""
        # Stopped (cancelled) or broken mid-turn, the claim settles by its
        # phase: one that never reached the platform goes back, one that did
        # may have been sent.
        async with claim:
            return await self._claimed(claim, timezone, may_send)

    async def _claimed(
        self, claim: FollowUpClaim, timezone: str, may_send: Callable[[], bool]
    ) -> TurnResult:
        scope, claimed, ids = claim.scope, claim.rows, claim.ids
        # Asked before the model call (none for a chat that gets nothing) and
        # again just before sending: access may change while the model writes.
        if (why := await self.refusal(scope)) is not None:
            await claim.release(f"not served: {why}")
            return TurnResult("not_served", ids, error=why)
        now = self._clock.now()
        llm = self._llm
        if self._meter is not None:
            llm = self._meter.charged_to(scope_payer(scope))
        try:
            completion = await llm.complete(
                "heartbeat", build_messages(claimed, now=now, timezone=timezone), tools=None
            )
        except BudgetSpent as spent:
            # Decided before any call: the follow-ups wait, active, for a day
            # with budget (or their window's end), neither lost nor failed.
            await claim.release(f"token budget spent ({spent.subject.kind})")
            return TurnResult("budget_spent", ids, error=str(spent))
        except LLMError as exc:
            # Nothing was sent: the commitments stay active for a later turn.
            await claim.release(f"model: {exc.kind}")
            return TurnResult("model_failed", ids, error=f"{exc.kind}: {exc}")

        if completion.finish_reason == "length":
            # Cut at llm.maxOutputTokens.heartbeat: a check-in that stops
            # mid-sentence is not sent; the follow-ups stay for a later turn.
            await claim.release("model: answer cut at the output cap")
            return TurnResult("model_failed", ids, error="answer cut at the output cap")
        text = clean_checkin(completion.text)
        if text is None:
            await claim.finish("dismissed", error="HEARTBEAT_OK")
            return TurnResult("ok", ids)
        since = self._clock.now() - DUPLICATE_WINDOW
        recent = await self._store.recent_checkin_texts(scope.session_key, since)
        if any(same_text(text, old) for old in recent):
            await claim.finish("dismissed", error="same text sent in the last 24 h")
            return TurnResult("duplicate", ids)
        reply_to = await self._member_message(scope, claimed)

        if not may_send():
            await claim.release("commitments were switched off")
            return TurnResult("switched_off", ids)
        if (why := await self.refusal(scope)) is not None:
            await claim.release(f"not served: {why}")
            return TurnResult("not_served", ids, error=why)
        if not await claim.begin_sending():
            # Dismissed, snoozed, expired or taken over while the model wrote:
            # what it wrote is no longer ours to send (the claim was released).
            return TurnResult("lost_claim", ids)

        target = Target(scope.platform, scope.chat_id, scope.thread_id)
        outbound = Outbound(
            target=target,
            text=text,
            reply_to_platform_id=reply_to,
            ping_replied=True,
            actions=followup_actions(ids),
        )
        delivery = await deliver_once(self._sender, outbound, self._clock)
        if delivery.outcome != "sent":
            error = delivery.result.error or "send failed"
            if delivery.outcome == "unknown":
                error = f"outcome unknown, not resent: {error}"
            await claim.finish("failed", error=error)
            recorder().checkin("failed")
            return TurnResult("failed", ids, error=error)

        await claim.finish("sent", message_id=delivery.message_id)
        recorder().checkin("sent")
        # Written into the transcript (and its index), so the user's answer
        # arrives with its question.
        await mirror_sent(
            self._transcript,
            session_key=scope.session_key,
            kind="checkin",
            text=text,
            at=self._clock.now(),
            platform_message_id=delivery.message_id,
        )
        if self._on_sent is not None:
            self._on_sent(scope, text)
        return TurnResult("sent", ids, message_id=delivery.message_id)

    async def _member_message(self, scope: Scope, claimed: list[Commitment]) -> str | None:
        """In a group or channel, the platform id of the member's message a
        commitment came from, so the check-in replies to it (and is clearly
        about them); None in a private chat or when there is none."""
        if scope.chat_kind == "private":
            return None
        for c in claimed:
            if c.source_message_id is None:
                continue
            message = await self._transcript.get_message(c.source_message_id)
            # Only a message of this very session: a reply never points elsewhere.
            if (
                message is not None
                and message.session_key == scope.session_key
                and message.platform_message_id
            ):
                return message.platform_message_id
        return None
