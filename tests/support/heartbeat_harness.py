"""Shared set-up for the heartbeat tests: a real store (SQLite, or the
PostgreSQL database a `url` names), the real commitment and heartbeat stores,
a scripted model and a scriptable sender."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from core.clock import TestClock
from core.commitments.model import Commitment, NewCommitment, Scope
from core.commitments.store import CommitmentStore, Filter
from core.config.model import KeptConfig
from core.delivery.send import AccessCheck
from core.heartbeat.source import FollowUpSource
from core.heartbeat.store import HeartbeatStore
from core.heartbeat.turn import HeartbeatTurn
from core.limits import Meter
from core.locks import SessionLocks
from core.messages import Outbound, SendResult
from core.reminders import ReminderFiring, ReminderService, ReminderSource
from core.scheduler import DueSource, Scheduler
from core.store import Store
from core.store.dialect import to_ms
from core.store.postgres import PostgresStore
from core.users import FollowUpPreferences, UserZones
from tests.support.followups import store_execute, store_rows
from tests.support.scripted_model import ScriptedModel
from tests.support.store_helpers import (
    commitment_store_for,
    heartbeat_store_for,
    make_reminder_store,
    open_any_store,
)

WORKER = "test-worker"

SCOPE = Scope(
    "main", "agent:main:telegram:private:42", "telegram", "42", None, "42", chat_kind="private"
)
OTHER = Scope(
    "main", "agent:main:telegram:private:77", "telegram", "77", None, "77", chat_kind="private"
)


class ScriptedSender:
    """Records sends; answers with queued SendResults, then successes."""

    def __init__(self) -> None:
        self.sent: list[Outbound] = []
        self.attempts: list[Outbound] = []
        self.results: list[SendResult] = []

    async def send(self, outbound: Outbound) -> SendResult:
        self.attempts.append(outbound)
        result = self.results.pop(0) if self.results else SendResult(f"p{len(self.sent) + 1}")
        if result.ok:
            self.sent.append(outbound)
        return result


@dataclass
class Harness:
    clock: TestClock
    store: Store
    commitments: CommitmentStore
    heartbeat: HeartbeatStore
    model: ScriptedModel
    sender: ScriptedSender
    config: KeptConfig
    platforms: set[str] = field(default_factory=lambda: {"telegram"})
    locks: SessionLocks = field(default_factory=SessionLocks)
    # Who is served at send time; None serves every chat.
    access: AccessCheck | None = None

    def reminder_service(self) -> ReminderService:
        return ReminderService(make_reminder_store(self.store), self.clock)

    def reminder_source(self) -> ReminderSource:
        store = make_reminder_store(self.store)
        firing = ReminderFiring(
            store=store,
            transcript=self.store,
            sender=self.sender,
            clock=self.clock,
            platforms=lambda: self.platforms,
            worker=WORKER,
            access=self.access,
        )
        return ReminderSource(
            store=store, firing=firing, clock=self.clock, platforms=lambda: self.platforms
        )

    def scheduler(
        self,
        *,
        worker: str = WORKER,
        reminders: ReminderSource | None = None,
        zones: UserZones | None = None,
        prefs: FollowUpPreferences | None = None,
        meter: Meter | None = None,
    ) -> Scheduler:
        turn = HeartbeatTurn(
            store=self.heartbeat,
            transcript=self.store,
            llm=self.model,
            sender=self.sender,
            clock=self.clock,
            worker=worker,
            access=self.access,
            meter=meter,
        )
        followups = FollowUpSource(
            config=lambda: self.config,
            commitments=self.commitments,
            store=self.heartbeat,
            turn=turn,
            clock=self.clock,
            platforms=lambda: self.platforms,
            session_locks=self.locks,
            zones=zones,
            prefs=prefs,
        )
        sources: list[DueSource] = [followups] if reminders is None else [reminders, followups]
        return Scheduler(sources, clock=self.clock)

    async def seed(
        self,
        scope: Scope = SCOPE,
        *,
        text: str = "How did the interview go?",
        reason: str = "user has a job interview",
        due_in: float = 0,
        window: float = 36 * 3600,
        key: str | None = None,
    ) -> Commitment:
        for candidate in (scope.session_key,):
            parts = candidate.split(":")
            await self.store.ensure_session(
                candidate,
                agent_id=scope.agent_id,
                platform=scope.platform,
                chat_id=scope.chat_id,
                chat_kind=parts[3],  # type: ignore[arg-type]
                thread_id=scope.thread_id,
                now=self.clock.now(),
            )
        now = self.clock.now()
        earliest = now + timedelta(seconds=due_in)
        new = NewCommitment(
            scope=scope,
            kind="event_check_in",
            sensitivity="routine",
            source="inferred_user_context",
            reason=reason,
            suggested_text=text,
            dedupe_key=key or f"k{now.timestamp()}-{text}",
            confidence=0.9,
            due_earliest=earliest,
            due_latest=earliest + timedelta(seconds=window),
            due_timezone="UTC",
            source_message_id=None,
            created_at=now,
        )
        applied = await self.commitments.apply_extraction(scope, [new], [], now=now)
        return applied.created[0]

    async def status(self, commitment_id: str) -> Commitment:
        found = await self.commitments.get(commitment_id, Filter())
        assert found is not None
        return found

    async def fetchall(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of `sql` (`?` placeholders) on the harness's database."""
        return await store_rows(self.store, sql, params)

    async def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """Run `sql` (`?` placeholders) on the harness's database."""
        await store_execute(self.store, sql, params)

    def db_time(self, value: datetime) -> Any:
        """`value` as the backend stores a time (SQLite: integer ms)."""
        return value if isinstance(self.store, PostgresStore) else to_ms(value)

    async def transcript(self, session_key: str = SCOPE.session_key) -> list[tuple[str, str, str]]:
        rows = await self.store.history(session_key, before_turn_of=10**12, limit=1000)
        return [(r.role, r.kind, r.text) for r in rows]


async def make_harness(
    tmp_path: Path, config: dict[str, Any] | None = None, *, url: str | None = None
) -> Harness:
    """`config` is a config document; commitments are on unless it says
    otherwise. `url` names the database (default: a SQLite file in tmp_path)."""
    config = {**(config or {})}
    config["commitments"] = {"enabled": True, **config.get("commitments", {})}
    store = open_any_store(url or f"sqlite:///{tmp_path}/kept.sqlite")
    await store.open()
    return Harness(
        clock=TestClock(),
        store=store,
        commitments=commitment_store_for(store),
        heartbeat=heartbeat_store_for(store),
        model=ScriptedModel(),
        sender=ScriptedSender(),
        config=KeptConfig.model_validate(config),
    )
