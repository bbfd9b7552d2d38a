"""One batch of the extraction pass: the model calls for a batch of queued
exchanges (grouped per scope, a few exchanges per call, in order), the code
rules applied to each answer, and one write for the whole batch.

The queue that feeds it (one per agent, job rows, adoption) is in extraction.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from core.clock import Clock
from core.commitments.exchange import Exchange
from core.commitments.extraction_call import run_extraction
from core.commitments.jobs import ExtractionJob
from core.commitments.model import Commitment, Scope
from core.commitments.pause import Pauses
from core.commitments.prefilter import worth_sending
from core.commitments.rules import merge_fields
from core.commitments.store import CommitmentStore, ScopeResult
from core.config.model import KeptConfig
from core.limits.meter import BudgetSpent, Meter, scope_payer
from core.llm import LLMError, Model
from core.logs import event
from core.metrics import recorder
from core.users import FollowUpPreferences, UserZones

log = logging.getLogger("kept.commitments")


def per_call(exchanges: list[Exchange], usual: int, backlog: int) -> list[list[Exchange]]:
    """A scope's exchanges in model calls, in order.

    Up to `usual` share a call. More than that waiting at once means the
    queue is backed up: then calls of up to `backlog` exchanges, evenly
    filled, so a backlog costs fewer calls instead of more."""
    if len(exchanges) <= usual:
        return [exchanges] if exchanges else []
    calls = -(-len(exchanges) // backlog)
    size = -(-len(exchanges) // calls)
    return [exchanges[i : i + size] for i in range(0, len(exchanges), size)]


class ConversationStarts(Protocol):
    """Where chats started over (`/new`; the transcript store)."""

    async def context_starts(self, session_keys: Sequence[str]) -> dict[str, int]: ...


def conversations(exchanges: list[Exchange], after: int | None) -> list[list[Exchange]]:
    """A scope's exchanges from before its chat's start (`after`: the last
    message id before it) and those since, apart: one call never shows the
    model both the earlier conversation and the new one."""
    if after is None:
        return [exchanges]
    before = [e for e in exchanges if e.user_message_id <= after]
    since = [e for e in exchanges if e.user_message_id > after]
    return [part for part in (before, since) if part]


@dataclass(frozen=True, slots=True)
class _Agent:
    """What one batch needs of the config, read once per batch."""

    id: str
    timezone: str
    heartbeat_seconds: float
    call_deadline: float  # seconds, for any Model, not just ours
    prefilter: bool


class BatchExtractor:
    def __init__(
        self,
        *,
        store: CommitmentStore,
        llm: Model,
        config: Callable[[], KeptConfig],
        clock: Clock,
        pauses: Pauses,
        exchanges_per_call: int,
        backlog_exchanges_per_call: int,
        concurrency: int,
        on_stored: Callable[[], None] | None,
        zones: UserZones | None = None,
        starts: ConversationStarts | None = None,
        prefs: FollowUpPreferences | None = None,
        meter: Meter | None = None,
    ) -> None:
        self._store = store
        # Each call charged to its scope's member and chat (core/limits/);
        # None: calls go to `llm` uncounted (tests, the benchmark).
        self._meter = meter
        # Who switched follow-ups off since their exchanges were queued.
        self._prefs = prefs
        self._llm = llm
        self._config = config
        self._clock = clock
        self._pauses = pauses
        self._per_call = max(1, exchanges_per_call)
        self._backlog_per_call = max(self._per_call, backlog_exchanges_per_call)
        self._calls = asyncio.Semaphore(concurrency)
        # Called after a batch created or changed commitments, so a sleeping
        # heartbeat can look at the new due times (e.g. Scheduler.wake).
        self._on_stored = on_stored
        self.requests = 0  # model calls made, for tests, logs and the benchmark
        self.skipped = 0  # exchanges the pre-filter kept from the model
        # The member a follow-up is about reads its due window in their own
        # zone; None: the agent's for everyone.
        self._zones = zones
        # None: no chat ever starts over (tests without a transcript).
        self._starts = starts

    async def process(self, agent_id: str, batch: Sequence[ExtractionJob]) -> None:
        """Extract from one agent's batch and write what the rules accept."""
        config = self._config()
        if not config.commitments.enabled or await self._pauses.paused(agent_id):
            return
        agent_config = config.agent_or_default(agent_id)
        # every_seconds parses the duration text; once per batch is enough.
        hb_seconds = agent_config.heartbeat.every_seconds
        agent = _Agent(
            agent_id,
            agent_config.timezone,
            hb_seconds,
            config.llm.timeout_seconds * 2 + 5,
            config.commitments.prefilter,
        )
        groups: dict[Scope, list[Exchange]] = {}
        for item in batch:
            groups.setdefault(item.scope, []).append(item.exchange)
        groups = await self._wanted(agent_id, groups)
        if not groups:
            return
        # One read and one write transaction per batch, however many scopes:
        # the connection is shared with the chat turns, so every trip counts.
        pending = await self._store.active_for_scopes(list(groups))
        zones = await self._member_zones(groups)
        starts = await self._conversation_starts(groups)
        per_scope = await asyncio.gather(
            *(
                self._scope(
                    agent,
                    s,
                    groups[s],
                    pending.get(s, []),
                    zones.get((s.platform, s.sender_id or ""), agent.timezone),
                    starts.get(s.session_key),
                )
                for s in groups
            )
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

    async def _wanted(
        self, agent_id: str, groups: dict[Scope, list[Exchange]]
    ) -> dict[Scope, list[Exchange]]:
        """The scopes whose member and chat still want follow-ups, read in
        the database before any model call: an exchange queued before its
        member (or the group's admin) switched off is never sent. Unreadable,
        none is sent; the batch fails and its jobs are adopted again later."""
        if self._prefs is None or not groups:
            return groups
        silenced = await self._prefs.silenced([s.subject for s in groups])
        if not silenced:
            return groups
        for scope in groups:
            if scope.subject in silenced:
                event(
                    log,
                    logging.INFO,
                    "extraction_skipped",
                    agent=agent_id,
                    session=scope.session_key,
                    exchanges=len(groups[scope]),
                    reason="follow-ups switched off",
                )
        return {s: ex for s, ex in groups.items() if s.subject not in silenced}

    async def _member_zones(
        self, groups: dict[Scope, list[Exchange]]
    ) -> dict[tuple[str, str], str]:
        """The own zones of the members the batch's scopes are about (one read)."""
        if self._zones is None:
            return {}
        members = {(s.platform, s.sender_id) for s in groups if s.sender_id is not None}
        return await self._zones.many(members)

    async def _conversation_starts(self, groups: dict[Scope, list[Exchange]]) -> dict[str, int]:
        """Where the batch's chats started over (one read)."""
        if self._starts is None:
            return {}
        return await self._starts.context_starts(sorted({s.session_key for s in groups}))

    async def _scope(
        self,
        agent: _Agent,
        scope: Scope,
        exchanges: list[Exchange],
        pending: list[Commitment],
        timezone: str,
        start: int | None = None,
    ) -> list[ScopeResult]:
        """The scope's exchanges, a few per model call, in order, never one
        call across the chat's `start`."""
        results: list[ScopeResult] = []
        if agent.prefilter:
            sent = worth_sending(exchanges, pending=bool(pending))
            if len(sent) < len(exchanges):
                self.skipped += len(exchanges) - len(sent)
                recorder().extraction_skipped(len(exchanges) - len(sent))
            exchanges = sent
        chunks = [
            chunk
            for part in conversations(exchanges, start)
            for chunk in per_call(part, self._per_call, self._backlog_per_call)
        ]
        for chunk in chunks:
            # The off switch alone is read live between calls, so switching
            # off stops a long batch; the rest comes from the batch's snapshot.
            if not self._config().commitments.enabled or await self._pauses.paused(agent.id):
                break
            try:
                async with self._calls:
                    result = await self._extract(agent, scope, chunk, pending, timezone)
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
        chunk: list[Exchange],
        pending: list[Commitment],
        timezone: str,
    ) -> ScopeResult | None:
        """One model call and the rules applied to its answer; None when
        there is nothing to write."""
        now = self._clock.now()
        self.requests += 1
        deadline = agent.call_deadline
        llm = self._llm
        if self._meter is not None:
            llm = self._meter.charged_to(scope_payer(scope))
        try:
            async with asyncio.timeout(deadline):
                # The window is worked out, and kept, in the zone of the member it is about.
                outcome = await run_extraction(
                    llm,
                    scope=scope,
                    exchanges=chunk,
                    pending=pending,
                    now=now,
                    timezone=timezone,
                    heartbeat_seconds=agent.heartbeat_seconds,
                    created_at=self._clock.now,
                )
        except BudgetSpent as spent:
            # Skipped, not paused: the endpoint is fine; the exchanges are not
            # offered again (the metric kept_limited_total counts the call).
            self.requests -= 1
            event(
                log,
                logging.INFO,
                "extraction_skipped",
                agent=agent.id,
                session=scope.session_key,
                exchanges=len(chunk),
                reason=f"token budget spent ({spent.subject.kind})",
            )
            return None
        except LLMError as exc:
            await self._pauses.failed(agent.id, scope.session_key, exc.kind, str(exc))
            return None
        except TimeoutError:
            await self._pauses.failed(
                agent.id, scope.session_key, "timeout", f"no answer within {deadline:.0f}s"
            )
            return None
        await self._pauses.succeeded(agent.id)
        if outcome.unusable is not None:
            event(
                log,
                logging.WARNING,
                "extraction_unusable",
                agent=agent.id,
                session=scope.session_key,
                reason=outcome.unusable,
                action="none needed if rare; a model that keeps failing needs a better "
                "llm.models.extraction",
            )
            return None
        if outcome.rejected:
            event(
                log,
                logging.INFO,
                "commitment_candidates_rejected",
                agent=agent.id,
                session=scope.session_key,
                reasons="; ".join(f"{r.dedupe_key}: {r.reason}" for r in outcome.rejected),
            )
        # Resolutions only for this scope's own active commitments (the ones
        # it was shown); the store checks the scope again in the same statement.
        accepted, resolved = outcome.accepted, outcome.resolved
        if not accepted and not resolved:
            return None
        return ScopeResult(scope, accepted, resolved)

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
