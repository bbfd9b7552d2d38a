"""The evaluator end to end: the fixture set (tests/core/evaluation/fixtures,
10 cases in en/fr/de) through the real extraction call and LLMClient against
FakeOpenAI over loopback, with scripted answers, and every figure worked
out by hand in the comments.

The set: 8 expected follow-ups (en-interview, en-mixed, en-bike,
fr-deadline, fr-care, fr-two ×2, de-group) and 1 expected resolved id
(en-resolves), so 9 labelled positives. The pre-filter skips en-small-talk
and en-bike (no cue in either message), which holds 1 positive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from core.config.model import LlmConfig
from core.evaluation.cases import Case, load_cases
from core.evaluation.metrics import Metrics, metrics
from core.evaluation.runner import RunSettings, run_cases
from core.evaluation.scoring import CaseResult
from core.llm import LLMClient
from tests.fakes.openai_server import Behaviour, FakeOpenAI, error
from tests.support.eval_scripts import (
    EMPTY,
    answer,
    candidate,
    completion,
    midpoint,
    perfect,
    perfect_candidates,
    responder,
)

FIXTURES = Path(__file__).parent / "fixtures"
NEW_YORK = ZoneInfo("America/New_York")
PARIS = ZoneInfo("Europe/Paris")
SETTINGS = RunSettings(heartbeat_seconds=1800, call_deadline=10, concurrency=3)
PRICE_IN, PRICE_OUT = 0.4, 1.6  # USD per 1M tokens


@pytest.fixture
def cases() -> list[Case]:
    return load_cases(FIXTURES)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


async def run(
    fake: FakeOpenAI, cases: list[Case], script: Mapping[str, Behaviour | str]
) -> tuple[list[CaseResult], Metrics]:
    fake.set_default(responder(cases, script))
    llm = LLMClient(LlmConfig(base_url=fake.base_url, max_retries=0), environ={})
    try:
        done: list[str] = []
        results = await run_cases(llm, cases, SETTINGS, progress=lambda r: done.append(r.id))
    finally:
        await llm.aclose()
    assert sorted(done) == sorted(c.id for c in cases)  # one progress call per case
    assert len(fake.completions) == len(cases)
    return results, metrics(results, price_in=PRICE_IN, price_out=PRICE_OUT)


def by_id(cases: list[Case]) -> dict[str, Case]:
    return {c.id: c for c in cases}


async def test_perfect_run(fake: FakeOpenAI, cases: list[Case]) -> None:
    results, m = await run(fake, cases, {})
    assert [r.id for r in results] == [c.id for c in cases]  # the cases' order
    o = m.overall
    assert (o.true_positives, o.false_positives, o.false_negatives) == (8, 0, 0)
    assert (o.precision, o.recall, o.f1) == (1.0, 1.0, 1.0)
    assert (m.kind_accuracy, m.sensitivity_accuracy, m.window_hit_rate) == (1.0, 1.0, 1.0)
    # en-mixed and de-reminder: nothing stored beyond the labels.
    assert (m.reminders.cases, m.reminders.false_positives) == (2, 0)
    assert m.reminders.share_with_false_positive == 0.0
    assert (m.resolved_cases, m.resolved_accuracy) == (1, 1.0)
    assert (m.unusable, m.invalid_json_rate, m.errors) == (0, 0.0, 0)
    # 10 calls × (1000 in, 100 out); (10000·0.4 + 1000·1.6) / 1e6 · 100 / 10
    assert (m.tokens.tokens_in, m.tokens.tokens_out, m.tokens.usage_missing) == (10000, 1000, 0)
    assert m.tokens.cost_per_100 == pytest.approx(0.056, abs=1e-15)
    p = m.prefilter
    assert (p.cases, p.skipped, p.calls_saved) == (10, 2, 0.2)
    assert p.tokens_saved == 2200 / 11000
    assert (p.positives, p.positives_skipped, p.recall_lost) == (9, 1, 1 / 9)
    assert p.skipped_positive_ids == ["en-bike"]
    assert p.recall_with_prefilter == 7 / 8
    assert p.on_by_default is False  # 11.1 % lost > 2 %
    assert m.worst == []
    assert {k: (q.expected, q.predicted, q.recall, q.precision) for k, q in m.by_kind.items()} == {
        "event_check_in": (4, 4, 1.0, 1.0),
        "deadline_check": (2, 2, 1.0, 1.0),
        "care_check_in": (1, 1, 1.0, 1.0),
        "open_loop": (1, 1, 1.0, 1.0),
    }


async def test_empty_run(fake: FakeOpenAI, cases: list[Case]) -> None:
    _, m = await run(fake, cases, {c.id: EMPTY for c in cases})
    o = m.overall
    assert (o.true_positives, o.false_positives, o.false_negatives) == (0, 0, 8)
    # 0/0 is not measured: None, never 0 or 1.
    assert (o.precision, o.recall, o.f1) == (None, 0.0, None)
    assert (m.kind_accuracy, m.sensitivity_accuracy, m.window_hit_rate) == (None, None, None)
    assert m.reminders.share_with_false_positive == 0.0
    assert m.resolved_accuracy == 0.0  # en-resolves closed nothing
    assert m.invalid_json_rate == 0.0
    assert m.prefilter.recall_with_prefilter == 0.0
    assert m.by_language["de"].precision is None
    assert m.by_kind["care_check_in"].precision is None  # nothing stored of that kind
    assert m.by_kind["care_check_in"].recall == 0.0
    # fr-two misses 2; every other labelled case 1; ties by id.
    assert [(w.id, w.score) for w in m.worst] == [
        ("fr-two", 2),
        ("de-group", 1),
        ("en-bike", 1),
        ("en-interview", 1),
        ("en-mixed", 1),
        ("en-resolves", 1),
        ("fr-care", 1),
        ("fr-deadline", 1),
    ]


def noisy_script(cases: list[Case]) -> dict[str, Behaviour | str]:
    c = by_id(cases)
    interview = c["en-interview"].expect.candidates[0]
    care = c["fr-care"].expect.candidates[0]
    return {
        # kind wrong, window right: a pair, one kind mismatch
        "en-interview": answer(
            [
                candidate(
                    "deadline_check",
                    midpoint(interview.earliest),
                    midpoint(interview.latest) if interview.latest else None,
                    key="followup:0",
                )
            ]
        ),
        # a spurious follow-up on small talk
        "en-small-talk": answer(
            [candidate("open_loop", datetime(2026, 3, 10, 12, tzinfo=NEW_YORK), key="coffee")]
        ),
        # the pending interview not closed
        "en-resolves": EMPTY,
        # the follow-up, and the 3 pm call leaked twice: once in the reminder's own
        # words (the rules give it to the reminder), once in words of its own (stored)
        "en-mixed": answer(
            [
                *perfect_candidates(c["en-mixed"]),
                candidate(
                    "open_loop",
                    datetime(2026, 3, 9, 15, 30, tzinfo=NEW_YORK),
                    key="dentist-call",
                    reason="user will call the dentist at 3 pm",
                ),
                candidate(
                    "open_loop",
                    datetime(2026, 3, 9, 15, 30, tzinfo=NEW_YORK),
                    key="afternoon",
                    reason="check back this afternoon",
                ),
            ]
        ),
        # right, but the server reports no usage
        "en-bike": completion(perfect(c["en-bike"]), usage=None),
        # earliest a day after the acceptable range ends
        "fr-deadline": answer(
            [candidate("deadline_check", datetime(2026, 3, 14, 12, tzinfo=PARIS), key="rapport")]
        ),
        # sensitivity wrong (not part of the error score)
        "fr-care": answer(
            [
                candidate(
                    "care_check_in",
                    midpoint(care.earliest),
                    midpoint(care.latest) if care.latest else None,
                    sensitivity="personal",
                    key="sommeil",
                )
            ]
        ),
        # the deadline missed
        "fr-two": answer(perfect_candidates(c["fr-two"])[:1]),
        # a personal follow-up in a group: the rules refuse it, not counted
        "de-group": answer(
            [
                *perfect_candidates(c["de-group"]),
                candidate(
                    "event_check_in",
                    datetime(2026, 3, 10, 20, tzinfo=PARIS),
                    sensitivity="personal",
                    key="dinner",
                ),
            ]
        ),
        "de-reminder": EMPTY,
    }


async def test_noisy_run(fake: FakeOpenAI, cases: list[Case]) -> None:
    results, m = await run(fake, cases, noisy_script(cases))
    stored = {r.id: len(r.stored) for r in results}
    assert stored == {
        "en-interview": 1,
        "en-small-talk": 1,
        "en-resolves": 0,
        "en-mixed": 2,
        "en-bike": 1,
        "fr-deadline": 1,
        "fr-care": 1,
        "fr-two": 1,
        "de-group": 1,
        "de-reminder": 0,
    }
    group = next(r for r in results if r.id == "de-group")
    assert [why.split(":")[0] for why in group.rejected] == ["dinner"]  # the group rule
    mixed = next(r for r in results if r.id == "en-mixed")
    assert [why.split(":")[0] for why in mixed.rejected] == ["dentist-call"]
    # 9 stored, 7 pairs; FP: the small talk, the call leaked in its own words; FN: fr-two's deadline
    o = m.overall
    assert (o.true_positives, o.false_positives, o.false_negatives) == (7, 2, 1)
    assert (o.precision, o.recall) == (7 / 9, 7 / 8)
    assert o.f1 == pytest.approx(14 / 17, rel=1e-12)
    assert m.kind_accuracy == 6 / 7  # en-interview
    assert m.sensitivity_accuracy == 6 / 7  # fr-care
    assert m.window_hit_rate == 6 / 7  # fr-deadline
    assert (m.reminders.cases, m.reminders.false_positives) == (2, 1)
    assert m.reminders.share_with_false_positive == 0.5
    assert m.resolved_accuracy == 0.0
    # 9 calls reported 1000/100, en-bike none; (9000·0.4 + 900·1.6) / 1e6 · 100 / 10
    assert (m.tokens.tokens_in, m.tokens.tokens_out, m.tokens.usage_missing) == (9000, 900, 1)
    assert m.tokens.cost_per_100 == pytest.approx(0.0504, abs=1e-15)
    # skipped: en-small-talk (1100 tokens) and en-bike (none reported)
    assert m.prefilter.tokens_saved == 1100 / 9900
    assert m.prefilter.recall_with_prefilter == 6 / 8  # en-bike's pair dropped
    lang = {
        k: (q.cases, q.true_positives, q.false_positives, q.false_negatives)
        for k, q in m.by_language.items()
    }
    assert lang == {"de": (2, 1, 0, 0), "en": (5, 3, 2, 0), "fr": (3, 3, 0, 1)}
    assert (m.by_language["en"].precision, m.by_language["en"].recall) == (3 / 5, 1.0)
    assert m.by_language["en"].f1 == pytest.approx(0.75, rel=1e-12)
    assert m.by_language["fr"].f1 == pytest.approx(6 / 7, rel=1e-12)
    kinds = {k: (q.expected, q.predicted, q.recall, q.precision) for k, q in m.by_kind.items()}
    assert kinds == {
        "event_check_in": (4, 3, 1.0, 1.0),
        "deadline_check": (2, 2, 0.5, 1.0),
        "care_check_in": (1, 1, 1.0, 1.0),
        "open_loop": (1, 3, 1.0, 1 / 3),
    }
    assert [(w.id, w.score) for w in m.worst] == [
        ("en-interview", 1),
        ("en-mixed", 1),
        ("en-resolves", 1),
        ("en-small-talk", 1),
        ("fr-deadline", 1),
        ("fr-two", 1),
    ]
    worst = m.worst[0]
    assert worst.raw_answer is not None and '"deadline_check"' in worst.raw_answer
    assert [s.kind for s in worst.stored] == ["deadline_check"]


async def test_invalid_json_and_model_errors(fake: FakeOpenAI, cases: list[Case]) -> None:
    script: dict[str, Behaviour | str] = {
        "en-interview": "Sure! There is an interview tomorrow, check in after it.",
        "de-group": '{"candidates": [{"kind": "party"}], "resolved": []}',
        "en-bike": error(400),
    }
    results, m = await run(fake, cases, script)
    o = m.overall
    # en-interview, de-group unusable, en-bike failed: their follow-ups are missed
    assert (o.true_positives, o.false_positives, o.false_negatives) == (5, 0, 3)
    assert (o.precision, o.recall) == (1.0, 5 / 8)
    assert o.f1 == pytest.approx(10 / 13, rel=1e-12)
    assert (m.unusable, m.calls, m.invalid_json_rate) == (2, 10, 0.2)
    assert (m.errors, m.error_ids) == (1, ["en-bike"])
    bike = next(r for r in results if r.id == "en-bike")
    assert bike.error is not None and bike.error.startswith("bad_request:")
    assert (m.tokens.tokens_in, m.tokens.usage_missing) == (9000, 1)
    assert m.by_language["de"].precision is None  # nothing stored in German
    assert m.by_language["de"].recall == 0.0
    assert m.by_language["en"].recall == 1 / 3
    assert [(w.id, w.score, w.problem is not None) for w in m.worst] == [
        ("de-group", 3, True),
        ("en-bike", 3, True),
        ("en-interview", 3, True),
    ]
    assert m.worst[2].raw_answer == script["en-interview"]
