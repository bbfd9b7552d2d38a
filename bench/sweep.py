"""Commitment expiry: the sweep that marks active commitments past their
window as expired, among many that are not (a third already final and long
past, the rest active and due later).

Builds SQLite databases of N commitments of which `--expired` are past
their window, then times `sweep_expired` (what the heartbeat runs every
tick); each repeat puts the expired rows back first.

    .venv/bin/python bench/sweep.py [--sizes 100000,1000000] [--expired 137] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.store.sqlite.driver import sqlite3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import print_metrics
from core.commitments.expiry import EXPIRY_GRACE, sweep_expired
from core.store.backends import open_backend
from core.store.dialect import to_ms

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
SCOPES = 500
DAY_MS = 86_400_000


def populate(path: Path, total: int, expired: int) -> None:
    db = sqlite3.connect(path)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO sessions(key, agent_id, platform, chat_id, chat_kind, created_at, "
        "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            (f"agent:main:telegram:private:{s}", "main", "telegram", str(s), "private", 0, 0)
            for s in range(SCOPES)
        ),
    )
    base = to_ms(NOW)

    def rows() -> Iterator[tuple[Any, ...]]:
        for i in range(total):
            if i < expired:
                status, latest = "pending", base - 2 * DAY_MS
            elif i % 3 == 0:
                status, latest = "sent", base - 5 * DAY_MS  # old, but already final
            else:
                status, latest = ("pending", "snoozed")[i % 2], base + DAY_MS
            s = i % SCOPES
            yield (
                f"cm_{i:012x}", "main", f"agent:main:telegram:private:{s}", "telegram",
                str(s), "u", "event_check_in", "routine", "inferred_user_context", status,
                "r", "s", f"k{i}", 0.9, latest - 3_600_000, latest, "UTC", base, base,
            )  # fmt: skip

    db.executemany(
        "INSERT INTO commitments(id, agent_id, session_key, platform, chat_id, sender_id, "
        "kind, sensitivity, source, status, reason, suggested_text, dedupe_key, confidence, "
        "due_earliest, due_latest, due_timezone, created_at, updated_at) "
        "VALUES (" + ", ".join("?" * 19) + ")",
        rows(),
    )
    db.execute("COMMIT")
    db.execute("ANALYZE")
    db.close()


def restore(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute(
        "UPDATE commitments SET status = 'pending', expired_at = NULL WHERE status = 'expired'"
    )
    db.commit()
    db.close()


async def measure(total: int, expired: int, repeat: int, tmp: Path) -> dict[str, Any]:
    path = tmp / f"sweep-{total}.sqlite"
    backend = open_backend(f"sqlite:///{path}")
    await backend.store.open()
    await backend.store.close()
    populate(path, total, expired)
    times: list[float] = []
    for _ in range(repeat):
        restore(path)
        await backend.store.open()
        try:
            started = time.perf_counter()
            changed = await sweep_expired(backend.commitments, now=NOW, grace=EXPIRY_GRACE)
            times.append((time.perf_counter() - started) * 1000)
            assert changed == expired, changed
            started = time.perf_counter()
            assert await sweep_expired(backend.commitments, now=NOW) == 0
            idle_ms = (time.perf_counter() - started) * 1000
        finally:
            await backend.store.close()
    return {
        "commitments": total,
        "expired": expired,
        "sweep_median_ms": round(statistics.median(times), 2),
        "sweep_max_ms": round(max(times), 2),
        "sweep_with_nothing_due_ms": round(idle_ms, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--expired", type=int, default=137)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        results = [asyncio.run(measure(n, args.expired, args.repeat, Path(tmp))) for n in sizes]
    result: dict[str, Any] = {"bench": "sweep"}
    for r in results:
        for key, value in r.items():
            if key != "commitments":
                result[f"{key}@{r['commitments']}"] = value
    result["target"] = "under 1 s at 100,000 and not growing with the table"
    print_metrics("commitments: the expiry sweep", result)


if __name__ == "__main__":
    main()
