"""A follow-up claim: one scope's claimed commitments, settled together."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from core.clock import Clock
from core.commitments.model import Commitment, Scope
from core.delivery.claim import LEASE_ENDS_IT, DeliveryClaim, Phase
from core.delivery.send import settle_despite_cancel
from core.heartbeat.decisions import log, log_decision
from core.heartbeat.store import Final, HeartbeatStore
from core.logs import event


class FollowUpClaim(DeliveryClaim):
    """The rows of one scope this worker claimed for one turn (at most a
    few), moved and settled together in the HeartbeatStore."""

    kind = "heartbeat"

    def __init__(
        self,
        scope: Scope,
        rows: Sequence[Commitment],
        *,
        store: HeartbeatStore,
        worker: str,
        clock: Clock,
        lease: timedelta,
    ) -> None:
        super().__init__(clock=clock, lease=lease, log=log)
        self.scope = scope
        self._rows = list(rows)
        self._store = store
        self._worker = worker

    @property
    def rows(self) -> list[Commitment]:
        return list(self._rows)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self._rows)

    async def finish(
        self, status: Final, *, message_id: str | None = None, error: str | None = None
    ) -> None:
        """Record the turn's outcome (sent, dismissed, failed) and drop the claim."""
        await self.settle(
            lambda now: self._store.finish(
                self._rows,
                status,
                worker=self._worker,
                now=now,
                message_id=message_id,
                error=error,
            )
        )

    async def release_beyond(self, room: int, why: str) -> None:
        """Keep the first `room` rows, give back the rest (never sent)."""
        if self.phase != "claimed" or len(self._rows) <= room:
            return
        spare, self._rows = self._rows[room:], self._rows[:room]
        try:
            await settle_despite_cancel(
                self._store.release(spare, worker=self._worker, now=self._clock.now(), error=why)
            )
        except Exception as exc:
            event(
                log,
                logging.WARNING,
                "heartbeat_claim_release_failed",
                session=self.scope.session_key,
                commitments=",".join(c.id for c in spare),
                error=repr(exc),
                action=LEASE_ENDS_IT,
            )

    async def _to_sending(self, now: datetime, lease_until: datetime) -> bool:
        return await self._store.begin_sending(
            self._rows, worker=self._worker, now=now, lease_until=lease_until
        )

    async def _release(self, now: datetime, error: str) -> None:
        await self._store.release(self._rows, worker=self._worker, now=now, error=error)

    async def _fail_unknown(self, now: datetime, cause: str) -> None:
        await self._store.finish(
            self._rows,
            "failed",
            worker=self._worker,
            now=now,
            error=f"{cause}: outcome unknown, not resent",
        )

    def _abandoned(self, phase: Phase, why: str) -> None:
        released = phase == "claimed"
        log_decision(
            self.scope,
            len(self._rows),
            "released" if released else "failed",
            commitments=",".join(self.ids),
            reason=f"{why} {'before' if released else 'while'} sending",
        )

    def _fields(self) -> dict[str, object]:
        return {"session": self.scope.session_key, "commitments": ",".join(self.ids)}
