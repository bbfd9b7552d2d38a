"""Heartbeat scheduler: finding and claiming due work among many pending.

Builds databases with N pending commitments over N/10 scopes, of which 10 are
due now, then times `due_unclaimed` + grouping + `claim` (what a tick does
before the model call) and a whole scheduler tick with an instant model and
sender. Reports the process's peak memory.

    .venv/bin/python bench/scheduler.py [--sizes 10000,1000000] [--repeat 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from core.store.sqlite.driver import sqlite3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table

from core.clock import TestClock
from core.commitments.model import Scope
from core.config.model import KeptConfig
from core.heartbeat.source import FollowUpSource
from core.heartbeat.turn import HeartbeatTurn
from core.llm import Completion
from core.locks import SessionLocks
from core.messages import Outbound, SendResult
from core.scheduler import Scheduler
from core.store.backends import open_backend
from core.store.dialect import to_ms

LEASE = timedelta(minutes=10)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DUE = 10


class InstantModel:
    async def complete(self, role: str, messages: list[dict[str, Any]], **_: Any) -> Completion:
        return Completion(text="How did it go?", tool_calls=[], finish_reason="stop", model="x")


class NullSender:
    async def send(self, outbound: Outbound) -> SendResult:
        return SendResult(message_id="1")


def populate(path: Path, pending: int) -> None:
    scopes = max(1, pending // 10)
    db = sqlite3.connect(path)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("BEGIN")
    sessions = (
        (f"agent:main:telegram:private:{s}", "main", "telegram", str(s), "private", 0, 0)
        for s in range(scopes)
    )
    db.executemany(
        "INSERT INTO sessions(key, agent_id, platform, chat_id, chat_kind, created_at, "
        "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        sessions,
    )
    future = to_ms(NOW + timedelta(days=2))
    due = to_ms(NOW - timedelta(minutes=5))
    latest = to_ms(NOW + timedelta(days=5))

    def rows():
        for i in range(pending):
            s = i % scopes
            earliest = due if i < DUE else future + i
            yield (
                f"cm_{i:012x}", "main", f"agent:main:telegram:private:{s}", "telegram",
                str(s), None, str(s), "event_check_in", "routine", "inferred_user_context",
                "pending", "reason", f"follow-up {i}", f"k{i}", 0.9, earliest, latest,
                "UTC", None, 0, 0,
            )  # fmt: skip

    db.executemany(
        "INSERT INTO commitments(id, agent_id, session_key, platform, chat_id, thread_id, "
        "sender_id, kind, sensitivity, source, status, reason, suggested_text, dedupe_key, "
        "confidence, due_earliest, due_latest, due_timezone, source_message_id, created_at, "
        "updated_at) VALUES (" + ", ".join("?" * 21) + ")",
        rows(),
    )
    db.execute("COMMIT")
    db.execute("ANALYZE")
    db.close()


async def measure(pending: int, repeat: int, tmp: Path) -> dict[str, Any]:
    path = tmp / f"sched-{pending}.sqlite"
    backend = open_backend(f"sqlite:///{path}")
    store = backend.store
    await store.open()
    await store.close()
    populate(path, pending)
    await store.open()
    hb = backend.heartbeat
    find_claim: list[float] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        due = await hb.due_unclaimed(now=NOW, limit=500)
        groups: dict[Scope, list[str]] = {}
        for c in due:
            groups.setdefault(c.scope, []).append(c.id)
        ids = [i for ids in groups.values() for i in ids]
        claimed = await hb.claim(ids, worker="bench", now=NOW, lease_until=NOW + LEASE)
        find_claim.append((time.perf_counter() - t0) * 1000)
        assert len(claimed) == DUE, len(claimed)
        await hb.release(claimed, worker="bench", now=NOW, error="bench")
    next_wake = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await hb.next_due_after(NOW)
        next_wake.append((time.perf_counter() - t0) * 1000)
    clock = TestClock(NOW)
    config = KeptConfig.model_validate({"commitments": {"enabled": True}})
    scheduler = Scheduler(
        [
            FollowUpSource(
                config=lambda: config,
                commitments=backend.commitments,
                store=hb,
                turn=HeartbeatTurn(
                    store=hb,
                    transcript=store,
                    llm=InstantModel(),
                    sender=NullSender(),
                    clock=clock,
                    worker="bench",
                ),
                clock=clock,
                platforms=lambda: {"telegram"},
                session_locks=SessionLocks(),
            )
        ],
        clock=clock,
    )
    t0 = time.perf_counter()
    await scheduler.tick()
    tick_ms = (time.perf_counter() - t0) * 1000
    await store.close()
    find_claim.sort()
    return {
        "pending": pending,
        "scopes": max(1, pending // 10),
        "due": DUE,
        "find_claim_median_ms": round(statistics.median(find_claim), 3),
        "find_claim_p95_ms": round(find_claim[int(len(find_claim) * 0.95) - 1], 3),
        "next_wake_median_ms": round(statistics.median(next_wake), 3),
        "tick_delivering_10_ms": round(tick_ms, 1),
        "db_mb": round(path.stat().st_size / 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        results = [asyncio.run(measure(n, args.repeat, Path(tmp))) for n in sizes]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    table = Table(title="heartbeat: find and claim due work")
    for key in results[0]:
        table.add_column(key, justify="right")
    for r in results:
        table.add_row(*(str(v) for v in r.values()))
    Console().print(table)
    small, large = results[0]["find_claim_p95_ms"], results[-1]["find_claim_p95_ms"]
    summary = {
        "bench": "scheduler",
        "results": results,
        "ratio_largest_to_smallest_p95": round(large / small, 2) if small else None,
        "peak_rss_mb": round(rss_mb, 1),
        "target": "under 5 ms at 1,000,000 and at most 2x the 10,000 figure",
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
