"""The scoring rules on hand-built results: matching, 0/0 as None, windows,
the error score, a saved run read back, and two runs compared."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.commitments.model import Kind
from core.evaluation.cases import ExpectedFollowUp
from core.evaluation.compare import RunFileError, SavedRun, compare, read_run, run_document
from core.evaluation.metrics import metrics
from core.evaluation.scoring import CaseResult, StoredFollowUp, f1, match, ratio

T0 = datetime(2026, 3, 10, 12, tzinfo=UTC)


def hours(n: float) -> datetime:
    return T0 + timedelta(hours=n)


def expected(kind: Kind, *, latest: bool = True, sensitivity: str = "routine") -> ExpectedFollowUp:
    return ExpectedFollowUp.model_validate(
        {
            "kind": kind,
            "sensitivity": sensitivity,
            "earliest": [hours(0), hours(10)],
            "latest": [hours(10), hours(40)] if latest else None,
            "note": kind,
        }
    )


def stored(
    kind: Kind, start: float = 5, end: float = 20, sensitivity: str = "routine"
) -> StoredFollowUp:
    return StoredFollowUp.model_validate(
        {
            "kind": kind,
            "sensitivity": sensitivity,
            "due_earliest": hours(start),
            "due_latest": hours(end),
            "reason": "r",
            "dedupe_key": kind,
            "confidence": 0.9,
        }
    )


def result(case_id: str = "en-x", **fields: object) -> CaseResult:
    base: dict[str, object] = {
        "id": case_id,
        "lang": case_id[:2],
        "tags": ["positive"],
        "expected": [],
        "expected_resolved": [],
        "has_pending": False,
        "worth_calling": True,
        "raw_answer": "{}",
    }
    return CaseResult.model_validate(base | fields)


# --- matching ----------------------------------------------------------------------


def test_each_expected_takes_the_first_unpaired_of_its_kind_before_any_kind() -> None:
    e = [expected("deadline_check"), expected("event_check_in")]
    p = [stored("event_check_in"), stored("deadline_check")]
    # In order alone, (0, 0) and (1, 1) would be two kind mismatches.
    assert match(e, p) == [(0, 1), (1, 0)]


def test_an_expected_without_its_kind_takes_the_first_unpaired_of_any_kind() -> None:
    e = [expected("care_check_in"), expected("event_check_in")]
    p = [stored("open_loop"), stored("event_check_in"), stored("open_loop")]
    # event pairs by kind first; care then takes the first left, index 0.
    assert match(e, p) == [(0, 0), (1, 1)]
    r = result(expected=e, stored=p)
    assert (len(r.pairs), r.false_positives, r.false_negatives, r.kind_mismatches) == (2, 1, 0, 1)


def test_repeated_kinds_pair_in_file_order() -> None:
    e = [expected("event_check_in"), expected("event_check_in"), expected("open_loop")]
    p = [stored("event_check_in")]
    assert match(e, p) == [(0, 0)]
    assert result(expected=e, stored=p).false_negatives == 2


# --- ratios ------------------------------------------------------------------------


def test_zero_over_zero_is_none_never_zero_or_one() -> None:
    assert ratio(0, 0) is None
    assert ratio(0, 3) == 0.0
    assert f1(None, 1.0) is None
    assert f1(0.0, 0.0) is None  # 2·0·0 / (0 + 0)
    assert f1(1.0, 0.5) == pytest.approx(2 / 3)


def test_a_run_with_nothing_expected_or_stored_measures_nothing() -> None:
    m = metrics([result(tags=["small_talk"])])
    assert (m.overall.precision, m.overall.recall, m.overall.f1) == (None, None, None)
    assert (m.kind_accuracy, m.window_hit_rate, m.resolved_accuracy) == (None, None, None)
    assert m.reminders.share_with_false_positive is None  # no reminder cases
    assert (m.prefilter.recall_lost, m.prefilter.on_by_default) == (None, None)
    assert m.prefilter.tokens_saved is None  # no usage reported
    assert m.tokens.cost_per_100 is None  # no prices
    assert metrics([]).overall.recall is None


# --- windows and the error score ----------------------------------------------------


def test_window_ends_are_inclusive_and_latest_only_counts_when_labelled() -> None:
    inside = result(expected=[expected("open_loop")], stored=[stored("open_loop", 10, 40)])
    assert inside.window_misses == 0
    late = result(expected=[expected("open_loop")], stored=[stored("open_loop", 10, 41)])
    assert late.window_misses == 1
    early = result(expected=[expected("open_loop")], stored=[stored("open_loop", -1, 20)])
    assert early.window_misses == 1
    free = result(
        expected=[expected("open_loop", latest=False)], stored=[stored("open_loop", 3, 500)]
    )
    assert free.window_misses == 0


def test_error_score_adds_misses_extras_mismatches_resolution_and_failure() -> None:
    r = result(
        expected=[expected("event_check_in"), expected("care_check_in")],
        expected_resolved=["cm_1"],
        has_pending=True,
        # one kind mismatch with a window miss, one kind mismatch, one extra
        stored=[stored("deadline_check", 50, 60), stored("open_loop"), stored("open_loop")],
    )
    assert (r.false_negatives, r.false_positives, r.kind_mismatches, r.window_misses) == (
        0,
        1,
        2,
        1,
    )
    assert r.error_score == 0 + 1 + 2 + 1 + 1  # resolved nothing of cm_1
    failed = result(expected=[expected("open_loop")], raw_answer=None, error="timeout: late")
    assert failed.error_score == 1 + 2


def test_sensitivity_is_measured_but_not_in_the_error_score() -> None:
    r = result(
        expected=[expected("care_check_in", sensitivity="care")],
        stored=[stored("care_check_in", sensitivity="personal")],
    )
    assert (r.sensitivity_mismatches, r.error_score) == (1, 0)
    assert metrics([r]).sensitivity_accuracy == 0.0


# --- saved runs and comparisons --------------------------------------------------------


def saved(model: str, results: list[CaseResult]) -> SavedRun:
    return SavedRun(
        model=model,
        started_at=T0,
        finished_at=T0,
        cases_path="fixtures",
        results=results,
        metrics=metrics(results),
    )


def test_a_saved_run_reads_back_the_same(tmp_path: Path) -> None:
    run = saved("m", [result(expected=[expected("open_loop")], stored=[stored("open_loop")])])
    path = tmp_path / "a.json"
    path.write_text(run_document(run), encoding="utf-8")
    back = read_run(path)
    assert back == run
    assert json.loads(path.read_text())["format"] == "kept-eval-run/1"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("not json", "not JSON"),
        ('{"commitments": []}', 'no "format"'),
        ('{"format": "kept-eval-run/1", "model": "m"}', "not a usable saved run"),
    ],
)
def test_a_file_that_is_not_a_saved_run_is_refused(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RunFileError, match=says) as caught:
        read_run(path)
    assert "\n" not in str(caught.value)


def test_compare_lists_the_cases_only_one_run_gets_right() -> None:
    right = result("en-a", expected=[expected("open_loop")], stored=[stored("open_loop")])
    wrong = result("en-a", expected=[expected("open_loop")], stored=[])
    other = result("en-b", tags=["small_talk"])
    a, b = saved("small", [wrong, other]), saved("big", [right, other])
    c = compare(a, b)
    assert (c.only_a_right, c.only_b_right, c.cases) == ([], ["en-a"], 2)
    recall = next(f for f in c.figures if f.name == "recall")
    assert (recall.a, recall.b, recall.difference) == (0.0, 1.0, 1.0)
    precision = next(f for f in c.figures if f.name == "precision")
    assert (precision.a, precision.difference) == (None, None)


def test_compare_refuses_runs_over_different_cases() -> None:
    a = saved("a", [result("en-a"), result("en-b")])
    b = saved("b", [result("en-a"), result("en-c"), result("en-d")])
    with pytest.raises(RunFileError, match=r"1 only in A, 2 only in B"):
        compare(a, b)
