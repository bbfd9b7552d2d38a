"""The hidden extraction pass: after a reply went out, look for follow-ups.

`on_reply` (a ConversationManager reply hook) only appends to an in-memory
queue and returns: it never awaits the model or the database, so it cannot
delay or alter a reply. One lane per agent collects items for a short batch
window, then asks the model once per scope (up to a few exchanges of that
scope together, in order) and applies the code rules to the answer.

Failure policy: a model that times out, errors or answers garbage stores
nothing and logs why. An authentication or unknown-model error pauses the
agent's extraction for a while with one log line, rather than one per turn.
A crash loses at most the items still queued in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from core.clock import Clock
from core.commitments.candidates import UnusableAnswer, parse_answer
from core.commitments.model import Commitment, Scope
from core.commitments.pause import Pauses
from core.commitments.prompt import build_messages
from core.commitments.rules import Exchange, evaluate, merge_fields
from core.commitments.store import CommitmentStore, ScopeResult
from core.config import KeptConfig
from core.conversation import ChatModel, ReplyEvent
from core.llm import LLMError
from core.logs import event
from core.messages import ChatKind

log = logging.getLogger("kept.commitments")

DROP_LOG_EVERY = timedelta(minutes=1)


def eligible(ev: ReplyEvent) -> bool:
    """A normal conversation turn with text on both sides (not a heartbeat,
    reminder, command or error turn)."""
    return (
        ev.turn_kind == "conversation"
        and ev.user_message.role == "user"
        and ev.user_message.kind == "text"
        and ev.reply.kind == "text"
        and bool(ev.user_message.text.strip())
        and bool(ev.reply.text.strip())
    )


@dataclass(frozen=True, slots=True)
class _Item:
    """One queued exchange, with where it happened."""

    scope: Scope
    chat_kind: ChatKind  # the stored session's, for the group privacy rule
    exchange: Exchange


def scope_of(ev: ReplyEvent) -> Scope:
    """The scope, copied from the stored session and the turn's sender."""
    s = ev.session
    return Scope(s.agent_id, s.key, s.platform, s.chat_id, s.thread_id, ev.sender_id)


@dataclass(frozen=True, slots=True)
class _Agent:
    """What one batch needs of the config, read once per batch."""

    id: str
    timezone: str
    heartbeat_seconds: float
    call_deadline: float  # seconds, for any ChatModel, not just ours


@dataclass
class _Lane:
    """One agent's queue and the task that drains it."""

    items: list[_Item] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # something to do
    full: asyncio.Event = field(default_factory=asyncio.Event)  # no need to wait longer
    task: asyncio.Task[None] | None = None


class ExtractionWorker:
    def __init__(
        self,
        *,
        store: CommitmentStore,
        llm: ChatModel,
        config: Callable[[], KeptConfig],
        clock: Clock,
        max_queue: int = 2000,
        batch_seconds: float = 2.0,
        max_batch: int = 200,
        exchanges_per_call: int = 4,
        concurrency: int = 4,
        pause: timedelta = timedelta(minutes=10),
        on_stored: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._llm = llm
        self._config = config
        self._clock = clock
        self._max_queue = max_queue
        self._batch_seconds = batch_seconds
        self._max_batch = max(1, max_batch)
        self._per_call = max(1, exchanges_per_call)
        self._calls = asyncio.Semaphore(concurrency)
        self._pauses = Pauses(clock, pause)
        # Called after a batch created or changed commitments, so a sleeping
        # heartbeat can look at the new due times (e.g. HeartbeatScheduler.wake).
        self._on_stored = on_stored
        self._lanes: dict[str, _Lane] = {}
        self._running = False
        self._stopping = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._held = 0  # items queued or being processed
        self._drops_unlogged = 0
        self._last_drop_log: datetime | None = None
        # Counters for tests, logs and the benchmark.
        self.requests = 0
        self.high_water = 0
        self.dropped = 0

    @property
    def queued(self) -> int:
        return self._held

    # --- the hook ----------------------------------------------------------

    async def on_reply(self, ev: ReplyEvent) -> None:
        """Queue an eligible exchange; never waits for anything."""
        if not self._running or not eligible(ev):
            return
        # Read on every turn, so `kept config set commitments.enabled false`
        # stops extraction without a restart.
        if not self._config().commitments.enabled:
            return
        agent_id = ev.session.agent_id
        if self._pauses.paused(agent_id):
            return  # the pause was logged once when it began
        if self._held >= self._max_queue:
            self._drop(agent_id, ev.session.key)
            return
        lane = self._lanes.get(agent_id)
        if lane is None:
            lane = self._lanes[agent_id] = _Lane()
            lane.task = asyncio.create_task(
                self._run_lane(agent_id, lane), name=f"extract-{agent_id}"
            )
        exchange = Exchange(ev.user_message.id, ev.user_message.text, ev.reply.text)
        lane.items.append(_Item(scope_of(ev), ev.session.chat_kind, exchange))
        self._held += 1
        self.high_water = max(self.high_water, self._held)
        self._idle.clear()
        lane.wake.set()
        if len(lane.items) >= self._max_batch:
            lane.full.set()

    # --- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        self._running = True
        self._stopping.clear()

    async def stop(self, *, drain_seconds: float = 5.0) -> None:
        """Stop taking items, give queued ones `drain_seconds` (wall time) to
        finish without batch waits, then cancel and log what was dropped."""
        self._running = False
        self._stopping.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain_seconds):
                await self._idle.wait()
        left = self._held
        tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._lanes.clear()
        self._held = 0
        self._idle.set()
        if left:
            event(log, logging.WARNING, "extraction_dropped_at_stop", count=left)

    async def wait_idle(self) -> None:
        """Until every queued item has been processed (tests, benchmarks)."""
        await self._idle.wait()

    # --- lanes ---------------------------------------------------------------

    async def _run_lane(self, agent_id: str, lane: _Lane) -> None:
        while True:
            await lane.wake.wait()
            await self._batch_wait(lane)
            # At most one batch's worth: a backlog is worked off in bounded
            # steps instead of one huge gather.
            batch, lane.items = lane.items[: self._max_batch], lane.items[self._max_batch :]
            if not lane.items:
                lane.wake.clear()
            if len(lane.items) < self._max_batch:
                lane.full.clear()
            try:
                await self._process(agent_id, batch)
            except Exception as exc:  # never let one bad batch end the lane
                event(
                    log, logging.ERROR, "extraction_batch_failed", agent=agent_id, error=repr(exc)
                )
            finally:
                self._held -= len(batch)
                if self._held <= 0:
                    self._held = 0
                    self._idle.set()

    async def _batch_wait(self, lane: _Lane) -> None:
        """The batch window: it ends early when the batch is full or at stop."""
        if self._batch_seconds <= 0 or self._stopping.is_set() or lane.full.is_set():
            return
        waits = [
            asyncio.ensure_future(self._clock.sleep(self._batch_seconds)),
            asyncio.ensure_future(self._stopping.wait()),
            asyncio.ensure_future(lane.full.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def _process(self, agent_id: str, batch: Sequence[_Item]) -> None:
        config = self._config()
        if not config.commitments.enabled or self._pauses.paused(agent_id):
            return
        agent_config = config.agent_or_default(agent_id)
        # every_seconds parses the duration text; once per batch is enough.
        hb_seconds = agent_config.heartbeat.every_seconds
        agent = _Agent(
            agent_id, agent_config.timezone, hb_seconds, config.llm.timeout_seconds * 2 + 5
        )
        groups: dict[Scope, list[Exchange]] = {}
        kinds: dict[Scope, ChatKind] = {}
        for item in batch:
            groups.setdefault(item.scope, []).append(item.exchange)
            kinds[item.scope] = item.chat_kind  # one session key, one kind
        # One read and one write transaction per batch, however many scopes:
        # the connection is shared with the chat turns, so every trip counts.
        pending = await self._store.active_for_scopes(list(groups))
        per_scope = await asyncio.gather(
            *(self._scope(agent, s, kinds[s], groups[s], pending.get(s, [])) for s in groups)
        )
        results = [r for rs in per_scope for r in rs]
        if not results:
            return
        applied = await self._store.apply_extractions(
            results, now=self._clock.now(), merge=merge_fields
        )
        for c in applied.created:
            self._stored(c, "commitment_created")
        for c in applied.merged:
            self._stored(c, "commitment_merged")
        for commitment_id in applied.resolved:
            event(
                log, logging.INFO, "commitment_resolved", agent=agent.id, commitment=commitment_id
            )
        hook = self._on_stored
        if hook is not None and (applied.created or applied.merged):
            try:
                hook()
            except Exception as exc:  # stored already; the heartbeat's own timer still runs
                event(log, logging.ERROR, "extraction_wake_failed", agent=agent.id, error=repr(exc))

    async def _scope(
        self,
        agent: _Agent,
        scope: Scope,
        chat_kind: ChatKind,
        exchanges: list[Exchange],
        pending: list[Commitment],
    ) -> list[ScopeResult]:
        """The scope's exchanges, a few per model call, in order."""
        results: list[ScopeResult] = []
        for start in range(0, len(exchanges), self._per_call):
            # The off switch alone is read live between calls, so switching
            # off stops a long batch; the rest comes from the batch's snapshot.
            if not self._config().commitments.enabled or self._pauses.paused(agent.id):
                break
            chunk = exchanges[start : start + self._per_call]
            try:
                async with self._calls:
                    result = await self._extract(agent, scope, chat_kind, chunk, pending)
            except Exception as exc:
                event(
                    log,
                    logging.ERROR,
                    "extraction_failed",
                    agent=agent.id,
                    session=scope.session_key,
                    error=repr(exc),
                )
                continue
            if result is not None:
                results.append(result)
                # A later call of this batch must not be offered what an
                # earlier one closed (new ones get their ids only when written).
                closed = set(result.resolved_ids)
                pending = [c for c in pending if c.id not in closed]
            # A model that answers without suspending (in-process, cached)
            # would otherwise keep the chat turns waiting for the whole batch.
            await asyncio.sleep(0)
        return results

    async def _extract(
        self,
        agent: _Agent,
        scope: Scope,
        chat_kind: ChatKind,
        chunk: list[Exchange],
        pending: list[Commitment],
    ) -> ScopeResult | None:
        """One model call and the rules applied to its answer; None when
        there is nothing to write."""
        now = self._clock.now()
        messages = build_messages(
            now=now, timezone=agent.timezone, exchanges=chunk, pending=pending
        )
        self.requests += 1
        deadline = agent.call_deadline
        try:
            async with asyncio.timeout(deadline):
                completion = await self._llm.complete("extraction", messages, tools=None)
        except LLMError as exc:
            self._pauses.failed(agent.id, scope.session_key, exc.kind, str(exc))
            return None
        except TimeoutError:
            self._pauses.failed(
                agent.id, scope.session_key, "timeout", f"no answer within {deadline:.0f}s"
            )
            return None
        self._pauses.succeeded(agent.id)
        try:
            answer = parse_answer(completion.text)
        except UnusableAnswer as exc:
            event(
                log,
                logging.WARNING,
                "extraction_unusable",
                agent=agent.id,
                session=scope.session_key,
                reason=str(exc),
                action="none needed if rare; a model that keeps failing needs a better "
                "llm.models.extraction",
            )
            return None
        accepted, rejected = evaluate(
            answer.candidates,
            scope=scope,
            exchanges=chunk,
            now=now,
            created_at=self._clock.now(),
            heartbeat_seconds=agent.heartbeat_seconds,
            timezone=agent.timezone,
            chat_kind=chat_kind,
        )
        if rejected:
            event(
                log,
                logging.INFO,
                "commitment_candidates_rejected",
                agent=agent.id,
                session=scope.session_key,
                reasons="; ".join(f"{r.dedupe_key}: {r.reason}" for r in rejected),
            )
        # Resolutions only for this scope's own active commitments; the store
        # checks the scope again in the same statement.
        own = {c.id for c in pending}
        resolved = [i for i in answer.resolved if i in own]
        if not accepted and not resolved:
            return None
        return ScopeResult(scope, accepted, resolved)

    # --- drops, logs ----------------------------------------------------

    def _drop(self, agent_id: str, session_key: str) -> None:
        self.dropped += 1
        self._drops_unlogged += 1
        now = self._clock.now()
        if self._last_drop_log is None or now - self._last_drop_log >= DROP_LOG_EVERY:
            event(
                log,
                logging.WARNING,
                "extraction_queue_full",
                agent=agent_id,
                session=session_key,
                dropped=self._drops_unlogged,
                limit=self._max_queue,
                action="the extraction model is slower than the chat; use a faster "
                "llm.models.extraction or disable commitments",
            )
            self._last_drop_log = now
            self._drops_unlogged = 0

    def _stored(self, c: Commitment, name: str) -> None:
        event(
            log,
            logging.INFO,
            name,
            agent=c.agent_id,
            session=c.session_key,
            commitment=c.id,
            kind=c.kind,
            due=c.due_earliest.isoformat(timespec="minutes"),
        )
