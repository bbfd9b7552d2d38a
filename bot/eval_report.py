"""The text rendering of `kept eval`: composition, figures, pre-filter, worst cases,
and two runs side by side. The figures themselves come from core/evaluation."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import get_args

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from core.evaluation.cases import LANGUAGES, Case, Tag
from core.evaluation.compare import Comparison
from core.evaluation.metrics import Metrics, Prefilter
from core.evaluation.scoring import StoredFollowUp

TAGS: tuple[Tag, ...] = get_args(Tag)
NOT_MEASURED = "n/a"  # a ratio whose denominator was 0


def fraction(value: float | int | None) -> str:
    if value is None:
        return NOT_MEASURED
    return str(value) if isinstance(value, int) else f"{value:.3f}"


def percent(value: float | None) -> str:
    return NOT_MEASURED if value is None else f"{value * 100:.1f} %"


def signed(value: float | int | None) -> str:
    if value is None:
        return NOT_MEASURED
    return f"{value:+d}" if isinstance(value, int) else f"{value:+.3f}"


# --- the set ---------------------------------------------------------------------


def composition(cases: Sequence[Case]) -> dict[str, dict[str, int]]:
    """Cases per language, and per language × tag ("cases" is the language's total)."""
    table: dict[str, dict[str, int]] = {}
    for lang in LANGUAGES:
        mine = [c for c in cases if c.lang == lang]
        if mine:
            tags = Counter(t for c in mine for t in c.tags)
            table[lang] = {"cases": len(mine), **{t: tags[t] for t in TAGS}}
    return table


def composition_line(cases: Sequence[Case]) -> str:
    per = Counter(c.lang for c in cases)
    parts = ", ".join(f"{lang} {per[lang]}" for lang in LANGUAGES if per[lang])
    return f"{len(cases)} case{'s' if len(cases) != 1 else ''}: {parts}"


def composition_table(cases: Sequence[Case]) -> Table:
    table = Table(title=composition_line(cases), box=box.SIMPLE_HEAD)
    table.add_column("lang")
    table.add_column("cases", justify="right")
    for tag in TAGS:
        table.add_column(tag, justify="right")
    rows = composition(cases)
    for lang, counts in rows.items():
        table.add_row(lang, *(str(counts[c]) for c in ("cases", *TAGS)))
    totals = Counter(t for c in cases for t in c.tags)
    table.add_row("all", str(len(cases)), *(str(totals[t]) for t in TAGS), style="bold")
    return table


# --- one run ---------------------------------------------------------------------


def headline_table(m: Metrics) -> Table:
    table = Table(title="extraction quality", box=box.SIMPLE_HEAD, show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("over")
    o = m.overall
    rows = [
        ("precision", fraction(o.precision), f"{o.true_positives} TP, {o.false_positives} FP"),
        ("recall", fraction(o.recall), f"{o.false_negatives} FN"),
        ("F1", fraction(o.f1), ""),
        ("kind accuracy", fraction(m.kind_accuracy), "matched pairs"),
        ("sensitivity accuracy", fraction(m.sensitivity_accuracy), "matched pairs"),
        ("due-window hit rate", fraction(m.window_hit_rate), "matched pairs"),
        (
            "reminder false positives",
            str(m.reminders.false_positives),
            f"{_cases(m.reminders.cases)} tagged reminder, "
            f"{percent(m.reminders.share_with_false_positive)} with one",
        ),
        ("resolved-id accuracy", fraction(m.resolved_accuracy), _cases(m.resolved_cases)),
        ("invalid-JSON rate", fraction(m.invalid_json_rate), f"{m.unusable} of {m.calls} calls"),
        ("model errors", str(m.errors), ", ".join(m.error_ids[:5])),
        ("tokens in / out", f"{m.tokens.tokens_in} / {m.tokens.tokens_out}", _usage_note(m)),
        ("cost per 100 exchanges", _cost(m), _price_note(m)),
    ]
    for row in rows:
        table.add_row(*row)
    return table


def _cases(n: int) -> str:
    return f"{n} case{'s' if n != 1 else ''}"


def _usage_note(m: Metrics) -> str:
    missing = m.tokens.usage_missing
    return f"{missing} call{'s' if missing != 1 else ''} reported no usage" if missing else ""


def _cost(m: Metrics) -> str:
    cost = m.tokens.cost_per_100
    return NOT_MEASURED if cost is None else f"${cost:.4f}"


def _price_note(m: Metrics) -> str:
    if m.tokens.price_in is None or m.tokens.price_out is None:
        return "give --price-in and --price-out (USD per 1M tokens)"
    return f"at ${m.tokens.price_in:g} in, ${m.tokens.price_out:g} out per 1M tokens"


def language_table(m: Metrics) -> Table:
    table = Table(title="per language", box=box.SIMPLE_HEAD)
    for name in ("lang", "cases", "TP", "FP", "FN", "precision", "recall", "F1"):
        table.add_column(name, justify="left" if name == "lang" else "right")
    for lang, q in m.by_language.items():
        table.add_row(
            lang,
            str(q.cases),
            str(q.true_positives),
            str(q.false_positives),
            str(q.false_negatives),
            fraction(q.precision),
            fraction(q.recall),
            fraction(q.f1),
        )
    return table


def kind_table(m: Metrics) -> Table:
    table = Table(
        title="per kind",
        caption="recall by the expected kind, precision by the stored kind",
        box=box.SIMPLE_HEAD,
    )
    for name in ("kind", "expected", "stored", "recall", "precision"):
        table.add_column(name, justify="left" if name == "kind" else "right")
    for kind, q in m.by_kind.items():
        table.add_row(
            kind, str(q.expected), str(q.predicted), fraction(q.recall), fraction(q.precision)
        )
    return table


def prefilter_block(p: Prefilter) -> Table:
    table = Table(title="pre-filter (core/commitments/prefilter.py)", box=box.SIMPLE_HEAD)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("over")
    skipped = ", ".join(p.skipped_positive_ids[:10]) + (
        " …" if len(p.skipped_positive_ids) > 10 else ""
    )
    table.add_row("calls saved", percent(p.calls_saved), f"{p.skipped} of {p.cases} cases skipped")
    table.add_row("tokens saved", percent(p.tokens_saved), "of this run's tokens")
    table.add_row(
        "recall lost",
        percent(p.recall_lost),
        f"{p.positives_skipped} of {p.positives} labelled positives"
        + (f": {skipped}" if skipped else ""),
    )
    table.add_row("recall with the pre-filter", fraction(p.recall_with_prefilter), "this run")
    if p.on_by_default is None:
        verdict = "no labelled positives to judge by"
    else:
        verdict = "on" if p.on_by_default else "off"
    table.add_row("on by default", verdict, f"only if recall lost ≤ {p.max_recall_lost * 100:g} %")
    return table


def _stored(s: StoredFollowUp) -> str:
    return (
        f"{s.kind}/{s.sensitivity} {s.due_earliest.isoformat()} → {s.due_latest.isoformat()} "
        f"({s.reason})"
    )


def worst_block(m: Metrics) -> RenderableType:
    if not m.worst:
        return Text("worst cases: none (every case right)")
    lines: list[RenderableType] = [Text(f"the {len(m.worst)} worst cases", style="bold")]
    for w in m.worst:
        lines.append(Text(f"{w.id} ({w.lang}; {', '.join(w.tags)}) score {w.score}", style="bold"))
        for e in w.expected:
            window = f"{e.earliest.lo.isoformat()} .. {e.earliest.hi.isoformat()}"
            lines.append(
                Text(f"  expected: {e.kind}/{e.sensitivity} earliest in {window} ({e.note})")
            )
        if w.expected_resolved:
            lines.append(Text(f"  expected resolved: {', '.join(w.expected_resolved)}"))
        if not w.expected and not w.expected_resolved:
            lines.append(Text("  expected: nothing"))
        for s in w.stored:
            lines.append(Text(f"  stored: {_stored(s)}"))
        if not w.stored:
            lines.append(Text("  stored: nothing"))
        for why in w.rejected:
            lines.append(Text(f"  refused by the rules: {why}"))
        if w.resolved:
            lines.append(Text(f"  resolved: {', '.join(w.resolved)}"))
        if w.problem:
            lines.append(Text(f"  problem: {w.problem}"))
        lines.append(Text(f"  answer: {' '.join((w.raw_answer or '-').split())}"))
    return Group(*lines)


def run_report(cases: Sequence[Case], m: Metrics, model: str) -> list[RenderableType]:
    failed = m.errors == m.cases and m.cases > 0
    head = f"model {model}; {composition_line(cases)}"
    parts: list[RenderableType] = [Text(head)]
    if failed:
        parts.append(Text(f"the model failed on every case ({m.errors} errors)", style="bold"))
    parts += [headline_table(m), language_table(m), kind_table(m), prefilter_block(m.prefilter)]
    parts.append(worst_block(m))
    return parts


# --- two runs ----------------------------------------------------------------------


def comparison_report(c: Comparison) -> list[RenderableType]:
    table = Table(title=f"A: {c.a_model}  B: {c.b_model}  ({c.cases} cases)", box=box.SIMPLE_HEAD)
    for name in ("figure", "A", "B", "B − A"):
        table.add_column(name, justify="left" if name == "figure" else "right")
    for f in c.figures:
        table.add_row(_words(f.name), fraction(f.a), fraction(f.b), signed(f.difference))
    only_a = ", ".join(c.only_a_right) or "none"
    only_b = ", ".join(c.only_b_right) or "none"
    return [
        table,
        Text(f"right only in A ({len(c.only_a_right)}): {only_a}"),
        Text(f"right only in B ({len(c.only_b_right)}): {only_b}"),
    ]


def _words(key: str) -> str:
    """A figure's JSON key as words: "windowHitRate" → "window hit rate"."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[a-z]{2})(?=\d)", " ", key).lower()
