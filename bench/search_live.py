"""The live-filled variant of bench/search.py (`--fill live`).

A bot that was never imported into has an index built only by `add_message`,
one message and its full-text row per transaction. Here the rows the import
would have loaded go through `add_message` instead, with no reconciler
running, so the index is as live writes leave it; search is measured on it,
then after one background compaction pass (IndexReconciler.compact, the
pass the bot's reconciler runs once enough writes have gone in), and the
two are compared. The WAL file is measured after the fill, and after the
reconciler's idle upkeep.
"""

from __future__ import annotations

import math
import random
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from rich.table import Table

from core.clock import SystemClock
from core.search.query import build_query
from core.search.reconcile import IndexReconciler
from core.search.service import DEFAULT_LIMIT
from core.store import NewMessage, SearchScope, Store
from core.store.sqlite import SqliteStore
from core.store.sqlite import search as sqlite_search


async def live_fill(
    store: SqliteStore,
    rows: Iterator[tuple[str, str, str, str]],
    ensure: Callable[[str], Any],
    serial: list[int],
) -> dict[str, Any]:
    """Store (session key, role, text, ISO time) rows with add_message, one
    per transaction; `ensure(key)` creates a session on first sight."""
    seen: set[str] = set()
    stored = 0
    t0 = time.perf_counter()
    for key, role, text, iso in rows:
        if key not in seen:
            seen.add(key)
            await ensure(key)
        serial[0] += 1
        ts = datetime.fromisoformat(iso.replace("Z", "+00:00"))
        if role == "user":
            message = NewMessage(
                key, "user", text, ts, sender_id="u", platform_message_id=f"live{serial[0]}"
            )
        else:
            message = NewMessage(key, "assistant", text, ts)
        await store.add_message(message)
        stored += 1
    seconds = time.perf_counter() - t0
    return {
        "rows": stored,
        "seconds": round(seconds, 2),
        "rate_per_s": round(stored / seconds, 1) if seconds else 0.0,
    }


def _mb(n: int) -> float:
    return round(n / 1e6, 1)


async def shape(store: SqliteStore) -> dict[str, int]:
    s = await store.index_shape()
    return {"levels": s.levels, "segments": s.segments, "leaves_written": s.leaves_written}


async def wal_upkeep(store: SqliteStore) -> dict[str, Any]:
    """The WAL after the fill (a burst), then after the reconciler's idle
    checkpoint; no compaction happens here (the index stays as filled)."""
    after_burst = store.wal_bytes()
    t0 = time.perf_counter()
    await store.checkpoint_log()
    return {
        "wal_mb_after_burst": _mb(after_burst),
        "wal_mb_after_idle_checkpoint": _mb(store.wal_bytes()),
        "checkpoint_ms": round((time.perf_counter() - t0) * 1000, 1),
    }


class _TimedSteps:
    """The store as the reconciler sees it, timing each compaction step."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self.step_ms: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def compact_index(self, pages: int = 500) -> bool:
        t0 = time.perf_counter()
        more = await self._store.compact_index(pages)
        self.step_ms.append((time.perf_counter() - t0) * 1000)
        return more


async def compact(store: SqliteStore) -> dict[str, Any]:
    """One background compaction pass, as the bot's reconciler runs it."""
    before = await shape(store)
    timed = _TimedSteps(store)
    reconciler = IndexReconciler(cast(Store, timed), SystemClock())
    t0 = time.perf_counter()
    steps = await reconciler.compact()
    seconds = time.perf_counter() - t0
    wal_peak = store.wal_bytes()
    await store.checkpoint_log()
    return {
        "steps": steps,
        "seconds": round(seconds, 2),
        "step_ms_max": round(max(timed.step_ms), 1),
        "step_ms_median": round(sorted(timed.step_ms)[len(timed.step_ms) // 2], 1),
        "shape_before": before,
        "shape_after": await shape(store),
        "wal_mb_after_pass": _mb(wal_peak),
        "wal_mb_after_idle_checkpoint": _mb(store.wal_bytes()),
    }


def comparison(
    classes: Iterable[str], live: dict[str, Any], compacted: dict[str, Any], title: str
) -> Table:
    table = Table(title=title)
    for col in ("class", "live p50", "live p95", "compacted p50", "compacted p95", "p50 ratio"):
        table.add_column(col, justify="left" if col == "class" else "right")
    for cls in classes:
        a, b = live["classes"][cls], compacted["classes"][cls]
        ratio = a["ours_p50_ms"] / b["ours_p50_ms"] if b["ours_p50_ms"] else float("nan")
        table.add_row(
            cls,
            f"{a['ours_p50_ms']:.2f}",
            f"{a['ours_p95_ms']:.2f}",
            f"{b['ours_p50_ms']:.2f}",
            f"{b['ours_p95_ms']:.2f}",
            f"{ratio:.2f}",
        )
    return table


def interleaved(
    paths: dict[str, Path], queries: dict[str, str], rounds: int, seed: int
) -> dict[str, dict[str, float]]:
    """The store's own search SQL (agent scope) per query class on each
    database, the databases taking turns query by query, so load from
    elsewhere on the machine falls on all of them alike. Median and p95 ms
    per class and database."""
    conns = {}
    for name, path in paths.items():
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA cache_size = -65536")
        conns[name] = conn
    parsed = {}
    for q in queries:
        built = build_query(q)
        assert built is not None, q
        parsed[q] = built
    scope = SearchScope(agent_id="main")
    samples: dict[str, dict[str, list[float]]] = {}
    rng = random.Random(f"{seed}-interleaved")
    order = list(queries)
    try:
        for q in order:  # warm-up
            for conn in conns.values():
                sqlite_search.search_rows(conn, parsed[q], scope, DEFAULT_LIMIT)
        for _ in range(rounds):
            rng.shuffle(order)
            for q in order:
                names = list(conns)
                rng.shuffle(names)
                for name in names:
                    t0 = time.perf_counter()
                    sqlite_search.search_rows(conns[name], parsed[q], scope, DEFAULT_LIMIT)
                    ms = (time.perf_counter() - t0) * 1000
                    samples.setdefault(queries[q], {}).setdefault(name, []).append(ms)
    finally:
        for conn in conns.values():
            conn.close()
    return {
        cls: {
            f"{name}_{stat}": round(value, 3)
            for name, values in by_db.items()
            for stat, value in (
                ("p50", statistics.median(values)),
                ("p95", sorted(values)[max(0, math.ceil(0.95 * len(values)) - 1)]),
            )
        }
        for cls, by_db in samples.items()
    }


def interleaved_table(figures: dict[str, dict[str, float]], names: list[str], title: str) -> Table:
    table = Table(title=title)
    table.add_column("class")
    for name in names:
        table.add_column(f"{name} p50", justify="right")
        table.add_column(f"{name} p95", justify="right")
    table.add_column(f"{names[0]} / {names[-1]} p50", justify="right")
    for cls, f in figures.items():
        cells = [f"{f[f'{n}_{s}']:.3f}" for n in names for s in ("p50", "p95")]
        ratio = f[f"{names[0]}_p50"] / f[f"{names[-1]}_p50"]
        table.add_row(cls, *cells, f"{ratio:.2f}")
    return table
