"""Saved runs (`kept eval extraction --save FILE`) and two of them side by side.

A saved run keeps every case's labels, outcome and raw answer with the
figures, so a later comparison needs neither the model nor the case files.
Two runs are compared only over the same case ids: headline figures over
different sets would differ for reasons no model choice explains.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, ValidationError

from core.errors import KeptError
from core.evaluation.metrics import Metrics
from core.evaluation.scoring import CaseResult, Json

RUN_FORMAT = "kept-eval-run/1"


class SavedRun(Json):
    format: Literal["kept-eval-run/1"] = RUN_FORMAT
    model: str  # the extraction model the run asked for
    started_at: AwareDatetime
    finished_at: AwareDatetime
    cases_path: str
    results: list[CaseResult]
    metrics: Metrics


class RunFileError(KeptError, ValueError):
    """A file that is not a saved run, or two runs that cannot be compared; one line."""


def read_run(path: Path) -> SavedRun:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RunFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise RunFileError(f"{path} is not a saved run (not UTF-8 text)") from None
    try:
        document = json.loads(text)
    except ValueError:
        raise RunFileError(f"{path} is not a saved run (not JSON)") from None
    if not isinstance(document, dict) or document.get("format") != RUN_FORMAT:
        raise RunFileError(
            f'{path} is not a saved run (no "format": "{RUN_FORMAT}"; '
            "make one with `kept eval extraction --save FILE`)"
        )
    try:
        return SavedRun.model_validate(document, strict=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise RunFileError(f"{path} is not a usable saved run: {where}: {first['msg']}") from None


def run_document(run: SavedRun) -> str:
    return run.model_dump_json(by_alias=True, indent=2)


# --- side by side ------------------------------------------------------------------

Figure = Callable[[Metrics], float | int | None]

# The figures a choice of model turns on, in the order they are shown.
HEADLINE: tuple[tuple[str, Figure], ...] = (
    ("precision", lambda m: m.overall.precision),
    ("recall", lambda m: m.overall.recall),
    ("f1", lambda m: m.overall.f1),
    ("kindAccuracy", lambda m: m.kind_accuracy),
    ("sensitivityAccuracy", lambda m: m.sensitivity_accuracy),
    ("windowHitRate", lambda m: m.window_hit_rate),
    ("reminderFalsePositives", lambda m: m.reminders.false_positives),
    ("reminderCasesWithFalsePositive", lambda m: m.reminders.share_with_false_positive),
    ("resolvedAccuracy", lambda m: m.resolved_accuracy),
    ("invalidJsonRate", lambda m: m.invalid_json_rate),
    ("errors", lambda m: m.errors),
    ("tokensIn", lambda m: m.tokens.tokens_in),
    ("tokensOut", lambda m: m.tokens.tokens_out),
    ("costPer100", lambda m: m.tokens.cost_per_100),
)


class FigurePair(Json):
    name: str
    a: float | int | None
    b: float | int | None
    difference: float | int | None  # b - a; None when either is


class Comparison(Json):
    a_model: str
    b_model: str
    cases: int
    figures: list[FigurePair]
    # Right: an error score of 0 (every label met, nothing extra, no failure).
    only_a_right: list[str]
    only_b_right: list[str]


def compare(a: SavedRun, b: SavedRun) -> Comparison:
    """Raises RunFileError when the runs cover different cases."""
    ids_a = {r.id for r in a.results}
    ids_b = {r.id for r in b.results}
    if ids_a != ids_b:
        raise RunFileError(
            f"the runs cover different cases ({len(ids_a - ids_b)} only in A, "
            f"{len(ids_b - ids_a)} only in B); run both with the same --cases, --lang and --limit"
        )
    figures = []
    for name, figure in HEADLINE:
        x, y = figure(a.metrics), figure(b.metrics)
        figures.append(
            FigurePair(name=name, a=x, b=y, difference=None if x is None or y is None else y - x)
        )
    right_a = {r.id for r in a.results if r.error_score == 0}
    right_b = {r.id for r in b.results if r.error_score == 0}
    return Comparison(
        a_model=a.model,
        b_model=b.model,
        cases=len(ids_a),
        figures=figures,
        only_a_right=sorted(right_a - right_b),
        only_b_right=sorted(right_b - right_a),
    )
