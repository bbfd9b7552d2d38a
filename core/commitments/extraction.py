"""The hidden extraction pass: after a reply went out, look for follow-ups.

`on_reply` (a ConversationManager reply hook, run after the reply went out)
stores the exchange as a job row (core/commitments/jobs.py) claimed by this
worker and queues it in memory; it never awaits the model, so it cannot delay
or alter a reply. One queue per agent (extraction_queue.py) holds a session's exchanges
until the session is quiet for the batch window, then asks the model about
them together (a few per call, in order; batch.py), applies the code rules
to the answer, and removes the jobs. A stop releases the jobs still queued;
a crash leaves them claimed until their lease runs out. Either way a worker
adopts them (at start, and whenever a lease runs out), so a restart loses no
exchange.

Failure policy: a model that times out, errors or answers garbage stores
nothing and logs why. An authentication or unknown-model error pauses the
agent's extraction for a while with one log line, rather than one per turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from core.clock import Clock
from core.commitments.batch import BatchExtractor, ConversationStarts
from core.commitments.exchange import Exchange
from core.commitments.extraction_queue import AgentExtractionQueue
from core.commitments.jobs import ExtractionJob, ExtractionJobStore, NewJob
from core.commitments.model import Scope
from core.commitments.pause import Pauses, PauseStore
from core.commitments.store import CommitmentStore
from core.config.model import KeptConfig
from core.conversation.events import ReplyEvent
from core.limits.meter import Meter
from core.llm import Model
from core.logs import event
from core.store.errors import storage_action
from core.users import FollowUpPreferences, UserZones

log = logging.getLogger("kept.commitments")

DROP_LOG_EVERY = timedelta(minutes=1)
# How long a worker vouches for the jobs it holds; renewed when a batch
# starts. Longer than any batch's model calls, or a live worker's jobs would
# be adopted by another (harmless, but a wasted call); it is also the longest
# a crashed worker's jobs wait for another worker.
JOB_LEASE = timedelta(minutes=15)
# Sessions in one batch, per model call allowed at once.
BATCH_ROUNDS = 4
# How often a worker looks for jobs that nobody vouches for any more.
ADOPT_EVERY = timedelta(minutes=1)


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


def scope_of(ev: ReplyEvent) -> Scope:
    """The scope, copied from the stored session and the turn's sender."""
    s = ev.session
    return Scope(
        s.agent_id, s.key, s.platform, s.chat_id, s.thread_id, ev.sender_id, chat_kind=s.chat_kind
    )


class ExtractionWorker:
    def __init__(
        self,
        *,
        store: CommitmentStore,
        jobs: ExtractionJobStore,
        pauses: PauseStore,
        llm: Model,
        config: Callable[[], KeptConfig],
        clock: Clock,
        worker: str,
        max_queue: int = 2000,
        batch_seconds: float = 2.0,
        max_batch: int = 500,
        longest_wait_seconds: float = 20.0,
        exchanges_per_call: int = 4,
        backlog_exchanges_per_call: int = 8,
        concurrency: int = 4,
        pause: timedelta = timedelta(minutes=10),
        on_stored: Callable[[], None] | None = None,
        zones: UserZones | None = None,
        starts: ConversationStarts | None = None,
        prefs: FollowUpPreferences | None = None,
        meter: Meter | None = None,
    ) -> None:
        self._jobs = jobs
        self._worker = worker
        self._config = config
        self._clock = clock
        self._max_queue = max_queue
        self._batch_seconds = batch_seconds
        self._quiet = timedelta(seconds=max(batch_seconds, 0.0))
        self._longest = timedelta(seconds=max(longest_wait_seconds, batch_seconds, 0.0))
        self._max_batch = max(1, max_batch)
        # A few rounds of calls per batch: the next batch is chosen when this
        # one is done, from sessions that kept gathering exchanges meanwhile.
        self._batch_sessions = max(1, concurrency) * BATCH_ROUNDS
        self._pauses = Pauses(pauses, clock, pause)
        self._batches = BatchExtractor(
            store=store,
            llm=llm,
            config=config,
            clock=clock,
            pauses=self._pauses,
            exchanges_per_call=exchanges_per_call,
            backlog_exchanges_per_call=backlog_exchanges_per_call,
            concurrency=concurrency,
            on_stored=on_stored,
            zones=zones,
            starts=starts,
            prefs=prefs,
            meter=meter,
        )
        self._queues: dict[str, AgentExtractionQueue] = {}
        self._adopter: asyncio.Task[None] | None = None
        self._running = False
        self._stopping = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._held = 0  # items queued or being processed
        self._drops_unlogged = 0
        self._last_drop_log: datetime | None = None
        # Counters for tests, logs and the benchmark.
        self.high_water = 0
        self.dropped = 0

    @property
    def requests(self) -> int:
        """Model calls made (tests, logs and the benchmark)."""
        return self._batches.requests

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
        if await self._pauses.paused(agent_id):
            return  # the pause was logged once when it began
        scope = scope_of(ev)
        if self._held >= self._max_queue:
            self._drop(agent_id, ev.session.key)
            return
        exchange = Exchange(ev.user_message.id, ev.user_message.text, ev.reply.text)
        new = NewJob(scope, exchange)
        # Counted before the write, so concurrent hooks respect the bound.
        self._held += 1
        self.high_water = max(self.high_water, self._held)
        self._idle.clear()
        now = self._clock.now()
        try:
            job = await self._jobs.enqueue(
                new, worker=self._worker, now=now, lease_until=now + JOB_LEASE
            )
        except Exception as exc:
            self._release_count(1)
            event(
                log,
                logging.ERROR,
                "extraction_not_queued",
                agent=agent_id,
                session=ev.session.key,
                message=ev.user_message.id,
                error=repr(exc),
                action=storage_action(exc),
            )
            return
        if job is None:
            # Their exchange never reaches the extraction model.
            self._release_count(1)
            event(
                log,
                logging.INFO,
                "extraction_skipped",
                agent=agent_id,
                session=ev.session.key,
                message=ev.user_message.id,
                reason="follow-ups switched off",
            )
            return
        self._queue(job)

    def _queue(self, job: ExtractionJob) -> None:
        """Hand a claimed job (already counted in `_held`) to its agent's queue."""
        agent_id = job.scope.agent_id
        queue = self._queues.get(agent_id)
        if queue is None:
            queue = self._queues[agent_id] = AgentExtractionQueue()
            queue.task = asyncio.create_task(
                self._run_queue(agent_id, queue), name=f"extract-{agent_id}"
            )
        queue.add(job, self._clock.now())
        if len(queue.items) >= self._max_batch:
            queue.full.set()

    def _release_count(self, count: int) -> None:
        self._held -= count
        if self._held <= 0:
            self._held = 0
            self._idle.set()

    # --- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        self._running = True
        self._stopping.clear()
        if self._adopter is None or self._adopter.done():
            self._idle.clear()  # until the first look for waiting jobs
            self._adopter = asyncio.create_task(self._adopt_orphans(), name="extract-adopt")

    async def stop(self, *, drain_seconds: float = 5.0) -> None:
        """Stop taking items, give queued ones `drain_seconds` (wall time) to
        finish without batch waits, then cancel and log what was dropped."""
        self._running = False
        self._stopping.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain_seconds):
                await self._idle.wait()
        tasks = [queue.task for queue in self._queues.values() if queue.task is not None]
        if self._adopter is not None:
            tasks.append(self._adopter)
            self._adopter = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._queues.clear()
        self._held = 0
        self._idle.set()
        try:
            left = await self._jobs.release(worker=self._worker)
        except Exception as exc:
            event(
                log,
                logging.WARNING,
                "extraction_release_failed",
                error=repr(exc),
                action="none: the jobs are adopted when their lease runs out",
            )
            return
        if left:
            event(
                log,
                logging.INFO,
                "extraction_queued_at_stop",
                count=left,
                action="none: the next start (or another worker) extracts them",
            )

    async def _adopt_orphans(self) -> None:
        """Take over jobs nobody vouches for: left by a stop or a crash."""
        while not self._stopping.is_set():
            # Not idle while looking: wait_idle() also waits for jobs found
            # in the database (at start, or once a dead worker's lease ran out).
            self._idle.clear()
            try:
                claimed = await self.adopt()
                if claimed:
                    continue  # maybe more; the queues bound what is taken
                if self._held == 0:
                    self._idle.set()
                now = self._clock.now()
                at = await self._jobs.next_orphan_at(now)
                wait = ADOPT_EVERY if at is None else min(max(at - now, timedelta()), ADOPT_EVERY)
            except Exception as exc:
                event(
                    log,
                    logging.WARNING,
                    "extraction_adopt_failed",
                    error=repr(exc),
                    action=storage_action(exc),
                )
                wait = ADOPT_EVERY
                if self._held == 0:
                    self._idle.set()
            await self._clock.sleep(max(wait.total_seconds(), 1.0))

    async def adopt(self) -> int:
        """Claim jobs nobody vouches for now and queue them; how many (the
        background loop calls this; so may a test)."""
        room = min(self._max_queue - self._held, self._max_batch)
        if room <= 0:
            return 0
        now = self._clock.now()
        jobs = await self._jobs.claim_orphans(
            worker=self._worker, now=now, lease_until=now + JOB_LEASE, limit=room
        )
        if jobs:
            self._held += len(jobs)
            self.high_water = max(self.high_water, self._held)
            self._idle.clear()
            for job in jobs:
                self._queue(job)
            event(log, logging.INFO, "extraction_jobs_adopted", count=len(jobs))
        return len(jobs)

    async def wait_idle(self) -> None:
        """Until every queued item has been processed (tests, benchmarks)."""
        await self._idle.wait()

    # --- queues --------------------------------------------------------------

    async def _run_queue(self, agent_id: str, queue: AgentExtractionQueue) -> None:
        while True:
            await queue.wake.wait()
            await self._wait_ready(queue)
            # A backed-up queue (or a stop, or no window) takes sessions
            # whether they are quiet or not, the longest waiting first; at
            # most one batch's worth: bounded steps, not one huge gather.
            every = self._batch_seconds <= 0 or self._stopping.is_set() or queue.full.is_set()
            batch = queue.take(
                self._clock.now(),
                quiet=self._quiet,
                longest=self._longest,
                limit=self._max_batch,
                sessions=self._batch_sessions,
                every=every,
            )
            if len(queue.items) < self._max_batch:
                queue.full.clear()
            if not batch:
                continue  # a session spoke again while we waited: its window moved
            try:
                await self._run_batch(agent_id, batch)
            finally:
                self._release_count(len(batch))

    async def _run_batch(self, agent_id: str, batch: list[ExtractionJob]) -> None:
        """Extract, then remove the jobs whatever the model answered (as a
        reply is never extracted twice on purpose). A batch that failed (the
        model's errors are handled inside, so a store that could not read or
        write) keeps its jobs: they are adopted again when their lease runs
        out, and extracting twice merges by dedupe key. A stop cancels before
        the removal, leaving them for release(); a database that cannot
        remove them leaves them to be adopted when their lease runs out."""
        ids = [job.id for job in batch]
        try:
            now = self._clock.now()
            await self._jobs.renew(ids, worker=self._worker, lease_until=now + JOB_LEASE)
            # Only the jobs still stored: the rows of a member erased or
            # switched off since they were queued are gone, and their copies
            # here must not reach the model (switched back on meanwhile, the
            # preference alone would let them through).
            still = await self._jobs.existing(ids)
            await self._batches.process(agent_id, [job for job in batch if job.id in still])
        except Exception as exc:  # never let one bad batch end the queue
            event(
                log,
                logging.ERROR,
                "extraction_batch_failed",
                agent=agent_id,
                jobs=len(ids),
                retry_in_s=int(JOB_LEASE.total_seconds()),
                error=repr(exc),
                action=storage_action(exc),
            )
            return
        try:
            await self._jobs.complete(ids, worker=self._worker)
        except Exception as exc:
            event(
                log,
                logging.WARNING,
                "extraction_jobs_not_removed",
                agent=agent_id,
                jobs=len(ids),
                error=repr(exc),
                action=storage_action(exc),
            )

    async def _wait_ready(self, queue: AgentExtractionQueue) -> None:
        """Until the first waiting session is ready (quiet for the batch
        window, or waiting the longest allowed), the queue is backed up, or
        the worker stops."""
        if self._batch_seconds <= 0 or self._stopping.is_set() or queue.full.is_set():
            return
        at = queue.next_ready(self._quiet, self._longest)
        if at is None:
            return
        wait = (at - self._clock.now()).total_seconds()
        if wait <= 0:
            return
        waits = [
            asyncio.ensure_future(self._clock.sleep(wait)),
            asyncio.ensure_future(self._stopping.wait()),
            asyncio.ensure_future(queue.full.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

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
