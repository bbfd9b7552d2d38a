"""The run's figures from its CaseResults (core/evaluation/scoring.py scores
each case): precision, recall and F1 overall, per language and per kind, the
accuracies, reminder false positives, tokens and cost, the pre-filter's
savings and losses, and the worst cases.

Every ratio with a denominator of 0 is None (JSON null).
"""

from __future__ import annotations

from collections.abc import Sequence

from core.commitments.model import Kind
from core.evaluation.cases import ExpectedFollowUp, Language, Tag
from core.evaluation.scoring import CaseResult, Json, StoredFollowUp, f1, ratio, window_hit

RAW_ANSWER_CHARS = 400
WORST_CASES = 10
# The pre-filter is on by default only if it loses at most this share of
# labelled positives (issue 16).
PREFILTER_MAX_RECALL_LOST = 0.02


class Quality(Json):
    """Precision, recall and F1 over some of the pairs."""

    true_positives: int
    false_positives: int
    false_negatives: int
    precision: float | None
    recall: float | None
    f1: float | None


class LanguageQuality(Quality):
    cases: int


class KindQuality(Json):
    expected: int
    predicted: int
    # Pairs whose expected follow-up has this kind / expected of this kind.
    recall: float | None
    # Pairs whose stored follow-up has this kind / stored of this kind.
    precision: float | None


class Reminders(Json):
    cases: int  # tagged "reminder", mixed ones included
    false_positives: int  # stored follow-ups no label asked for
    share_with_false_positive: float | None


class Tokens(Json):
    tokens_in: int
    tokens_out: int
    usage_missing: int  # cases whose call reported no usage (or failed)
    price_in: float | None  # USD per 1M tokens
    price_out: float | None
    cost_per_100: float | None  # USD per 100 exchanges, with both prices


class Prefilter(Json):
    cases: int
    skipped: int
    calls_saved: float | None
    tokens_saved: float | None  # None without usage
    positives: int
    positives_skipped: int
    recall_lost: float | None
    skipped_positive_ids: list[str]
    recall_with_prefilter: float | None
    max_recall_lost: float = PREFILTER_MAX_RECALL_LOST
    on_by_default: bool | None  # None when the set has no positives to lose


class WorstCase(Json):
    id: str
    lang: Language
    tags: list[Tag]
    score: int
    expected: list[ExpectedFollowUp]
    expected_resolved: list[str]
    stored: list[StoredFollowUp]
    resolved: list[str]
    rejected: list[str]
    problem: str | None  # the error or why the answer was unusable
    raw_answer: str | None  # clipped


class Metrics(Json):
    cases: int
    calls: int  # one per case, failed ones included
    overall: Quality
    by_language: dict[str, LanguageQuality]
    by_kind: dict[str, KindQuality]
    kind_accuracy: float | None
    sensitivity_accuracy: float | None
    window_hit_rate: float | None
    reminders: Reminders
    resolved_cases: int  # cases with pending follow-ups
    resolved_accuracy: float | None
    unusable: int
    invalid_json_rate: float | None
    errors: int
    error_ids: list[str]
    tokens: Tokens
    prefilter: Prefilter
    worst: list[WorstCase]


def quality(results: Sequence[CaseResult]) -> Quality:
    tp = sum(len(r.pairs) for r in results)
    fp = sum(r.false_positives for r in results)
    fn = sum(r.false_negatives for r in results)
    precision, recall = ratio(tp, tp + fp), ratio(tp, tp + fn)
    return Quality(
        true_positives=tp,
        false_positives=fp,
        false_negatives=fn,
        precision=precision,
        recall=recall,
        f1=f1(precision, recall),
    )


def _by_kind(results: Sequence[CaseResult]) -> dict[str, KindQuality]:
    kinds: list[Kind] = ["event_check_in", "deadline_check", "care_check_in", "open_loop"]
    table: dict[str, KindQuality] = {}
    for kind in kinds:
        expected = sum(e.kind == kind for r in results for e in r.expected)
        predicted = sum(s.kind == kind for r in results for s in r.stored)
        by_e = sum(r.expected[e].kind == kind for r in results for e, _ in r.pairs)
        by_p = sum(r.stored[p].kind == kind for r in results for _, p in r.pairs)
        table[kind] = KindQuality(
            expected=expected,
            predicted=predicted,
            recall=ratio(by_e, expected),
            precision=ratio(by_p, predicted),
        )
    return table


def _tokens(
    results: Sequence[CaseResult], price_in: float | None, price_out: float | None
) -> Tokens:
    tokens_in = sum(r.tokens_in or 0 for r in results)
    tokens_out = sum(r.tokens_out or 0 for r in results)
    cost = None
    if price_in is not None and price_out is not None and results:
        cost = (tokens_in * price_in + tokens_out * price_out) / 1e6 * 100 / len(results)
    return Tokens(
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        usage_missing=sum(r.tokens_in is None for r in results),
        price_in=price_in,
        price_out=price_out,
        cost_per_100=cost,
    )


def _prefilter(results: Sequence[CaseResult]) -> Prefilter:
    skipped = [r for r in results if not r.worth_calling]
    all_tokens = sum((r.tokens_in or 0) + (r.tokens_out or 0) for r in results)
    skipped_tokens = sum((r.tokens_in or 0) + (r.tokens_out or 0) for r in skipped)
    positives = sum(r.positives for r in results)
    lost = sum(r.positives for r in skipped)
    recall_lost = ratio(lost, positives)
    tp = sum(len(r.pairs) for r in results)
    expected = sum(len(r.expected) for r in results)
    dropped = sum(len(r.pairs) for r in skipped)
    return Prefilter(
        cases=len(results),
        skipped=len(skipped),
        calls_saved=ratio(len(skipped), len(results)),
        tokens_saved=ratio(skipped_tokens, all_tokens),
        positives=positives,
        positives_skipped=lost,
        recall_lost=recall_lost,
        skipped_positive_ids=[r.id for r in skipped if r.positives],
        recall_with_prefilter=ratio(tp - dropped, expected),
        on_by_default=None if recall_lost is None else recall_lost <= PREFILTER_MAX_RECALL_LOST,
    )


def clip(text: str | None, limit: int = RAW_ANSWER_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def worst_cases(results: Sequence[CaseResult], count: int = WORST_CASES) -> list[WorstCase]:
    """The `count` highest error scores (cases with a score of 0 are never listed)."""
    wrong = sorted((r for r in results if r.error_score), key=lambda r: (-r.error_score, r.id))
    return [
        WorstCase(
            id=r.id,
            lang=r.lang,
            tags=r.tags,
            score=r.error_score,
            expected=r.expected,
            expected_resolved=r.expected_resolved,
            stored=r.stored,
            resolved=r.resolved,
            rejected=r.rejected,
            problem=r.error or r.unusable,
            raw_answer=clip(r.raw_answer),
        )
        for r in wrong[:count]
    ]


def metrics(
    results: Sequence[CaseResult], *, price_in: float | None = None, price_out: float | None = None
) -> Metrics:
    pairs = [(r.expected[e], r.stored[p]) for r in results for e, p in r.pairs]
    reminder_cases = [r for r in results if "reminder" in r.tags]
    pending_cases = [r for r in results if r.has_pending]
    unusable = sum(r.unusable is not None for r in results)
    languages = sorted({r.lang for r in results})
    return Metrics(
        cases=len(results),
        calls=len(results),
        overall=quality(results),
        by_language={
            lang: LanguageQuality(cases=len(mine), **quality(mine).model_dump(by_alias=False))
            for lang in languages
            for mine in [[r for r in results if r.lang == lang]]
        },
        by_kind=_by_kind(results),
        kind_accuracy=ratio(sum(e.kind == s.kind for e, s in pairs), len(pairs)),
        sensitivity_accuracy=ratio(
            sum(e.sensitivity == s.sensitivity for e, s in pairs), len(pairs)
        ),
        window_hit_rate=ratio(sum(window_hit(e, s) for e, s in pairs), len(pairs)),
        reminders=Reminders(
            cases=len(reminder_cases),
            false_positives=sum(r.false_positives for r in reminder_cases),
            share_with_false_positive=ratio(
                sum(r.false_positives > 0 for r in reminder_cases), len(reminder_cases)
            ),
        ),
        resolved_cases=len(pending_cases),
        resolved_accuracy=ratio(sum(r.resolved_right for r in pending_cases), len(pending_cases)),
        unusable=unusable,
        invalid_json_rate=ratio(unusable, len(results)),
        errors=sum(r.error is not None for r in results),
        error_ids=[r.id for r in results if r.error is not None],
        tokens=_tokens(results, price_in, price_out),
        prefilter=_prefilter(results),
        worst=worst_cases(results),
    )
