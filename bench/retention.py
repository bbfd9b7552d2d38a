"""What a retention pass costs: a database of --messages messages, --due of
them older than `storage.retention.messages`, erased by the background pass
(core/privacy/retention.py) in its batches; meanwhile another chat keeps
writing turn-like messages, and its write latency during the pass is set
beside its latency before. Reports rows erased per second, each batch's
time (what a write can wait behind), and the other chat's p50/p99/max.

    .venv/bin/python bench/retention.py [--messages 1000000] [--due N]
        [--batch 300] [--seconds 0] [--backends sqlite,postgres]
        [--pg-messages 100000] [--url postgresql://...]

--seconds stops the pass after that long (0: erase every due row), for a
purge too slow to wait for; the rate is then over what it erased.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import print_metrics
from bench.scale import fresh_postgres
from core.clock import SystemClock
from core.config.model import RetentionConfig
from core.privacy.retention import BATCH, Retention
from core.privacy.store import RetainedKind, RetentionStore
from core.search.reconcile import IndexReconciler
from core.store.backends import Backend, open_backend
from core.store.base import ImportRow, NewMessage

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=400)
RECENT = NOW - timedelta(days=10)
BUSY = "agent:main:telegram:private:7"
IMPORT_ROWS = 20_000
POLICY = RetentionConfig(messages="365d", closed=None)


async def _build(backend: Backend, messages: int, due: int) -> None:
    for start in range(0, messages, IMPORT_ROWS):
        rows = [
            ImportRow(
                f"agent:main:telegram:group:-{100 + n % 2000}",
                "user" if n % 2 == 0 else "assistant",
                f"words {n} here and {n % 977} there",
                OLD if n < due else RECENT,
            )
            for n in range(start, min(messages, start + IMPORT_ROWS))
        ]
        await backend.store.import_messages(rows)
    await IndexReconciler(backend.store, SystemClock()).run_once()
    await backend.store.ensure_session(
        BUSY, agent_id="main", platform="telegram", chat_id="7", chat_kind="private",
        thread_id=None, now=NOW,
    )  # fmt: skip


class _Timed(RetentionStore):
    """The backend's RetentionStore, each batch timed; after `deadline`
    (perf_counter seconds, 0: none) it answers that nothing is left, so the
    pass ends as it would, purge included."""

    def __init__(self, inner: RetentionStore, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline
        self.batch_ms: list[float] = []
        self.finish_ms = 0.0

    async def erase_batch(self, kind: RetainedKind, before: datetime, *, limit: int) -> int:
        if self._deadline and time.perf_counter() > self._deadline:
            return 0
        started = time.perf_counter()
        rows = await self._inner.erase_batch(kind, before, limit=limit)
        if rows:
            self.batch_ms.append((time.perf_counter() - started) * 1000)
        return rows

    async def finish(self, kinds: Collection[RetainedKind]) -> None:
        started = time.perf_counter()
        await self._inner.finish(kinds)
        self.finish_ms = (time.perf_counter() - started) * 1000

    async def oldest_message(self) -> datetime | None:
        return await self._inner.oldest_message()


async def _writes(backend: Backend, stop: asyncio.Event, latencies: list[float]) -> None:
    """A turn's two writes (the user's message, then the reply), over and over."""
    n = 0
    while not stop.is_set():
        n += 1
        started = time.perf_counter()
        asked = await backend.store.add_message(
            NewMessage(BUSY, "user", f"still talking {n}", NOW, sender_id="7")
        )
        latencies.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await backend.store.add_message(
            NewMessage(BUSY, "assistant", f"answer {n}", NOW, in_reply_to=asked.id)
        )
        latencies.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.002)


def _quantile(values: list[float], q: int) -> float:
    if len(values) < 3:
        return round(max(values, default=0.0), 2)
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 2)


def _latency(name: str, values: list[float]) -> dict[str, Any]:
    return {
        f"{name}_p50_ms": _quantile(values, 50),
        f"{name}_p99_ms": _quantile(values, 99),
        f"{name}_max_ms": round(max(values, default=0.0), 2),
    }


async def _run(url: str, messages: int, due: int, args: argparse.Namespace) -> dict[str, Any]:
    async with open_backend(url) as backend:
        result: dict[str, Any] = {"messages": messages, "due": due}
        if backend.database.dialect.name == "sqlite":
            [(version,)] = await backend.database.query("SELECT sqlite_version()")
            result["sqlite_version"] = version
        started = time.perf_counter()
        await _build(backend, messages, due)
        result["build_s"] = round(time.perf_counter() - started, 1)

        quiet, before = asyncio.Event(), []
        writer = asyncio.create_task(_writes(backend, quiet, before))
        await asyncio.sleep(2.0)
        quiet.set()
        await writer

        passing, during = asyncio.Event(), []
        writer = asyncio.create_task(_writes(backend, passing, during))
        await asyncio.sleep(0.05)  # the chat is writing when the pass starts
        started = time.perf_counter()
        deadline = started + args.seconds if args.seconds else 0.0
        timed = _Timed(backend.retention, deadline)
        done = await Retention(timed, lambda: POLICY, SystemClock(), batch=args.batch).run_once()
        pass_s = time.perf_counter() - started
        passing.set()
        await writer
        erased = done.erased.get("messages", 0)
        result.update(
            {
                "erased": erased,
                "pass_s": round(pass_s, 1),
                "rows_per_s": round(erased / pass_s) if pass_s else 0,
                "batch": args.batch,
                "batches": len(timed.batch_ms),
                **_latency("batch", timed.batch_ms),
                "finish_ms": round(timed.finish_ms, 1),
                **_latency("write_before", before),
                **_latency("write_during", during),
                "writes_during": len(during),
            }
        )
        left = await backend.database.query("SELECT count(*) FROM messages WHERE ts < ?", (
            backend.database.dialect.time(NOW - timedelta(days=365)),
        ))  # fmt: skip
        result["due_left"] = int(left[0][0])
        return result


async def main_async(args: argparse.Namespace) -> None:
    result: dict[str, Any] = {"bench": "retention"}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        for backend in args.backends.split(","):
            if backend == "sqlite":
                due = args.messages if args.due is None else args.due
                url = f"sqlite:///{tmp}/retention.sqlite"
                result["sqlite"] = await _run(url, args.messages, due, args)
            else:
                due = args.pg_messages if args.due is None else min(args.due, args.pg_messages)
                url, server = fresh_postgres(args.url, tmp, 1)
                try:
                    result["postgres"] = await _run(url, args.pg_messages, due, args)
                finally:
                    if server is not None:
                        server.cleanup()
    print_metrics("A retention pass, and another chat's writes during it", result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--due", type=int, help="messages past the retention (default: all)")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--pg-messages", type=int, default=100_000)
    parser.add_argument("--url", help="a PostgreSQL server to create the bench database on")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
