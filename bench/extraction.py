"""Extraction overhead: does the background pass slow the visible reply down?

10,000 turns across 100 sessions go through the real ConversationManager on a
file database, once with commitments disabled and once enabled (the real
ExtractionWorker with its default batching, queue bound and concurrency); the
two alternate in chunks so that other load on the machine hits both alike. A
fake in-process model answers both roles instantly; one turn in ten mentions
an interview, for which the fake extraction model proposes a follow-up
(deduplicated per session). The
reply latency (handle() entry to the reply handed to the sender) is compared
at p95; the target is enabled within 5% of disabled.

    .venv/bin/python bench/extraction.py [--turns 10000] [--sessions 100] [--chunk 2000] [--control]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from bench.report import print_metrics
from core.clock import SystemClock
from core.commitments.extraction import ExtractionWorker
from core.commitments.store import Filter
from core.config.model import CommitmentsConfig, KeptConfig
from core.conversation.events import ReplyEvent
from core.conversation.manager import ConversationManager
from core.llm import Completion
from core.messages import Inbound, Outbound, SendResult, Target
from core.store.backends import open_backend

INTERVIEW = "I have a job interview tomorrow at 10, wish me luck"


def _completion(text: str) -> Completion:
    return Completion(text=text, tool_calls=[], finish_reason="stop", model="fake")


class FakeModel:
    """Chat: an instant echo. Extraction: one follow-up when an exchange
    mentions an interview, else nothing. Counts extraction calls."""

    def __init__(self) -> None:
        self.extraction_requests = 0

    async def complete(self, role: str, messages: list[dict[str, Any]], **_: Any) -> Completion:
        if role != "extraction":
            return _completion("Noted: " + str(messages[-1]["content"]))
        self.extraction_requests += 1
        data = json.loads(messages[-1]["content"])
        if not any(INTERVIEW in e["user"] for e in data["exchanges"]):
            return _completion('{"candidates": [], "resolved": []}')
        tomorrow = datetime.fromisoformat(data["now"]) + timedelta(days=1)
        candidate = {
            "kind": "event_check_in",
            "dueWindow": {"earliest": tomorrow.isoformat(), "latest": None},
            "reason": "user has a job interview",
            "suggestedText": "How did the interview go?",
            "confidence": 0.9,
            "dedupeKey": "interview",
        }
        return _completion(json.dumps({"candidates": [candidate], "resolved": []}))


class StampingSender:
    def __init__(self) -> None:
        self.stamp = 0.0
        self.count = 0

    async def send(self, outbound: Outbound) -> SendResult:
        self.stamp = time.perf_counter()
        self.count += 1
        return SendResult(message_id=str(self.count))


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * 0.95) - 1)]


class Side:
    """One manager on its own database: extraction disabled or enabled."""

    def __init__(self, db: Path, *, enabled: bool, batch_seconds: float = 2.0) -> None:
        self.enabled = enabled
        self.batch_seconds = batch_seconds
        self.db = db
        self.latencies: list[float] = []
        self.model = FakeModel()
        self.sender = StampingSender()
        self.clock = SystemClock()
        config = KeptConfig(commitments=CommitmentsConfig(enabled=enabled))
        self.config = lambda: config

    async def open(self) -> None:
        backend = open_backend(f"sqlite:///{self.db}")
        await backend.open()
        self.store = backend.store
        self.commitments = backend.commitments
        self.worker = ExtractionWorker(
            store=self.commitments,
            jobs=backend.extraction_jobs,
            pauses=backend.extraction_pauses,
            llm=self.model,
            config=self.config,
            clock=self.clock,
            worker="bench",
            batch_seconds=self.batch_seconds,
        )
        self.manager = ConversationManager(
            store=self.store,
            llm=self.model,
            sender=self.sender,
            config=self.config,
            clock=self.clock,
            reply_hooks=[self.worker.on_reply, self._remember],
        )
        self.worker.start()
        self.replayable: list[ReplyEvent] = []

    async def _remember(self, event: ReplyEvent) -> None:
        if len(self.replayable) < 1000:
            self.replayable.append(event)

    async def turns(self, start: int, count: int, sessions: int) -> int:
        """Run turns start..start+count; returns the extraction backlog left."""
        for i in range(start, start + count):
            inbound = Inbound(
                agent_id="main",
                target=Target("telegram", str(i % sessions)),
                chat_kind="private",
                sender_id=str(i % sessions),
                # every session's every tenth message mentions an interview
                text=INTERVIEW if (i // sessions) % 10 == 0 else f"message {i}: the café nearby",
                ts=self.clock.now(),
                platform_message_id=str(i),
            )
            t0 = time.perf_counter()
            await self.manager.handle(inbound)
            self.latencies.append((self.sender.stamp - t0) * 1000)
        await self.manager.drain()
        left = self.worker.queued
        # Finish the extraction backlog before the other side runs, so no
        # extraction work ever overlaps a disabled-side turn.
        await self.worker.wait_idle()
        return left

    async def close(self) -> int:
        stored = len(await self.commitments.list(Filter()))
        await self.worker.stop()
        await self.store.close()
        return stored


async def interleaved(a: Side, b: Side, turns: int, sessions: int, chunk: int) -> int:
    """Alternate chunks of turns between the sides (swapping who goes first),
    so load from anything else on the machine falls on both alike. Returns
    the largest extraction backlog finished at a switch."""
    backlog = 0
    for n, start in enumerate(range(0, turns, chunk)):
        count = min(chunk, turns - start)
        for side in (a, b) if n % 2 == 0 else (b, a):
            backlog = max(backlog, await side.turns(start, count, sessions))
    return backlog


async def cost_per_exchange(tmp: Path, exchanges: int = 2000) -> float:
    """Wall microseconds the worker needs per queued exchange (prompt, model
    call, parse, rules, store), measured with no turns running, on the same
    mix of messages as the turns (one in ten proposes a follow-up), without a
    batch window: exchanges go in whatever batches have formed as they come."""
    # No batch window: the figure is the work per exchange, not time spent
    # waiting for sessions to fall quiet.
    side = Side(tmp / "cost.sqlite", enabled=True, batch_seconds=0)
    await side.open()
    await side.turns(0, 1000, 100)  # sessions, stored exchanges to replay
    events = list(side.replayable)
    started = time.perf_counter()
    for n in range(exchanges):
        await side.worker.on_reply(events[n % len(events)])
    await side.worker.wait_idle()
    elapsed = time.perf_counter() - started
    await side.close()
    return elapsed / exchanges * 1e6


async def run(turns: int, sessions: int, chunk: int, control: bool, tmp: Path) -> dict[str, Any]:
    off, on = Side(tmp / "off.sqlite", enabled=False), Side(tmp / "on.sqlite", enabled=True)
    await off.open()
    await on.open()
    backlog = await interleaved(off, on, turns, sessions, chunk)
    stored = await on.close()
    await off.close()
    p95_off, p95_on = _p95(off.latencies), _p95(on.latencies)
    result: dict[str, Any] = {
        "bench": "extraction",
        "turns": turns,
        "sessions": sessions,
        "chunk": chunk,
        "extraction_requests": on.model.extraction_requests,
        "extraction_requests_disabled": off.model.extraction_requests,
        "commitments_stored": stored,
        "queue_high_water": on.worker.high_water,
        "dropped": on.worker.dropped,
        "backlog_at_switch_max": backlog,
        "median_ms_disabled": round(statistics.median(off.latencies), 3),
        "median_ms_enabled": round(statistics.median(on.latencies), 3),
        "p95_ms_disabled": round(p95_off, 3),
        "p95_ms_enabled": round(p95_on, 3),
        "p95_overhead_pct": round((p95_on - p95_off) / p95_off * 100, 1),
        "target_overhead_pct": 5.0,
        "worker_us_per_exchange": round(await cost_per_exchange(tmp), 1),
    }
    if control:
        # The same comparison with extraction disabled on both sides: how far
        # apart two identical runs land on this machine right now.
        a, b = Side(tmp / "a.sqlite", enabled=False), Side(tmp / "b.sqlite", enabled=False)
        await a.open()
        await b.open()
        await interleaved(a, b, turns, sessions, chunk)
        await a.close()
        await b.close()
        p95_a, p95_b = _p95(a.latencies), _p95(b.latencies)
        result["control_p95_diff_pct"] = round((p95_b - p95_a) / p95_a * 100, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--chunk", type=int, default=2000)
    parser.add_argument(
        "--control", action="store_true", help="also compare two disabled runs (noise floor)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(run(args.turns, args.sessions, args.chunk, args.control, Path(tmp)))
    print_metrics("kept extraction overhead (fake model, file database)", result)


if __name__ == "__main__":
    main()
