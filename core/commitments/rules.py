"""The rules code enforces on extraction candidates, whatever the model says.

The model proposes; these functions decide. Each rejection carries a short
reason for the log, so an operator can see why nothing was stored.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from core.commitments.candidates import Candidate
from core.commitments.model import Commitment, NewCommitment, Scope, Sensitivity
from core.messages import ChatKind

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


# --- explicit reminders, detected in code -----------------------------------

_STRIP_PUNCT = re.compile(r"[\u2019'`´\-_]+")
_SPACES = re.compile(r"\s+")


def fold(text: str) -> str:
    """Lower case, accents removed, hyphens and apostrophes as spaces.

    "Rappelle-moi", "RECUÉRDAME" and "Erinnere   mich" become "rappelle moi",
    "recuerdame", "erinnere mich". Turkish dotless ı has no decomposition and
    is matched as [ıi] in the patterns.
    """
    if not text.isascii():  # ASCII has no accents to remove: skip the slow part
        decomposed = unicodedata.normalize("NFKD", text)
        text = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _SPACES.sub(" ", _STRIP_PUNCT.sub(" ", text.casefold())).strip()


def _any(patterns: Iterable[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


# A user asking for an exact reminder, alarm or timer (these belong to
# scheduled tasks). Patterns run on fold()ed text.
_REMINDER_REQUEST = _any(
    [
        # English
        r"\bremind (?:me|us)\b",
        r"\b(?:set|add|create|schedule|make|need|want)\b.{0,20}\b(?:reminders?|alarm|timer)\b",
        r"\b(?:ping|notify|alert|wake|nudge|text|message) me (?:up )?(?:at|in|on|tomorrow|"
        r"tonight|every|when)\b",
        r"\b(?:let me know|tell me) (?:at|in) \d",
        r"\bdon t let me forget\b",
        # French
        r"\brappel(?:le|ez) moi\b",
        r"\b(?:peux|pourrais|pouvez|pourriez) (?:tu |vous )?me (?:le |la |les )?rappeler\b",
        r"\bfai(?:s|tes) moi penser\b",
        r"\b(?:mets|mettez|programme|programmez|cree|creez|ajoute|ajoutez)\b.{0,15}"
        r"\b(?:rappel|reveil|minuteur|alarme)\b",
        r"\bpre(?:viens|venez) moi\b",
        # German
        # "ich erinnere mich" means "I remember"; only the imperative asks.
        r"(?<!ich )\berinnere? mich\b",
        r"\b(?:kannst du|konntest du|konnen sie|konnten sie)\b.{0,30}\berinnern\b",
        r"\berinnern sie mich\b",
        r"\b(?:stell|stelle|setz|setze|erstell|erstelle|mach|mache)\b.{0,20}"
        r"\b(?:erinnerung|wecker|timer)\b",
        r"\bweck(?:e|en sie)? mich\b",
        # Spanish
        r"\brecuerd(?:a|e)me\b",
        r"\brecordarme\b",
        r"\bavis(?:a|e)me\b",
        r"\bdespiert(?:a|e)me\b",
        r"\b(?:pon|ponme|crea|creame|programa|anade|agrega)\b.{0,20}"
        r"\b(?:recordatorio|alarma|temporizador)\b",
        # Turkish: hatırlat, hatırlatır mısın, bana hatırlat, hatırlatma kur
        r"\bhat[ıi]rlat",
        # A few more languages people write in
        r"\bricord(?:ami|armi)\b",  # Italian
        r"\b(?:lembre me|me lembre|me lembra|lembrete)\b",  # Portuguese
        r"\bherinner (?:me|mij)\b",  # Dutch
        r"\bprzypomnij mi\b",  # Polish
        r"напомни",  # Russian, Ukrainian
        r"提醒我",  # Chinese
        r"リマインド|思い出させて",  # Japanese
    ]
)

# An assistant reply saying it scheduled something: the exchange is a
# scheduled task, not an inferred follow-up.
_REMINDER_SCHEDULED = _any(
    [
        r"\bi(?: ll| will) remind you\b",
        r"\b(?:i ve|i have) (?:set|scheduled|created|added) (?:up )?(?:a |an |the |your )?"
        r"(?:reminder|alarm|timer)\b",
        r"\b(?:reminder|alarm|timer) (?:is |has been )?(?:set|scheduled|created|added)\b",
        r"\bje (?:te|vous) (?:le |la |les )?rappellerai\b",
        r"\brappel (?:programme|cree|ajoute|enregistre)\b",
        r"\bich erinnere (?:dich|sie)\b",
        r"\berinnerung (?:ist |wurde )?(?:gesetzt|erstellt|eingerichtet|gespeichert)\b",
        r"\bte (?:lo |la |los |las )?recordare\b",
        r"\brecordatorio (?:creado|programado|configurado|establecido)\b",
        r"hat[ıi]rlatacag[ıi]m",
        r"hat[ıi]rlatma (?:kurdum|ayarlad[ıi]m|olusturdum|kuruldu|ayarland[ıi]|olusturuldu)",
    ]
)

# A candidate whose own words say it is a reminder (the model ignored the prompt).
_REMINDER_CANDIDATE = _any([r"\bremind(?:er|ers|ed|ing)?\b", r"\bscheduled task\b"])


# Every pattern above needs one of these substrings of the folded text; the
# big alternations are slow on a long message, the stems are not,
# and almost no message contains any of them. Keep in step with the patterns.
_STEMS = (
    "remind", "alarm", "timer", "ping me", "notify me", "alert me", "wake me", "nudge me",
    "text me", "message me", "let me know", "tell me", "forget", "scheduled task",
    "rappel", "penser", "reveil", "minuteur", "previen", "prevenez",
    "erinner", "weck", "recuerd", "record", "avis", "despiert", "temporizador",
    "hatırlat", "hatirlat", "ricord", "lembr", "herinner", "przypomnij",
    "напомни", "提醒", "リマインド", "思い出させて",
)  # fmt: skip


def _search(pattern: re.Pattern[str], folded: str) -> bool:
    return any(stem in folded for stem in _STEMS) and pattern.search(folded) is not None


def is_reminder_request(user_text: str) -> bool:
    """True when the user asks for an exact reminder, alarm or timer."""
    return _search(_REMINDER_REQUEST, fold(user_text))


def says_reminder_scheduled(assistant_text: str) -> bool:
    return _search(_REMINDER_SCHEDULED, fold(assistant_text))


def is_reminder_candidate(candidate: Candidate) -> bool:
    text = fold(f"{candidate.reason} {candidate.suggested_text} {candidate.dedupe_key}")
    return _search(_REMINDER_REQUEST, text) or _search(_REMINDER_CANDIDATE, text)


# --- candidates → new commitments -------------------------------------------


@dataclass(frozen=True, slots=True)
class Exchange:
    """One user message and the reply it got, as the model saw them."""

    user_message_id: int
    user_text: str
    assistant_text: str


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
    chat_kind: ChatKind,
) -> tuple[list[NewCommitment], list[Rejection]]:
    """Apply every rule; returns the accepted candidates and the rejections.

    `chat_kind` is the stored session's: in group and channel chats a
    check-in is read by everyone, so nothing personal or care is stored
    there, whatever the model says (DESIGN.md, "Privacy in groups")."""
    rejected: list[Rejection] = []
    if not candidates:
        return [], rejected  # the usual answer; the text checks below are not free
    if any(
        is_reminder_request(e.user_text) or says_reminder_scheduled(e.assistant_text)
        for e in exchanges
    ):
        # Which candidate belongs to the reminder cannot be told apart
        # reliably; storing none is the safe side.
        return [], [Rejection(c.dedupe_key, "exchange is an explicit reminder") for c in candidates]
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
