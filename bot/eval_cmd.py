"""`kept eval extraction | compare A.json B.json | cases`: measuring extraction
against the labelled set (core/evaluation).

stdout carries the report (tables, or one JSON document with --json); the
progress bar and problems go to stderr, a problem as one `kept: ...` line
with exit 1. A run that reached the model exits 0 even if every call failed:
the report says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import click
from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from bot.context import config_option, fail, resolve_config_path
from bot.eval_report import comparison_report, composition, composition_table, run_report
from bot.store_access import load_or_fail
from core.clock import SystemClock
from core.evaluation.cases import (
    LANGUAGES,
    Case,
    CaseFileError,
    labelled_set,
    load_cases,
    select,
)
from core.evaluation.compare import RunFileError, SavedRun, compare, read_run, run_document
from core.evaluation.metrics import metrics
from core.evaluation.runner import (
    DEFAULT_CONCURRENCY,
    RunSettings,
    run_cases,
    with_extraction_model,
)
from core.evaluation.scoring import CaseResult
from core.llm import LLMClient
from core.logs import setup_logging


@click.group("eval")
def eval_group() -> None:
    """Measure follow-up extraction against the labelled set."""


def _echo_json(document: dict[str, Any]) -> None:
    click.echo(json.dumps(document, ensure_ascii=False, indent=2))


def _print(parts: Sequence[RenderableType]) -> None:
    # A terminal gets its own width; a pipe or file gets room for whole rows.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    for part in parts:
        console.print(part)


def _cases_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--cases",
        "cases_path",
        type=click.Path(path_type=Path),
        default=None,
        help="A .jsonl case file or a directory of them (default: the labelled set kept ships).",
    )(func)


def _load(cases_path: Path | None) -> tuple[Traversable, list[Case]]:
    path = cases_path if cases_path is not None else labelled_set()
    try:
        return path, load_cases(path)
    except CaseFileError as exc:
        fail(f"{exc}; give the labelled set with --cases PATH (a .jsonl file or a directory)")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read the labelled set at {path} ({exc}); check --cases PATH")


# --- extraction ---------------------------------------------------------------------


def _check_save_path(save: Path) -> None:
    """Before the run: a save that cannot work is said now, not after paying for it."""
    if save.is_dir():
        fail(f"--save: {save} is a directory; give a file name")
    if not save.parent.is_dir():
        fail(f"--save: the directory {save.parent} does not exist")


def _write_run(save: Path, text: str) -> None:
    """Write the saved run; if that fails, keep it in a temporary file and say where."""
    try:
        save.write_text(text, encoding="utf-8")
        return
    except OSError as exc:
        reason = exc.strerror or str(exc)
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", prefix="kept-eval-", suffix=".json", delete=False
    ) as spare:
        spare.write(text)
    fail(f"--save: cannot write {save} ({reason}); the run is kept in {spare.name}")


@contextmanager
def _progress_bar(total: int, show: bool) -> Iterator[Callable[[CaseResult], None] | None]:
    """A bar on stderr when stderr is a terminal; nothing otherwise."""
    if not show:
        yield None
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with bar:
        task = bar.add_task("extracting", total=total)
        yield lambda result: bar.advance(task)


@eval_group.command("extraction")
@config_option
@click.option("--model", default=None, help="Extraction model for this run (config unchanged).")
@click.option("--limit", type=int, default=None, help="At most N cases (after --lang).")
@click.option("--lang", default=None, help=f"Only one language: {', '.join(LANGUAGES)}.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@click.option("--save", type=click.Path(path_type=Path), default=None, help="Keep the run here.")
@click.option("--price-in", type=float, default=None, help="USD per 1M input tokens.")
@click.option("--price-out", type=float, default=None, help="USD per 1M output tokens.")
@click.option("--concurrency", type=int, default=DEFAULT_CONCURRENCY, show_default=True)
@_cases_option
def extraction_cmd(
    config_path: Path | None,
    model: str | None,
    limit: int | None,
    lang: str | None,
    as_json: bool,
    save: Path | None,
    price_in: float | None,
    price_out: float | None,
    concurrency: int,
    cases_path: Path | None,
) -> None:
    """Run the labelled set through the real extraction path and score it."""
    if lang is not None and lang not in LANGUAGES:
        fail(f"--lang: {lang!r} is not in the set; one of {', '.join(LANGUAGES)}")
    if (price_in is None) != (price_out is None):
        fail("give both --price-in and --price-out (USD per 1M tokens), or neither")
    if any(p is not None and p < 0 for p in (price_in, price_out)):
        fail("--price-in and --price-out are USD per 1M tokens, not negative")
    if limit is not None and limit < 1:
        fail("--limit: give at least 1")
    if concurrency < 1:
        fail("--concurrency: give at least 1")
    path, everything = _load(cases_path)
    cases = select(everything, lang=lang, limit=limit)
    if not cases:
        fail(f"--lang {lang}: no cases of that language in {path}")
    if save is not None:
        _check_save_path(save)
    setup_logging(logging.ERROR)
    config = with_extraction_model(load_or_fail(resolve_config_path(config_path)), model)
    settings = RunSettings.from_config(config, concurrency=concurrency)
    clock = SystemClock()
    started = clock.now()

    async def go() -> list[CaseResult]:
        llm = LLMClient(config.llm)
        try:
            with _progress_bar(len(cases), sys.stderr.isatty()) as progress:
                return await run_cases(llm, cases, settings, progress=progress)
        finally:
            await llm.aclose()

    try:
        results = asyncio.run(go())
    except KeyboardInterrupt:
        fail("interrupted; no report and nothing saved", code=130)
    figures = metrics(results, price_in=price_in, price_out=price_out)
    run = SavedRun(
        model=config.llm.model_for("extraction"),
        started_at=started,
        finished_at=clock.now(),
        cases_path=str(path),
        results=results,
        metrics=figures,
    )
    if as_json:
        _echo_json(
            {
                "model": run.model,
                "startedAt": run.started_at.isoformat(),
                "finishedAt": run.finished_at.isoformat(),
                "casesPath": run.cases_path,
                "composition": composition(cases),
                "metrics": figures.model_dump(mode="json", by_alias=True),
            }
        )
    else:
        _print(run_report(cases, figures, run.model))
    if figures.errors == figures.cases:
        click.echo(
            f"kept: the model failed on all {figures.cases} cases; check llm.baseUrl and the "
            "extraction model (`kept doctor --deep`)",
            err=True,
        )
    if save is not None:
        _write_run(save, run_document(run))


# --- compare ------------------------------------------------------------------------


@eval_group.command("compare")
@click.argument("first", metavar="A.json", type=click.Path(path_type=Path))
@click.argument("second", metavar="B.json", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
def compare_cmd(first: Path, second: Path, as_json: bool) -> None:
    """Two saved runs (`--save`) side by side over the same cases."""
    try:
        comparison = compare(read_run(first), read_run(second))
    except RunFileError as exc:
        fail(str(exc))
    if as_json:
        _echo_json(comparison.model_dump(mode="json", by_alias=True))
    else:
        _print(comparison_report(comparison))


# --- cases --------------------------------------------------------------------------


@eval_group.command("cases")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@_cases_option
def cases_cmd(as_json: bool, cases_path: Path | None) -> None:
    """The labelled set's composition: cases per language and tag."""
    path, cases = _load(cases_path)
    if as_json:
        _echo_json({"casesPath": str(path), "cases": len(cases), "languages": composition(cases)})
    else:
        _print([composition_table(cases)])
