"""The rules code enforces on extraction candidates, whatever the model says.

The model proposes; these functions decide. Each rejection carries a short
reason for the log, so an operator can see why nothing was stored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from core.commitments.candidates import Candidate
from core.commitments.exchange import Exchange
from core.commitments.explicit import is_reminder_candidate, split_reminders
from core.commitments.model import Commitment, NewCommitment, Scope, Sensitivity

# Confidence a candidate needs. Care check-ins ask about health or mood; an
# unwelcome one does more harm than a missed one, so the bar is higher.
MIN_CONFIDENCE = 0.72
PERSONAL_MIN_CONFIDENCE = 0.78
CARE_MIN_CONFIDENCE = 0.85

MAX_NEW_PER_EXCHANGE = 3
# Without a heartbeat interval (heartbeat.every = "0") nothing is delivered,
# but a stored commitment still must not be due the moment it is written.
FALLBACK_LEAD = timedelta(minutes=30)
# A missing or inverted `latest` becomes this window after `earliest`.
DEFAULT_WINDOW = timedelta(hours=12)
# Commitments are short-lived: no follow-up months away, no week-long windows.
MAX_WINDOW = timedelta(days=7)
MAX_HORIZON = timedelta(days=60)

_SENSITIVITY_RANK: dict[Sensitivity, int] = {"routine": 0, "personal": 1, "care": 2}
_SPACES = re.compile(r"\s+")


# --- candidates → new commitments -------------------------------------------


@dataclass(frozen=True, slots=True)
class Rejection:
    dedupe_key: str
    reason: str


def private_matter(candidate: Candidate) -> bool:
    """A care check-in, or anything the model rates personal or care."""
    return candidate.kind == "care_check_in" or candidate.sensitivity in ("personal", "care")


def min_confidence(candidate: Candidate) -> float:
    if candidate.kind == "care_check_in" or candidate.sensitivity == "care":
        return CARE_MIN_CONFIDENCE
    if candidate.sensitivity == "personal":
        return PERSONAL_MIN_CONFIDENCE
    return MIN_CONFIDENCE


_CONTROL = re.compile(r"[\x00-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def clean_text(text: str) -> str:
    """One line, no control or bidi-override characters, trimmed.

    The text is the model's; it will be shown in tables and prompts, where
    a newline or an override character could fake structure.
    """
    return _SPACES.sub(" ", _CONTROL.sub(" ", text)).strip()


def normalize_dedupe_key(key: str) -> str:
    return _SPACES.sub(" ", clean_text(key).casefold())


def clamp_window(
    earliest: datetime,
    latest: datetime | None,
    *,
    now: datetime,
    created_at: datetime,
    lead: timedelta,
) -> tuple[datetime, datetime] | str:
    """The stored due window, or why there is none.

    `now` is the time the model was told; `created_at` is when the record is
    written. Earliest must lie after `now`, then is raised to at least one
    heartbeat interval after creation so a follow-up never echoes the moment
    it was inferred.
    """
    if earliest <= now:
        return "due time is in the past"
    if earliest > now + MAX_HORIZON:
        return "due time is too far ahead for a short-lived follow-up"
    floor = created_at + lead
    start = max(earliest, floor)
    end = latest if latest is not None and latest > start else start + DEFAULT_WINDOW
    return start, min(end, start + MAX_WINDOW)


def evaluate(
    candidates: Sequence[Candidate],
    *,
    scope: Scope,
    exchanges: Sequence[Exchange],
    now: datetime,
    created_at: datetime,
    heartbeat_seconds: float,
    timezone: str,
) -> tuple[list[NewCommitment], list[Rejection]]:
    """Apply every rule; returns the accepted candidates and the rejections.

    The scope's chat kind is the stored session's: in group and channel chats a
    check-in is read by everyone, so nothing personal or care is stored
    there, whatever the model says."""
    chat_kind = scope.chat_kind
    rejected: list[Rejection] = []
    if not candidates:
        return [], rejected  # the usual answer; the text checks below are not free
    split = split_reminders(exchanges)
    lead = timedelta(seconds=heartbeat_seconds) if heartbeat_seconds > 0 else FALLBACK_LEAD
    source_id = exchanges[-1].user_message_id if exchanges else None
    accepted: dict[str, NewCommitment] = {}
    for c in candidates:
        key = normalize_dedupe_key(c.dedupe_key)
        reason, suggested = clean_text(c.reason), clean_text(c.suggested_text)
        why = None
        if not key or not reason or not suggested:
            why = "empty reason, suggested text or dedupe key"
        elif chat_kind != "private" and private_matter(c):
            why = f"{c.kind} / {c.sensitivity} in a {chat_kind} chat, where a check-in is public"
        elif c.confidence < min_confidence(c):
            why = f"confidence {c.confidence:.2f} below {min_confidence(c):.2f}"
        elif is_reminder_candidate(c):
            why = "candidate is an explicit reminder"
        elif split is not None:
            why = split.claims(c)
        if why is not None:
            rejected.append(Rejection(c.dedupe_key, why))
            continue
        window = clamp_window(c.earliest, c.latest, now=now, created_at=created_at, lead=lead)
        if isinstance(window, str):
            rejected.append(Rejection(c.dedupe_key, window))
            continue
        new = NewCommitment(
            scope=scope,
            kind=c.kind,
            sensitivity=c.sensitivity,
            source=c.source,
            reason=reason,
            suggested_text=suggested,
            dedupe_key=key,
            confidence=c.confidence,
            due_earliest=window[0],
            due_latest=window[1],
            due_timezone=timezone,
            source_message_id=source_id,
            created_at=created_at,
        )
        # The same key twice in one answer is one commitment.
        accepted[key] = merge_new(accepted[key], new) if key in accepted else new
    ranked = sorted(accepted.values(), key=lambda n: n.confidence, reverse=True)
    for extra in ranked[MAX_NEW_PER_EXCHANGE:]:
        rejected.append(Rejection(extra.dedupe_key, "over the per-exchange limit"))
    return ranked[:MAX_NEW_PER_EXCHANGE], rejected


# --- dedupe merge -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MergedFields:
    """What a duplicate candidate changes in an active commitment."""

    confidence: float
    due_earliest: datetime
    due_latest: datetime
    reason: str
    suggested_text: str
    sensitivity: Sensitivity


def _more_sensitive(a: Sensitivity, b: Sensitivity) -> Sensitivity:
    return a if _SENSITIVITY_RANK[a] >= _SENSITIVITY_RANK[b] else b


def merge_fields(existing: Commitment, new: NewCommitment) -> MergedFields:
    """Keep the higher confidence (and its wording), widen the window.

    A snoozed commitment never becomes due before the time it was snoozed
    to: the user asked for that.
    """
    earliest = min(existing.due_earliest, new.due_earliest)
    if existing.snoozed_until is not None:
        earliest = max(earliest, existing.snoozed_until)
    latest = max(existing.due_latest, new.due_latest, earliest)
    newer_wins = new.confidence > existing.confidence
    return MergedFields(
        confidence=max(existing.confidence, new.confidence),
        due_earliest=earliest,
        due_latest=min(latest, earliest + MAX_WINDOW),
        reason=new.reason if newer_wins else existing.reason,
        suggested_text=new.suggested_text if newer_wins else existing.suggested_text,
        sensitivity=_more_sensitive(existing.sensitivity, new.sensitivity),
    )


def merge_new(a: NewCommitment, b: NewCommitment) -> NewCommitment:
    """Two accepted candidates with one dedupe key in the same answer."""
    high, low = (a, b) if a.confidence >= b.confidence else (b, a)
    earliest = min(a.due_earliest, b.due_earliest)
    latest = min(max(a.due_latest, b.due_latest), earliest + MAX_WINDOW)
    return replace(
        high,
        due_earliest=earliest,
        due_latest=latest,
        sensitivity=_more_sensitive(high.sensitivity, low.sensitivity),
    )
