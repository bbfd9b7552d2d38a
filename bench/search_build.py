"""bench/search.py's corpus and build: sessions, the import stream, needles,
and the database built through kept's own store (live writes timed at three
sizes, the import, the reconciliation)."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import search_live
from bench.search_corpus import LANGUAGE_SHARE, LANGUAGES, NEEDLES, TextGenerator
from bench.search_raw import RawDb
from bot.search_cmd import IMPORT_BATCH, read_import_file
from core.clock import SystemClock
from core.messages import Target, session_key
from core.search.reconcile import IndexReconciler
from core.store import NewMessage, Store
from core.store.backends import open_backend

AGENTS = (("main", 0.60), ("support", 0.25), ("research", 0.15))
PLATFORMS = (("telegram", 0.45), ("discord", 0.30), ("whatsapp", 0.15), ("slack", 0.10))
CALLER_AGENT = "main"
IMPORT_START = datetime(2025, 1, 1, tzinfo=UTC)
LIVE_START = datetime(2026, 1, 1, tzinfo=UTC)
CHUNK = 100_000  # JSONL lines per generated import file


# --- the corpus -----------------------------------------------------------------


@dataclass
class SessionSpec:
    key: str
    agent: str
    platform: str
    chat_kind: str
    chat_id: str
    lang: str
    weight: float
    half: int  # 0: imported in the first half, 1: in the second
    start: datetime
    count: int = 0  # messages generated so far (drives role and time)


def make_sessions(n: int, seed: int) -> list[SessionSpec]:
    rng = random.Random(f"{seed}-sessions")
    agents, agent_w = zip(*AGENTS, strict=True)
    platforms, platform_w = zip(*PLATFORMS, strict=True)
    specs = []
    for i in range(n):
        agent = rng.choices(agents, agent_w)[0]
        platform = rng.choices(platforms, platform_w)[0]
        kind = "private" if rng.random() < 0.7 else "group"
        chat_id = str(100000 + i)
        thread = None
        key = session_key(agent, Target(platform, chat_id, thread), kind)  # type: ignore[arg-type]
        specs.append(
            SessionSpec(
                key=key,
                agent=agent,
                platform=platform,
                chat_kind=kind,
                chat_id=chat_id,
                lang=rng.choices(LANGUAGES, LANGUAGE_SHARE)[0],
                # Heavy-tailed: most chats are small, a few very large.
                weight=min(rng.paretovariate(1.3), 60.0),
                half=i % 2,
                start=IMPORT_START + timedelta(days=rng.uniform(0, 300)),
            )
        )
    return specs


def _next_role_ts(spec: SessionSpec, rng: random.Random) -> tuple[str, datetime]:
    role = "user" if spec.count % 2 == 0 else "assistant"
    ts = spec.start + timedelta(minutes=spec.count * 7 + rng.uniform(0, 5))
    spec.count += 1
    return role, ts


def import_stream(
    specs: list[SessionSpec],
    gen: TextGenerator,
    count: int,
    half: int,
    planted: list[tuple[str, str]],
    seed: int,
) -> Iterator[tuple[str, str, str, str]]:
    """(session key, role, text, ISO time) rows for one half; `planted`
    (session key, text) rows are spliced in at random positions."""
    rng = random.Random(f"{seed}-stream-{half}")
    pool = [s for s in specs if s.half == half]
    cum = list(itertools.accumulate(s.weight for s in pool))
    natural = count - len(planted)
    positions = dict(zip(rng.sample(range(natural), len(planted)), planted, strict=True))
    by_key = {s.key: s for s in specs}
    produced = 0
    while produced < natural:
        batch = rng.choices(pool, cum_weights=cum, k=min(10000, natural - produced))
        for spec in batch:
            if produced in positions:
                key, text = positions[produced]
                target = by_key[key]
                _, ts = _next_role_ts(target, rng)
                # Needles are user messages, whatever turn the session is at.
                yield key, "user", text, _iso(ts)
            role, ts = _next_role_ts(spec, rng)
            yield spec.key, role, gen.text(spec.lang, role), _iso(ts)
            produced += 1


def _iso(ts: datetime) -> str:
    return ts.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def plan_needles(
    specs: list[SessionSpec], seed: int
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str]], list[tuple[str, str]]]:
    """Where each needle (and its decoys and other-agent copies) goes."""
    rng = random.Random(f"{seed}-needles")
    needles: dict[str, dict[str, Any]] = {}
    first: list[tuple[str, str]] = []
    second: list[tuple[str, str]] = []
    for needle in NEEDLES:
        home = rng.choice(
            [s for s in specs if s.agent == CALLER_AGENT and s.lang == needle.lang and s.half == 0]
        )
        first.append((home.key, needle.text))
        en_main = [s for s in specs if s.agent == CALLER_AGENT and s.lang == "en"]
        for decoy in needle.decoys:
            first.append((rng.choice(en_main).key, decoy))
        others = [s for s in specs if s.agent != CALLER_AGENT and s.half == 1]
        for _ in range(needle.other_agent_copies):
            second.append((rng.choice(others).key, needle.text))
        needles[needle.name] = {
            "query": needle.query,
            "session": home.key,
            "text": needle.text,
            "decoys": len(needle.decoys),
            "other_agent_copies": needle.other_agent_copies,
        }
    return needles, first, second


# --- building -------------------------------------------------------------------


def _rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else 0.0


def count_messages(raw: RawDb) -> int:
    return int(raw.scalar("SELECT count(*) FROM messages"))


async def measure_writes(
    store: Store,
    raw: RawDb,
    gen: TextGenerator,
    writers: list[SessionSpec],
    count: int,
    blocks: int,
    serial: list[int],
) -> dict[str, Any]:
    """`count` add_message calls, one message per transaction, in `blocks`
    timed blocks; user messages alternate with replies that answer them."""
    rng = random.Random(f"writes-{serial[0]}")
    before = count_messages(raw)
    per_block = max(1, count // blocks)
    rates: list[float] = []
    latencies: list[float] = []
    last_user: dict[str, int] = {}
    awaiting_reply: set[str] = set()  # the plan's view of last_user
    for _ in range(blocks):
        plan = []
        for _ in range(per_block):
            spec = rng.choice(writers)
            if spec.key in awaiting_reply:
                role = "assistant"
                awaiting_reply.discard(spec.key)
            else:
                role = "user"
                awaiting_reply.add(spec.key)
            plan.append((spec, role, gen.text(spec.lang, role)))
        t_block = time.perf_counter()
        for spec, role, text in plan:
            serial[0] += 1
            ts = LIVE_START + timedelta(milliseconds=serial[0])
            if role == "user":
                message = NewMessage(
                    spec.key,
                    "user",
                    text,
                    ts,
                    sender_id=f"u{spec.chat_id}",
                    platform_message_id=f"p{serial[0]}",
                )
            else:
                message = NewMessage(
                    spec.key, "assistant", text, ts, in_reply_to=last_user.pop(spec.key)
                )
            t0 = time.perf_counter()
            record = await store.add_message(message)
            latencies.append((time.perf_counter() - t0) * 1000)
            if role == "user":
                last_user[spec.key] = record.id
        rates.append(per_block / (time.perf_counter() - t_block))
    latencies.sort()
    return {
        "db_messages_before": before,
        "writes": per_block * blocks,
        "blocks": blocks,
        "block_rates_per_s": [round(r, 1) for r in rates],
        "median_rate_per_s": round(statistics.median(rates), 1),
        "latency_p50_ms": round(_pct(latencies, 50), 3),
        "latency_p99_ms": round(_pct(latencies, 99), 3),
    }


async def import_half(
    store: Store,
    rows: Iterator[tuple[str, str, str, str]],
    tmp: Path,
) -> dict[str, Any]:
    """Write CHUNK-line JSONL files (untimed) and load each as `kept import`
    does: parse the file, then import_messages in IMPORT_BATCH-row calls."""
    parse_s = store_s = gen_s = 0.0
    stored = 0
    path = tmp / "chunk.jsonl"
    while True:
        t0 = time.perf_counter()
        lines = 0
        with path.open("w", encoding="utf-8") as handle:
            for key, role, text, ts in rows:
                handle.write(
                    json.dumps(
                        {"session": key, "role": role, "text": text, "ts": ts}, ensure_ascii=False
                    )
                )
                handle.write("\n")
                lines += 1
                if lines == CHUNK:
                    break
        gen_s += time.perf_counter() - t0
        if lines == 0:
            break
        t0 = time.perf_counter()
        parsed, problems = read_import_file(path)
        parse_s += time.perf_counter() - t0
        if problems:
            raise RuntimeError(f"generated JSONL is invalid: {problems[:3]}")
        t0 = time.perf_counter()
        for start in range(0, len(parsed), IMPORT_BATCH):
            stored += await store.import_messages(parsed[start : start + IMPORT_BATCH])
        store_s += time.perf_counter() - t0
        del parsed
        if lines < CHUNK:
            break
    path.unlink(missing_ok=True)
    return {
        "rows": stored,
        "generate_s": round(gen_s, 2),
        "parse_s": round(parse_s, 2),
        "import_messages_s": round(store_s, 2),
        "import_messages_rate_per_s": _rate(stored, store_s),
        "parse_rate_per_s": _rate(stored, parse_s),
        "parse_plus_import_rate_per_s": _rate(stored, parse_s + store_s),
    }


async def reindex_all(store: Store) -> dict[str, Any]:
    indexed = [0, 0]

    def progress(_key: str, rows: int) -> None:
        indexed[0] += 1
        indexed[1] += rows

    t0 = time.perf_counter()
    await IndexReconciler(store, SystemClock()).run_once(progress)
    seconds = time.perf_counter() - t0
    return {
        "sessions": indexed[0],
        "rows": indexed[1],
        "seconds": round(seconds, 2),
        "rows_per_s": _rate(indexed[1], seconds),
    }


def settle() -> None:
    """Let the OS write back the dirty pages a bulk import and reindex leave
    behind, so a write stage measures the database at its size rather than
    the kernel flushing the previous phase. The database is not touched."""
    t0 = time.perf_counter()
    os.sync()
    _log(f"os.sync before the write stage: {time.perf_counter() - t0:.1f} s")


async def build(url: str, raw: RawDb, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    t_build = time.perf_counter()
    gen = TextGenerator(args.seed)
    specs = make_sessions(args.sessions, args.seed)
    needles, planted_first, planted_second = plan_needles(specs, args.seed)
    writes = args.writes
    imported = args.messages - 3 * writes
    if imported < 2 * (len(planted_first) + len(planted_second)):
        raise SystemExit("--messages is too small for the writes and needles")
    first_count = imported // 2
    second_count = imported - first_count
    writers = [s for s in specs if s.agent == CALLER_AGENT and s.half == 0][:40]

    store = open_backend(url).store
    await store.open()
    serial = [0]
    by_key = {s.key: s for s in specs}

    async def ensure(key: str) -> None:
        spec = by_key[key]
        await store.ensure_session(
            spec.key,
            agent_id=spec.agent,
            platform=spec.platform,
            chat_id=spec.chat_id,
            chat_kind=spec.chat_kind,  # type: ignore[arg-type]
            thread_id=None,
            now=IMPORT_START,
        )

    for spec in writers:
        await ensure(spec.key)
    stages: dict[str, Any] = {}
    fills: list[dict[str, Any]] = []
    halves: list[dict[str, Any]] = []
    reindexes: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        for label, half, count, planted in (
            ("empty", 0, first_count, planted_first),
            ("half", 1, second_count, planted_second),
        ):
            settle()
            stages[label] = await measure_writes(
                store, raw, gen, writers, writes, args.blocks, serial
            )
            _log(f"writes at {label}: {stages[label]['median_rate_per_s']}/s")
            rows = import_stream(specs, gen, count, half, planted, args.seed)
            if args.fill == "live":
                fills.append(await search_live.live_fill(store, rows, ensure, serial))
                _log(f"live fill half {half + 1}: {fills[-1]}")
                continue
            halves.append(await import_half(store, rows, Path(tmp)))
            _log(f"import half {half + 1}: {halves[-1]}")
            reindexes.append(await reindex_all(store))
            _log(f"reindex half {half + 1}: {reindexes[-1]}")
        settle()
        stages["full"] = await measure_writes(store, raw, gen, writers, writes, args.blocks, serial)
        _log(f"writes at full: {stages['full']['median_rate_per_s']}/s")
    wal = await search_live.wal_upkeep(store) if fills else {}
    for name, info in needles.items():
        found = raw.scalar(
            "SELECT count(*) || ':' || min(m.id) FROM sessions s "
            "JOIN messages m ON m.session_id = s.id WHERE s.key = ? AND m.text = ?",
            (info["session"], info["text"]),
        )
        count, message_id = str(found).split(":")
        assert count == "1", (name, found)
        info["message_id"] = int(message_id)
    total = count_messages(raw)
    sessions = int(raw.scalar("SELECT count(*) FROM sessions"))
    store_name = type(store).__name__
    shape = await search_live.index_shape(store)
    await store.close()

    rows_imported = sum(h["rows"] for h in halves)
    import_s = sum(h["import_messages_s"] for h in halves)
    parse_s = sum(h["parse_s"] for h in halves)
    reindex_rows = sum(r["rows"] for r in reindexes)
    reindex_s = sum(r["seconds"] for r in reindexes)
    caller = next(s for s in specs if s.agent == CALLER_AGENT and s.half == 0 and s.count > 0)
    meta = {
        "built_with": (
            f"{3 * writes} messages via {store_name}.add_message (one per transaction, timed at "
            f"three sizes); {rows_imported} via JSONL files -> bot.search_cmd.read_import_file -> "
            f"{store_name}.import_messages in {IMPORT_BATCH}-row calls (as `kept import`), then "
            "IndexReconciler.run_once (one session per transaction, as `kept import` and the "
            "bot's reconciler); no direct SQL writes"
        ),
        "backend": raw.name,
        "fill": args.fill,
        "index_shape": shape,
        "messages": total,
        "sessions": sessions,
        "sessions_requested": args.sessions,
        "seed": args.seed,
        "agents": {a: sum(s.agent == a for s in specs) for a, _ in AGENTS},
        "languages": {lang: sum(s.lang == lang for s in specs) for lang in LANGUAGES},
        "writes": stages,
        "import": {
            "halves": halves,
            "rows": rows_imported,
            "import_messages_rate_per_s": _rate(rows_imported, import_s),
            "parse_rate_per_s": _rate(rows_imported, parse_s),
            "parse_plus_import_rate_per_s": _rate(rows_imported, parse_s + import_s),
            "parse_import_reindex_rate_per_s": _rate(rows_imported, parse_s + import_s + reindex_s),
        },
        "reindex": {
            "halves": reindexes,
            "rows": reindex_rows,
            "rows_per_s": _rate(reindex_rows, reindex_s),
        },
        "build_seconds": round(time.perf_counter() - t_build, 1),
        "pinned_cpu": args.pinned_cpu,
        "needles": needles,
        "caller": {"session_key": caller.key, "platform": caller.platform,
                   "chat_id": caller.chat_id, "chat_kind": caller.chat_kind},
    }  # fmt: skip
    return search_live.live_meta(meta, fills, wal, store_name) if fills else meta


def _pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile of sorted values."""
    if not values:
        return float("nan")
    rank = max(1, math.ceil(p / 100 * len(values)))
    return values[rank - 1]


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
