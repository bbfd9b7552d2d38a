"""What erasing one user costs: `kept users forget` of a user with
--user-messages messages (half in their private chat, half in a busy
group) in a database of --messages messages, on each backend; meanwhile
another chat keeps writing, and its write latency during the erasure is
set beside its latency before. On SQLite, also a backup of the same
database (`kept backup`).

    .venv/bin/python bench/forget.py [--messages 1000000] [--user-messages 10000]
        [--backends sqlite,postgres] [--url postgresql://...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import print_metrics
from bench.scale import fresh_postgres
from core.clock import SystemClock
from core.privacy.store import ErasedUser
from core.search.reconcile import IndexReconciler
from core.store.backends import Backend, open_backend
from core.store.base import ImportRow, NewMessage

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
USER = "4242"
PRIVATE = f"agent:main:telegram:private:{USER}"
GROUP = "agent:main:telegram:group:-1"
BUSY = "agent:main:telegram:private:7"
BATCH = 20_000


async def _build(backend: Backend, messages: int, user_messages: int) -> None:
    others = messages - user_messages
    for start in range(0, others, BATCH):
        rows = [
            ImportRow(
                f"agent:main:telegram:group:-{100 + n % 2000}", "user", f"words {n} here", NOW
            )
            for n in range(start, min(others, start + BATCH))
        ]
        await backend.store.import_messages(rows)
    half = user_messages // 2
    await backend.store.import_messages(
        [ImportRow(PRIVATE, "user", f"my own words {n}", NOW) for n in range(half)]
    )
    await IndexReconciler(backend.store, SystemClock()).run_once()
    for key, chat, kind in ((GROUP, "-1", "group"), (BUSY, "7", "private")):
        await backend.store.ensure_session(
            key, agent_id="main", platform="telegram", chat_id=chat, chat_kind=kind,
            thread_id=None, now=NOW,
        )  # fmt: skip
    for n in range(user_messages - half):
        await backend.store.add_message(
            NewMessage(GROUP, "user", f"in the group {n}", NOW, sender_id=USER)
        )


async def _writes(backend: Backend, stop: asyncio.Event, latencies: list[float]) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        started = time.perf_counter()
        await backend.store.add_message(
            NewMessage(BUSY, "user", f"still talking {n}", NOW, sender_id="7")
        )
        latencies.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.002)


def _p99(values: list[float]) -> float:
    return (
        round(statistics.quantiles(values, n=100, method="inclusive")[98], 2)
        if len(values) > 2
        else 0.0
    )


async def _run(url: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    async with open_backend(url) as backend:
        started = time.perf_counter()
        await _build(backend, args.messages, args.user_messages)
        build_s = time.perf_counter() - started
        quiet, before = asyncio.Event(), []
        writer = asyncio.create_task(_writes(backend, quiet, before))
        await asyncio.sleep(1.0)
        quiet.set()
        await writer
        erasing, during = asyncio.Event(), []
        writer = asyncio.create_task(_writes(backend, erasing, during))
        await asyncio.sleep(0.05)  # the chat is writing when the erasure starts
        started = time.perf_counter()
        counts = await backend.erasure.erase(ErasedUser("telegram", USER))
        erase_s = time.perf_counter() - started
        erasing.set()
        await writer
        result: dict[str, Any] = {
            "build_s": round(build_s, 1),
            "erase_s": round(erase_s, 3),
            "erased_messages": counts.messages,
            "other_chat_write_p99_ms_before": _p99(before),
            "other_chat_write_p99_ms_during": _p99(during),
            "other_chat_write_max_ms_during": round(max(during, default=0.0), 2),
            "other_chat_writes_during": len(during),
        }
        if backend.backup is not None:
            started = time.perf_counter()
            copy = await backend.backup.backup(tmp / "backup.sqlite")
            result["backup_s"] = round(time.perf_counter() - started, 2)
            result["backup_mb"] = round(copy.bytes / 1e6, 1)
        return result


async def main_async(args: argparse.Namespace) -> None:
    result: dict[str, Any] = {
        "bench": "forget", "messages": args.messages, "user_messages": args.user_messages,
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        for backend in args.backends.split(","):
            if backend == "sqlite":
                result["sqlite"] = await _run(f"sqlite:///{tmp}/forget.sqlite", args, tmp)
            else:
                url, server = fresh_postgres(args.url, tmp, 1)
                try:
                    result["postgres"] = await _run(url, args, tmp)
                finally:
                    if server is not None:
                        server.cleanup()
    print_metrics(
        f"Erasing a user of {args.user_messages:,} messages among {args.messages:,}", result
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--user-messages", type=int, default=10_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--url", help="a PostgreSQL server to create the bench database on")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
