"""Scoring one extraction run against the labelled set: pure functions, no I/O.

A case's outcome (what the rules stored, what it resolved, the raw answer)
becomes a `CaseResult`, which is what a saved run keeps; `metrics.metrics()` reads
only CaseResults, so a saved run can be scored again without the cases.

Matching inside a case: each expected follow-up, in file order, takes the
first unpaired stored one of the same kind; those still unpaired then take
the first unpaired stored one of any kind. Pairs are true positives, stored
ones left over false positives, expected ones left over false negatives.
A ratio whose denominator is 0 is None (JSON null): "not measured" is
neither 0 nor 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import AwareDatetime, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from core.commitments.extraction_call import ExtractionOutcome
from core.commitments.model import Kind, Sensitivity
from core.evaluation.cases import Case, ExpectedFollowUp, Language, Tag


class Json(BaseModel):
    """camelCase keys in JSON, as kept's other documents."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class StoredFollowUp(Json):
    """One accepted candidate as the rules would have stored it."""

    kind: Kind
    sensitivity: Sensitivity
    due_earliest: AwareDatetime
    due_latest: AwareDatetime
    reason: str
    dedupe_key: str
    confidence: float


class CaseResult(Json):
    """One case's labels and outcome: everything a saved run needs to be scored again."""

    id: str
    lang: Language
    tags: list[Tag]
    expected: list[ExpectedFollowUp]
    expected_resolved: list[str]
    has_pending: bool
    # Whether the pre-filter would have let this case reach the model.
    worth_calling: bool
    stored: list[StoredFollowUp] = []
    resolved: list[str] = []
    # What the rules refused, "key: why", to tell a model's miss from a rule's.
    rejected: list[str] = []
    raw_answer: str | None = None  # the model's text; None when the call failed
    unusable: str | None = None  # why the answer could not be used
    error: str | None = None  # the model call failed (LLMError, timeout)
    tokens_in: int | None = None
    tokens_out: int | None = None

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return match(self.expected, self.stored)

    @property
    def false_positives(self) -> int:
        return len(self.stored) - len(self.pairs)

    @property
    def false_negatives(self) -> int:
        return len(self.expected) - len(self.pairs)

    @property
    def kind_mismatches(self) -> int:
        return sum(self.expected[e].kind != self.stored[p].kind for e, p in self.pairs)

    @property
    def sensitivity_mismatches(self) -> int:
        return sum(
            self.expected[e].sensitivity != self.stored[p].sensitivity for e, p in self.pairs
        )

    @property
    def window_misses(self) -> int:
        return sum(not window_hit(self.expected[e], self.stored[p]) for e, p in self.pairs)

    @property
    def resolved_right(self) -> bool:
        return set(self.resolved) == set(self.expected_resolved)

    @property
    def error_score(self) -> int:
        """How wrong the case went; 0 is right in every measured way."""
        return (
            self.false_negatives
            + self.false_positives
            + self.kind_mismatches
            + self.window_misses
            + (0 if self.resolved_right else 1)
            + (2 if self.unusable is not None or self.error is not None else 0)
        )

    @property
    def positives(self) -> int:
        """Labelled positives: each expected follow-up and each expected resolved id."""
        return len(self.expected) + len(self.expected_resolved)


def match(
    expected: Sequence[ExpectedFollowUp], stored: Sequence[StoredFollowUp]
) -> list[tuple[int, int]]:
    """(expected index, stored index) pairs, kind first, then any kind; by expected index."""
    pairs: dict[int, int] = {}
    taken: set[int] = set()
    for same_kind in (True, False):
        for e, want in enumerate(expected):
            if e in pairs:
                continue
            for p, got in enumerate(stored):
                if p not in taken and (not same_kind or got.kind == want.kind):
                    pairs[e] = p
                    taken.add(p)
                    break
    return sorted(pairs.items())


def window_hit(expected: ExpectedFollowUp, stored: StoredFollowUp) -> bool:
    if stored.due_earliest not in expected.earliest:
        return False
    return expected.latest is None or stored.due_latest in expected.latest


def ratio(part: float, whole: float) -> float | None:
    return None if whole == 0 else part / whole


def f1(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None:
        return None
    return ratio(2 * precision * recall, precision + recall)


# --- one case -------------------------------------------------------------------


def score_case(
    case: Case, outcome: ExtractionOutcome | BaseException, prefilter: Callable[[Case], bool]
) -> CaseResult:
    """The case's result; a failed call (`outcome` an exception) stored nothing."""
    base = CaseResult(
        id=case.id,
        lang=case.lang,
        tags=list(case.tags),
        expected=list(case.expect.candidates),
        expected_resolved=list(case.expect.resolved),
        has_pending=bool(case.pending),
        worth_calling=prefilter(case),
    )
    if isinstance(outcome, BaseException):
        why = str(outcome) or type(outcome).__name__
        kind = getattr(outcome, "kind", None) or type(outcome).__name__
        return base.model_copy(update={"error": f"{kind}: {why}"})
    usage = outcome.completion.usage
    stored = [
        StoredFollowUp(
            kind=n.kind,
            sensitivity=n.sensitivity,
            due_earliest=n.due_earliest,
            due_latest=n.due_latest,
            reason=n.reason,
            dedupe_key=n.dedupe_key,
            confidence=n.confidence,
        )
        for n in outcome.accepted
    ]
    return base.model_copy(
        update={
            "stored": stored,
            "resolved": list(outcome.resolved),
            "rejected": [f"{r.dedupe_key}: {r.reason}" for r in outcome.rejected],
            "raw_answer": outcome.completion.text,
            "unusable": outcome.unusable,
            "tokens_in": usage.prompt_tokens if usage else None,
            "tokens_out": usage.completion_tokens if usage else None,
        }
    )
