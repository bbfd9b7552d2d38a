"""`kept search`, `kept import` and `kept reindex`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal

import click
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from bot.context import config_option, fail, require_agent, resolve_config_path
from bot.output import print_table
from bot.store_access import load_or_fail, opened_backend
from core.clock import SystemClock
from core.messages import parse_session_key
from core.search.query import WORDS, build_query
from core.search.reconcile import IndexReconciler
from core.search.service import MAX_LIMIT, Caller, SessionSearch
from core.search.snippet import match_spans
from core.store.base import ImportRow, Store

IMPORT_BATCH = 5000


@click.command("search")
@config_option
@click.argument("query")
@click.option("--agent", "agent_id", default=None, help="Only this agent's sessions.")
@click.option("--session", "session_key", default=None, help="Only this session.")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=10, show_default=True)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON document on stdout; each hit also has `score` (the backend's own) "
    "and `matches` ([start, end] character offsets of the query's words in `snippet`).",
)
def search_command(
    config_path: Path | None,
    query: str,
    agent_id: str | None,
    session_key: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Search past conversations by exact words (admin: every chat).

    Hits come best first: messages holding the whole query as a phrase,
    then by the backend's rank (SQLite bm25, PostgreSQL ts_rank_cd), then
    the newest. `relevance` is 1.00 for the best hit of this search and
    lower for each weaker one, down to 1/k for the k-th distinct match
    strength; equal matches share a value. The query's words are
    highlighted in the snippets."""
    config = load_or_fail(resolve_config_path(config_path))
    require_agent(config, agent_id)
    if session_key is not None:
        try:
            parse_session_key(session_key)
        except ValueError as exc:
            fail(f"--session: {exc}")

    async def go() -> dict:
        async with opened_backend(config) as backend:
            store = backend.store
            service = SessionSearch(store, lambda: config)
            scope = service.scope_for(Caller(agent_id, None), session_key, "all")
            return (await service.search(query, scope, limit)).as_json()

    answer = asyncio.run(go())
    terms, prefixes = highlight_terms(query)
    for result in answer["results"]:
        result.pop("messageId", None)
        result["matches"] = [list(s) for s in match_spans(result["snippet"], terms, prefixes)]
    if as_json:
        click.echo(json.dumps(answer, ensure_ascii=False))
        return
    table = Table(show_lines=False)
    for column in ("session", "time", "role", "snippet", "relevance"):
        table.add_column(
            column, overflow="fold", justify="right" if column == "relevance" else "left"
        )
    for r in answer["results"]:
        snippet = highlighted(r["snippet"], r["matches"])
        table.add_row(r["sessionKey"], r["timestamp"], r["role"], snippet, f"{r['relevance']:.2f}")
    print_table(table if answer["results"] else Text("no results"))
    if answer["indexing"]:
        print_table(Text("the index is catching up: results may be incomplete", style="yellow"))
    if answer["truncated"]:
        print_table(
            Text(
                f"more matches exist than shown: narrow the query or raise --limit "
                f"(at most {MAX_LIMIT})",
                style="yellow",
            )
        )


MATCH_STYLE = "bold black on yellow"


def highlight_terms(query: str) -> tuple[tuple[str, ...], set[str]]:
    """The query's words as the snippets show them, and those typed as a
    prefix (`budg*`), as the index reads the query."""
    parsed = build_query(query)
    if parsed is None:
        return (), set()
    prefixes = {u.tokens[-1] for u in parsed.units if u.prefix and u.column == WORDS}
    return parsed.terms, prefixes


def highlighted(snippet: str, spans: Sequence[Sequence[int]]) -> Text:
    """The snippet with its matched words styled (markup-free: a snippet's
    own "[brackets]" stay text)."""
    text = Text(snippet)
    for start, end in spans:
        text.stylize(MATCH_STYLE, start, end)
    return text


class ImportLine(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session: str
    role: Literal["user", "assistant", "tool"]
    text: str
    ts: datetime

    @field_validator("session")
    @classmethod
    def _key(cls, v: str) -> str:
        parse_session_key(v)
        return v

    @field_validator("ts")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("timestamp needs a UTC offset, e.g. 2026-11-30T09:00:00Z")
        return v


def read_import_file(path: Path) -> tuple[list[ImportRow], list[str]]:
    """Every valid row, and one problem line per invalid row."""
    rows: list[ImportRow] = []
    problems: list[str] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                # The stdlib's JSON reads a lone surrogate escape ("\ud800", which
                # pydantic's parser refuses); ImportRow makes the text storable.
                item = ImportLine.model_validate(json.loads(line))
            except json.JSONDecodeError as exc:
                problems.append(
                    f"{path}:{number}: line: invalid JSON: {exc.msg} at column {exc.colno}"
                )
                continue
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "line"
                problems.append(f"{path}:{number}: {where}: {first['msg']}")
                continue
            rows.append(ImportRow(item.session, item.role, item.text, item.ts))
    return rows, problems


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), transient=False
    )


async def _reconcile_with_bar(store: Store, total: int) -> int:
    reconciler = IndexReconciler(store, SystemClock())
    with _progress() as bar:
        task = bar.add_task("indexing sessions", total=total)
        return await reconciler.run_once(lambda key, rows: bar.advance(task))


@click.command("import")
@config_option
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--no-index", is_flag=True, help="Leave indexing to the running bot.")
def import_command(config_path: Path | None, file: Path, no_index: bool) -> None:
    """Import transcripts (JSON lines: session, role, text, ts); indexed afterwards."""
    config = load_or_fail(resolve_config_path(config_path))
    rows, problems = read_import_file(file)
    if problems:
        for line in problems[:20]:
            click.echo(line, err=True)
        more = f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""
        fail(f"{len(problems)} invalid line(s){more}; nothing was imported. Fix them and retry.")

    async def go() -> None:
        async with opened_backend(config, create=True) as backend:
            store = backend.store
            with _progress() as bar:
                task = bar.add_task("importing messages", total=len(rows))
                for start in range(0, len(rows), IMPORT_BATCH):
                    chunk = rows[start : start + IMPORT_BATCH]
                    await store.import_messages(chunk)
                    bar.advance(task, len(chunk))
            if not no_index:
                sessions = len({r.session_key for r in rows})
                await _reconcile_with_bar(store, sessions)

    asyncio.run(go())
    click.echo(f"imported {len(rows)} messages from {file}")


@click.command("reindex")
@config_option
@click.option("--session", "session_key", default=None, help="Only this session.")
def reindex_command(config_path: Path | None, session_key: str | None) -> None:
    """Rebuild the full-text index (every session, or one)."""
    config = load_or_fail(resolve_config_path(config_path))

    async def go() -> int:
        async with opened_backend(config) as backend:
            store = backend.store
            if session_key is not None and await store.get_session(session_key) is None:
                fail(f"--session: no session {session_key!r}")
            total = await store.mark_index_behind(session_key)
            return await _reconcile_with_bar(store, total)

    done = asyncio.run(go())
    click.echo(f"reindexed {done} session(s)")
