"""`kept usage [--since 7d] [--by user|chat|agent|role|model] [--json]`:
what the model calls cost, from the record each call leaves
(`model_usage`): calls, tokens in and out, each group's share of all
tokens, how many calls had their tokens estimated (the endpoint reported
no usage), and the cost in USD where `llm.prices` prices every model of a
group. Read-only: it never creates a database.

stdout carries the answer (a table, or one JSON document with --json);
problems go to stderr as one `kept: ...` line, with a non-zero exit.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import click
from rich import box
from rich.table import Table

from bot.context import config_option, fail, resolve_config_path
from bot.output import print_table
from bot.store_access import load_or_fail, on_backend
from core.clock import iso_utc
from core.config.model import PriceConfig, parse_duration
from core.limits.spend import line_cost, total, unpriced
from core.limits.store import UsageGrouping, UsageLine

GROUPINGS: tuple[str, ...] = get_args(UsageGrouping)


def parse_since(typed: str, now: datetime) -> datetime:
    """`7d`, `24h`, `30m` back from now, or an ISO date or time (UTC unless
    it names its offset); one `kept: ...` line for anything else."""
    text = typed.strip()
    try:
        seconds = parse_duration(text)
    except ValueError:
        seconds = None
    if seconds is not None:
        if seconds <= 0:
            fail(f"--since {typed!r} is no span of time (use e.g. 7d, 24h, 30m)")
        return now - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        fail(f"--since {typed!r} is neither a duration (7d, 24h) nor an ISO date (2026-12-01)")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if moment > now:
        fail(f"--since {typed!r} is in the future")
    return moment


def _share(line: UsageLine, all_tokens: int) -> float:
    if not all_tokens:
        return 0.0
    return 100 * (line.tokens_in + line.tokens_out) / all_tokens


def _line_json(line: UsageLine, all_tokens: int, prices: dict[str, PriceConfig]) -> dict[str, Any]:
    cost = line_cost(line, prices)
    return {
        "key": line.key,
        "calls": line.calls,
        "tokensIn": line.tokens_in,
        "tokensOut": line.tokens_out,
        "sharePercent": round(_share(line, all_tokens), 2),
        "estimatedCalls": line.estimated_calls,
        "costUsd": None if cost is None else round(cost, 6),
        "models": [
            {"model": m, "tokensIn": tin, "tokensOut": tout} for m, tin, tout in line.by_model
        ],
    }


def _cost_cell(cost: float | None) -> str:
    return "-" if cost is None else f"{cost:.4f}"


@click.command("usage")
@click.option(
    "--since",
    default="7d",
    show_default=True,
    metavar="SPAN|DATE",
    help="How far back: a duration (7d, 24h, 30m) or an ISO date or time (UTC).",
)
@click.option(
    "--by",
    "by",
    default="user",
    show_default=True,
    metavar="|".join(GROUPINGS),
    help="What each line is.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def usage_command(since: str, by: str, as_json: bool, config_path: Path | None) -> None:
    """Model calls and their tokens (and cost, with llm.prices), grouped."""
    if by not in GROUPINGS:
        fail(f"--by {by!r} is none of {', '.join(GROUPINGS)}")
    now = datetime.now(UTC)
    start = parse_since(since, now)
    config = load_or_fail(resolve_config_path(config_path))
    prices = dict(config.llm.prices)

    lines: list[UsageLine] = on_backend(
        config,
        lambda backend: backend.usage.usage(start, by),  # type: ignore[arg-type]
    )
    whole = total(lines)
    all_tokens = whole.tokens_in + whole.tokens_out
    missing = unpriced(lines, prices)
    if as_json:
        document = {
            "since": iso_utc(start),
            "until": iso_utc(now),
            "by": by,
            "groups": [_line_json(x, all_tokens, prices) for x in lines],
            "total": _line_json(whole, all_tokens, prices),
            "unpricedModels": missing,
        }
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    if not lines:
        click.echo(f"No model calls since {iso_utc(start)}.")
        return
    table = Table(box=box.SIMPLE)
    table.add_column(by)
    for column in ("calls", "tokens in", "tokens out", "share", "estimated", "cost (USD)"):
        table.add_column(column, justify="right")
    for line in [*lines, whole]:
        if line is whole:
            table.add_section()
        table.add_row(
            line.key,
            f"{line.calls:,}",
            f"{line.tokens_in:,}",
            f"{line.tokens_out:,}",
            f"{_share(line, all_tokens):.1f} %",
            f"{line.estimated_calls:,}",
            _cost_cell(line_cost(line, prices)),
            style="bold" if line is whole else None,
        )
    print_table(table)
    click.echo(f"Since {iso_utc(start)} (UTC); share: of all tokens in and out.")
    if whole.estimated_calls:
        click.echo(
            "estimated: calls whose endpoint reported no usage (tokens counted from characters)."
        )
    if missing:
        click.echo(
            f"No price in llm.prices for: {', '.join(missing)} "
            "(the cost of a line using one is shown as -)."
        )
