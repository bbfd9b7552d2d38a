"""The live-filled variant of bench/search.py (`--fill live`).

A bot that was never imported into has an index built only by `add_message`,
one message and its full-text row per transaction. Here the rows the import
would have loaded go through `add_message` instead, with no reconciler
running, so the index is as live writes leave it; search is measured on it,
then after one background compaction pass (IndexReconciler.compact, the
pass the bot's reconciler runs once enough writes have gone in), and the
two are compared. The WAL file is measured after the fill, and after the
reconciler's idle upkeep.

SQLite only: the compaction pass, the segment counts and the WAL are SQLite's.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from rich.console import Console
from rich.table import Table

from core.clock import SystemClock
from core.search.query import build_query
from core.search.reconcile import IndexReconciler
from core.search.service import DEFAULT_LIMIT
from core.store import NewMessage, SearchScope, Store
from core.store.backends import open_backend
from core.store.sqlite import SqliteStore
from core.store.sqlite import search as sqlite_search
from core.store.sqlite.driver import sqlite3


async def live_fill(
    store: Store,
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


async def index_shape(store: Store) -> dict[str, int] | None:
    """The full-text index's segment shape; None off SQLite."""
    return await shape(store) if isinstance(store, SqliteStore) else None


def live_meta(
    meta: dict[str, Any], fills: list[dict[str, Any]], wal: dict[str, Any], store_name: str
) -> dict[str, Any]:
    """The build's figures for a live fill: nothing was imported or
    reindexed, so those figures give way to the fill's and the WAL's."""
    rows = sum(f["rows"] for f in fills)
    seconds = sum(f["seconds"] for f in fills)
    live_writes = sum(w["writes"] for w in meta["writes"].values())
    out = {k: v for k, v in meta.items() if k not in ("import", "reindex")}
    return out | {
        "built_with": (
            f"{live_writes + rows} messages via {store_name}.add_message (one per transaction), "
            "no import and no reconciler: the index as live writes leave it"
        ),
        "live_fill": {
            "halves": fills,
            "rows": rows,
            "rate_per_s": round(rows / seconds, 1) if seconds else 0.0,
        },
        "wal": wal,
    }


def fill_rows(meta: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(metric, value, target) rows for the build table: how the database
    was filled (import and reindex, or the live fill and the WAL), and the
    index shape (SQLite)."""
    rows = []
    imp = meta.get("import")
    if imp is not None:
        rows += [
            ("import_messages", f"{imp['import_messages_rate_per_s']:,.0f}/s", ">= 20,000/s"),
            ("JSONL parse (read_import_file)", f"{imp['parse_rate_per_s']:,.0f}/s", ""),
            ("parse + import_messages", f"{imp['parse_plus_import_rate_per_s']:,.0f}/s", ""),
            ("reindex (reconciler)", f"{meta['reindex']['rows_per_s']:,.0f} rows/s", ""),
            ("parse + import + reindex", f"{imp['parse_import_reindex_rate_per_s']:,.0f}/s", ""),
        ]
    if "live_fill" in meta:
        wal = meta["wal"]
        rows += [
            ("live fill (add_message)", f"{meta['live_fill']['rate_per_s']:,.0f}/s", ""),
            ("WAL after the fill (a burst)", f"{wal['wal_mb_after_burst']} MB", ""),
            ("WAL after the idle checkpoint", f"{wal['wal_mb_after_idle_checkpoint']} MB", ""),
        ]
    s = meta.get("index_shape")
    if s:
        rows.append(("index levels / segments", f"{s['levels']} / {s['segments']}", ""))
    return rows


async def wal_upkeep(store: Store) -> dict[str, Any]:
    """The WAL after the fill (a burst), then after the reconciler's idle
    checkpoint; no compaction happens here (the index stays as filled)."""
    assert isinstance(store, SqliteStore), "--fill live is SQLite only"
    after_burst = store.connection.wal_bytes()
    t0 = time.perf_counter()
    await store.checkpoint_log()
    return {
        "wal_mb_after_burst": _mb(after_burst),
        "wal_mb_after_idle_checkpoint": _mb(store.connection.wal_bytes()),
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
    wal_peak = store.connection.wal_bytes()
    await store.checkpoint_log()
    return {
        "steps": steps,
        "seconds": round(seconds, 2),
        "step_ms_max": round(max(timed.step_ms), 1),
        "step_ms_median": round(sorted(timed.step_ms)[len(timed.step_ms) // 2], 1),
        "shape_before": before,
        "shape_after": await shape(store),
        "wal_mb_after_pass": _mb(wal_peak),
        "wal_mb_after_idle_checkpoint": _mb(store.connection.wal_bytes()),
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


def _snapshot(path: Path, copy: Path) -> None:
    """A consistent copy of the database, WAL frames included (the backup
    API, not a file copy: the store's WAL need not be checkpointed)."""
    copy.unlink(missing_ok=True)
    src, dst = sqlite3.connect(path), sqlite3.connect(copy)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def _save(meta_path: Path, meta: dict[str, Any]) -> None:
    meta_path.write_text(json.dumps(meta, ensure_ascii=False))


async def after_search(
    path: Path,
    meta_path: Path,
    meta: dict[str, Any],
    search: dict[str, Any],
    measure: Callable[[], Awaitable[dict[str, Any]]],
    args: Any,
) -> dict[str, Any]:
    """For a live-filled database: keep a copy as filled, run one compaction
    pass, `measure()` search again, then the store's search SQL on both files
    taking turns (`args.repeat * args.rounds` passes). A kept database is
    compacted on its first run; a rerun only repeats the side-by-side run.
    Empty for an imported database."""
    if meta.get("fill") != "live":
        return {}
    out: dict[str, Any] = {}
    uncompacted = path.with_name(path.name + ".uncompacted")
    if "compaction" not in meta:
        _snapshot(path, uncompacted)
        store = open_backend(f"sqlite:///{path}").store
        assert isinstance(store, SqliteStore)
        await store.open()
        try:
            meta["compaction"] = await compact(store)
        finally:
            await store.close()
        # A kept database is compacted now: a rerun measures only that.
        _save(meta_path, meta)
        out["search_after_compaction"] = await measure()
    if uncompacted.exists():
        classes = {q: info["class"] for q, info in search["per_query"].items()}
        paths = {"live": uncompacted, "compacted": path}
        out["search_sql_side_by_side"] = interleaved(
            paths, classes, args.repeat * args.rounds, meta["seed"]
        )
    return out


def print_tables(
    console: Console, meta: dict[str, Any], search: dict[str, Any], live: dict[str, Any]
) -> None:
    compacted = live.get("search_after_compaction")
    if compacted is not None:
        pass_ = meta["compaction"]
        title = (
            f"live-filled index before and after one background compaction pass "
            f"({pass_['steps']} steps, {pass_['seconds']} s, longest step "
            f"{pass_['step_ms_max']} ms; segments {pass_['shape_before']['segments']} -> "
            f"{pass_['shape_after']['segments']})"
        )
        console.print(comparison(list(search["classes"]), search, compacted, title))
    side_by_side = live.get("search_sql_side_by_side")
    if side_by_side is not None:
        title = "store search SQL (agent scope), live-filled vs compacted file, taking turns"
        console.print(interleaved_table(side_by_side, ["live", "compacted"], title))


def summary(meta: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """The live-fill keys of the JSON line (None where they do not apply)."""
    return {
        "fill": meta.get("fill", "import"),
        "live_fill": meta.get("live_fill"),
        "wal": meta.get("wal"),
        "index_shape": meta.get("index_shape"),
        "compaction": meta.get("compaction"),
        "search_after_compaction": live.get("search_after_compaction"),
        "search_sql_side_by_side": live.get("search_sql_side_by_side"),
    }
