"""One heartbeat turn for one scope: claim, ask the model, send once, record.

The destination is the scope stored with the commitments (platform, chat,
thread) and nothing else; the model's text is only ever the message body.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, Protocol

from core.clock import Clock
from core.commitments.model import Commitment, Scope
from core.delivery import deliver_once
from core.heartbeat.prompt import build_messages, clean_checkin, same_text
from core.heartbeat.store import HeartbeatStore
from core.llm import Completion, LLMError
from core.logs import event
from core.messages import Outbound, Sender, Target
from core.store.base import NewMessage, Store

log = logging.getLogger("kept.heartbeat")

DUPLICATE_WINDOW = timedelta(hours=24)

TurnOutcome = Literal["sent", "ok", "duplicate", "failed", "model_failed", "lost_claim"]


class HeartbeatModel(Protocol):
    async def complete(
        self, role: str, messages: list[dict[str, object]], *, tools: None = None
    ) -> Completion: ...


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
        llm: HeartbeatModel,
        sender: Sender,
        clock: Clock,
        on_sent: Callable[[Scope, str], None] | None = None,
    ) -> None:
        self._store = store
        self._transcript = transcript
        self._llm = llm
        self._sender = sender
        self._clock = clock
        self._on_sent = on_sent

    async def run(self, scope: Scope, due: Sequence[Commitment], *, timezone: str) -> TurnResult:
        now = self._clock.now()
        claimed = await self._store.claim([c.id for c in due], now=now)
        ids = tuple(c.id for c in claimed)
        if not claimed:
            return TurnResult("lost_claim", ids)
        try:
            completion = await self._llm.complete(
                "heartbeat", build_messages(claimed, now=now, timezone=timezone), tools=None
            )
        except LLMError as exc:
            # Nothing was sent: the commitments stay active for a later turn.
            await self._store.release(ids, now=self._clock.now(), error=f"model: {exc.kind}")
            return TurnResult("model_failed", ids, error=f"{exc.kind}: {exc}")

        text = clean_checkin(completion.text)
        if text is None:
            await self._store.finish(ids, "dismissed", now=self._clock.now(), error="HEARTBEAT_OK")
            return TurnResult("ok", ids)
        since = self._clock.now() - DUPLICATE_WINDOW
        recent = await self._store.recent_checkin_texts(scope.session_key, since)
        if any(same_text(text, old) for old in recent):
            await self._store.finish(
                ids, "dismissed", now=self._clock.now(), error="same text sent in the last 24 h"
            )
            return TurnResult("duplicate", ids)

        target = Target(scope.platform, scope.chat_id, scope.thread_id)
        delivery = await deliver_once(
            self._sender,
            Outbound(target=target, text=text, extras={"commitments": ",".join(ids)}),
            self._clock,
        )
        if delivery.outcome != "sent":
            error = delivery.result.error or "send failed"
            if delivery.outcome == "unknown":
                error = f"outcome unknown, not resent: {error}"
            await self._store.finish(ids, "failed", now=self._clock.now(), error=error)
            return TurnResult("failed", ids, error=error)

        # Written into the transcript (and its index), so the user's answer
        # arrives with its question.
        await self._transcript.add_message(
            NewMessage(
                session_key=scope.session_key,
                role="assistant",
                kind="checkin",
                text=text,
                ts=self._clock.now(),
                platform_message_id=delivery.message_id,
            )
        )
        await self._store.finish(ids, "sent", now=self._clock.now(), message_id=delivery.message_id)
        if self._on_sent is not None:
            self._on_sent(scope, text)
        return TurnResult("sent", ids, message_id=delivery.message_id)


def log_decision(scope: Scope, due: int, outcome: str, **fields: object) -> None:
    event(
        log,
        logging.WARNING if outcome in ("failed", "model_failed") else logging.INFO,
        "heartbeat",
        agent=scope.agent_id,
        session=scope.session_key,
        due=due,
        outcome=outcome,
        **fields,
    )
