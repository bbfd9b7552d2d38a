"""The extraction answer's strict parse and the rules code enforces on it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.commitments.candidates import UnusableAnswer, parse_answer
from core.commitments.explicit import is_reminder_request, says_reminder_scheduled
from core.commitments.model import Commitment, Scope
from core.commitments.rules import (
    CARE_MIN_CONFIDENCE,
    DEFAULT_WINDOW,
    MAX_NEW_PER_EXCHANGE,
    MAX_WINDOW,
    Exchange,
    clamp_window,
    evaluate,
    merge_fields,
)
from core.messages import ChatKind

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
SCOPE = Scope(
    "main", "agent:main:telegram:private:1", "telegram", "1", None, "u1", chat_kind="private"
)
HOUR = timedelta(hours=1)


def candidate(**over: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "kind": "event_check_in",
        "sensitivity": "routine",
        "source": "inferred_user_context",
        "dueWindow": {
            "earliest": (NOW + timedelta(days=1, hours=9)).isoformat(),
            "latest": (NOW + timedelta(days=2)).isoformat(),
        },
        "reason": "user has a job interview tomorrow",
        "suggestedText": "How did the interview go?",
        "confidence": 0.9,
        "dedupeKey": "interview:2026-12-01",
    }
    c.update(over)
    return c


def answer(*candidates: dict[str, Any], resolved: list[str] | None = None) -> str:
    return json.dumps({"candidates": list(candidates), "resolved": resolved or []})


def run_rules(
    text: str,
    user: str = "I have an interview tomorrow",
    reply: str = "Good luck!",
    chat_kind: ChatKind = "private",
):
    parsed = parse_answer(text)
    return evaluate(
        parsed.candidates,
        scope=replace(SCOPE, chat_kind=chat_kind),
        exchanges=[Exchange(7, user, reply)],
        now=NOW,
        created_at=NOW,
        heartbeat_seconds=1800,
        timezone="Europe/Paris",
    )


# --- parsing -----------------------------------------------------------------


def test_plain_and_fenced_answers_parse() -> None:
    plain = parse_answer(answer(candidate()))
    assert plain.candidates[0].dedupe_key == "interview:2026-12-01"
    fenced = parse_answer(f"Here you go:\n```json\n{answer(candidate())}\n```\nHope it helps")
    assert fenced == plain
    assert parse_answer("```\n{}\n```").candidates == []


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("Sure! The user has an interview.", "no JSON object"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "no JSON object"),
        (answer(candidate(confidence="0.9")), "confidence"),
        (answer(candidate(kind="reminder")), "kind"),
        (answer(candidate(extra=1)), "extra"),
        (answer(candidate(dueWindow={"earliest": "2026-12-01T18:00:00"})), "timezone"),
        (answer(candidate(confidence=1.5)), "confidence"),
        (json.dumps({"candidates": [], "notes": "x"}), "notes"),
    ],
)
def test_garbage_is_rejected_with_a_reason(text: str, why: str) -> None:
    with pytest.raises(UnusableAnswer, match=why):
        parse_answer(text)


# --- explicit reminders --------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Remind me at 3pm to call mom",
        "can you set a reminder for 8am?",
        "ping me in 20 minutes",
        "Rappelle-moi demain à 9h d'appeler le médecin",
        "rappelez moi ce soir",
        "Erinnere mich morgen an den Termin",
        "Kannst du mich um 15 Uhr daran erinnern?",
        "Recuérdame llamar a mi madre a las 3",
        "recuerdame mañana",
        "Bana yarın saat 3'te hatırlat",
        "HATIRLATIR MISIN?",
        "Ricordami di comprare il latte",
        "提醒我明天开会",
        "明天早上七点叫醒我",
        "帮我设个闹钟",
        "明日の朝7時に起こして",
        "タイマーを25分でセットして",
        "リマインドして",
        "ช่วยปลุกตอนหกโมงเช้า",
        "เตือนฉันพรุ่งนี้บ่ายสองด้วย",
        "یادم بنداز فردا به بانک زنگ بزنم",
        "لطفا ساعت ۷ بیدارم کن",
        "فكرني بكرة الساعة خمسة",
        "ذكّرني غداً بموعد البنك",
        "اضبط منبه الساعة ستة",
    ],
)
def test_reminder_requests_are_detected_in_several_languages(text: str) -> None:
    assert is_reminder_request(text)


@pytest.mark.parametrize(
    "text",
    [
        "I have an interview tomorrow",
        "That reminds me, my exam is on Friday",
        "Ich erinnere mich nicht an seinen Namen",
        "J'ai un entretien demain",
        "Mañana tengo una entrevista",
        "Yarın bir mülakatım var",
        "我明天有面试",
        "明日は面接があります",
        "พรุ่งนี้มีสอบ",
        "فردا مصاحبه دارم",
        "عندي مقابلة عمل بكرة",
    ],
)
def test_ordinary_messages_are_not_reminders(text: str) -> None:
    assert not is_reminder_request(text)
    assert is_reminder_request(f"{text}. Remind me the day before.")  # once asked, it is one


def test_every_pattern_branch_needs_a_stem() -> None:
    # The stem prefilter must never hide a match: each top-level branch of
    # the patterns, instantiated with a minimal example, contains a stem.
    from core.commitments import explicit as rules

    examples = {
        rules._REMINDER_REQUEST: [
            "remind me",
            "set a timer",
            "set an alarm",
            "need a reminder",
            "text me at 5",
            "let me know in 5",
            "tell me at 5",
            "don t let me forget",
            "pourrais tu me rappeler",
            "fais moi penser",
            "mets un reveil",
            "ajoute un minuteur",
            "previens moi",
            "prevenez moi",
            "stell einen wecker",
            "weck mich",
            "avisame",
            "despiertame",
            "pon una alarma",
            "pon un temporizador",
            "recordarme",
            "ricordami",
            "lembrete",
            "herinner me",
            "przypomnij mi",
            "напомни",
            "リマインド",
            "思い出させて",
            "fais moi signe",
            "tu peux me faire signe",
            "reveille moi",
            "uyandır",
            "alarm kurar mısın",
            "sayac kur",
            "یادم بنداز",
            "یاداوری کن",
            "بیدارم کن",
            "تایمر ۲۵ دقیقه بذار",
            "فكرني",
            "تذكرني",
            "صحني",
            "اظبطلي تايمر",
            "เตือนให้",
            "ช่วยเตือน",
            "ปลุก",
            "叫我起床",
            "倒计时",
            "闹钟",
            "アラーム",
            "起こして",
        ],
        rules._REMINDER_SCHEDULED: [
            "i ll remind you",
            "reminder set",
            "je te rappellerai",
            "ich erinnere dich",
            "te lo recordare",
            "hatirlatacagim",
            "je te fais signe",
            "alarmı kurdum",
            "sayac basladı",
            "بذكرك",
            "بصحيك",
            "التايمر اشتغل",
            "تایمر ۲۵ دقیقه‌ای شروع شد",
            "闹钟已经设好",
            "计时开始",
            "จะเตือน",
            "我会提醒你",
            "リマインドします",
            "یادت میندازم",
        ],
        rules._REMINDER_CANDIDATE: ["reminders", "scheduled task"],
    }
    for pattern, texts in examples.items():
        for text in texts:
            assert pattern.search(text), text
            assert rules._search(pattern, text), text


def test_assistant_scheduling_counts_as_a_reminder() -> None:
    assert says_reminder_scheduled("Done — I'll remind you at 3 pm.")
    assert says_reminder_scheduled("Je te le rappellerai demain.")
    assert not says_reminder_scheduled("Good luck with the interview!")


# --- rules ----------------------------------------------------------------------


def test_good_candidate_is_accepted_with_scope_and_timezone() -> None:
    accepted, rejected = run_rules(answer(candidate()))
    assert rejected == []
    [new] = accepted
    assert new.scope == SCOPE and new.source_message_id == 7
    assert new.due_timezone == "Europe/Paris" and new.dedupe_key == "interview:2026-12-01"


@pytest.mark.parametrize(
    "over",
    [
        {"confidence": 0.5},
        {"kind": "care_check_in", "confidence": CARE_MIN_CONFIDENCE - 0.01},
        {"sensitivity": "care", "confidence": 0.8},
    ],
)
def test_weak_confidence_is_rejected(over: dict[str, Any]) -> None:
    accepted, rejected = run_rules(answer(candidate(**over)))
    assert accepted == [] and "confidence" in rejected[0].reason


PRIVATE_MATTERS = [
    {"kind": "care_check_in", "sensitivity": "routine"},
    {"kind": "event_check_in", "sensitivity": "personal"},
    {"kind": "open_loop", "sensitivity": "care"},
]


@pytest.mark.parametrize("chat_kind", ["group", "channel"])
@pytest.mark.parametrize("over", PRIVATE_MATTERS)
def test_no_personal_or_care_follow_up_in_a_group_or_channel(
    chat_kind: ChatKind, over: dict[str, Any]
) -> None:
    # Confident enough for any bar: only the chat kind rejects it.
    text = answer(candidate(confidence=0.99, **over), candidate(dedupeKey="talk", confidence=0.9))
    accepted, rejected = run_rules(text, chat_kind=chat_kind)
    assert [n.dedupe_key for n in accepted] == ["talk"]  # a routine one still passes
    [why] = rejected
    assert why.dedupe_key == "interview:2026-12-01"
    assert f"in a {chat_kind} chat" in why.reason and "public" in why.reason


@pytest.mark.parametrize("over", PRIVATE_MATTERS)
def test_personal_and_care_follow_ups_stay_allowed_in_private_chats(over: dict[str, Any]) -> None:
    accepted, rejected = run_rules(answer(candidate(confidence=0.99, **over)))
    assert rejected == [] and len(accepted) == 1


def test_reminder_exchange_stores_nothing_even_if_the_model_returns_it() -> None:
    text = answer(candidate(reason="user goes to the dentist", dedupeKey="dentist"))
    accepted, rejected = run_rules(text, user="remind me at 3pm to leave for the dentist")
    assert accepted == [] and rejected[0].reason == "exchange is an explicit reminder"
    reminderish = answer(candidate(reason="user asked for a reminder at 3pm"))
    accepted, rejected = run_rules(reminderish, user="what a day")
    assert accepted == [] and rejected[0].reason == "candidate is an explicit reminder"


@pytest.mark.parametrize(
    ("user", "reply"),
    [
        (
            "Remind me at 3 to call the bank, and I have an interview tomorrow",
            "Done, I'll remind you at 3. Good luck with the interview!",
        ),
        ("Mets un réveil à 6h30 — demain j'ai mon entretien", "C'est noté !"),
        ("提醒我三点给银行打电话。明天我有面试", "好的，我会提醒你。面试加油！"),
        ("ตั้งนาฬิกาปลุกหกโมงนะ พรุ่งนี้มีสัมภาษณ์งาน", "ได้เลย โชคดีนะ"),
    ],
)
def test_a_reminder_request_drops_the_reminder_not_the_other_follow_up(
    user: str, reply: str
) -> None:
    interview = candidate(
        reason="user has an interview the next day", suggestedText="How was it?", dedupeKey="job"
    )
    bank = candidate(
        reason="user wants to call the bank at 3",
        suggestedText="Did you call the bank? 银行 โทร",
        dedupeKey="bank call",
        confidence=0.95,
    )
    if "bank" not in user and "银行" not in user:  # the leaked reminder in its own words
        bank = candidate(reason="reminder at 6:30 alarm", suggestedText="...", dedupeKey="alarm")
    accepted, rejected = run_rules(answer(interview, bank), user=user, reply=reply)
    assert [n.dedupe_key for n in accepted] == ["job"]
    assert len(rejected) == 1 and "reminder" in rejected[0].reason


def test_words_of_when_do_not_tie_a_follow_up_to_the_reminder() -> None:
    # Both halves say "tomorrow": the interview is still the rest's.
    user = "Remind me tomorrow morning at 8 to print my CV, I have an interview at 10"
    interview = candidate(
        reason="user has an interview tomorrow morning at 10",
        suggestedText="How did the interview go tomorrow?",
        dedupeKey="interview tomorrow",
    )
    accepted, rejected = run_rules(answer(interview), user=user, reply="Will do!")
    assert [n.dedupe_key for n in accepted] == ["interview tomorrow"] and rejected == []


def test_a_reminder_request_with_nothing_else_keeps_nothing() -> None:
    text = answer(candidate(reason="the user has to be somewhere", dedupeKey="somewhere"))
    accepted, rejected = run_rules(text, user="wake me up at 7 please", reply="Alarm set for 7.")
    assert accepted == [] and rejected[0].reason == "exchange is an explicit reminder"


def test_past_due_time_is_rejected() -> None:
    past = {"earliest": (NOW - HOUR).isoformat(), "latest": (NOW + HOUR).isoformat()}
    accepted, rejected = run_rules(answer(candidate(dueWindow=past)))
    assert accepted == [] and rejected[0].reason == "due time is in the past"


def test_per_exchange_cap_keeps_the_most_confident() -> None:
    many = [candidate(dedupeKey=f"k{i}", confidence=0.8 + i / 100) for i in range(5)]
    accepted, rejected = run_rules(answer(*many))
    assert [n.dedupe_key for n in accepted] == ["k4", "k3", "k2"][:MAX_NEW_PER_EXCHANGE]
    assert len(rejected) == 5 - MAX_NEW_PER_EXCHANGE


def test_same_key_twice_in_one_answer_is_one_candidate() -> None:
    accepted, _ = run_rules(
        answer(candidate(confidence=0.8), candidate(dedupeKey=" Interview:2026-12-01 "))
    )
    assert len(accepted) == 1 and accepted[0].confidence == 0.9


def test_window_is_clamped_to_one_heartbeat_after_creation() -> None:
    lead = timedelta(minutes=30)
    soon = NOW + timedelta(minutes=5)
    assert clamp_window(soon, None, now=NOW, created_at=NOW, lead=lead) == (
        NOW + lead,
        NOW + lead + DEFAULT_WINDOW,
    )
    # an inverted latest becomes the default window
    start = NOW + 5 * HOUR
    assert clamp_window(start, start - HOUR, now=NOW, created_at=NOW, lead=lead) == (
        start,
        start + DEFAULT_WINDOW,
    )
    assert isinstance(
        clamp_window(NOW + timedelta(days=90), None, now=NOW, created_at=NOW, lead=lead), str
    )


@given(
    earliest=st.integers(min_value=-10_000, max_value=100_000),
    latest=st.one_of(st.none(), st.integers(min_value=-10_000, max_value=200_000)),
    lead=st.integers(min_value=1, max_value=10_000),
)
def test_clamped_windows_always_hold_the_invariants(
    earliest: int, latest: int | None, lead: int
) -> None:
    minute = timedelta(minutes=1)
    result = clamp_window(
        NOW + earliest * minute,
        None if latest is None else NOW + latest * minute,
        now=NOW,
        created_at=NOW,
        lead=lead * minute,
    )
    if isinstance(result, str):
        assert earliest <= 0 or earliest * minute > timedelta(days=60)
        return
    start, end = result
    assert start >= NOW + lead * minute
    assert start < end <= start + MAX_WINDOW


def stored(**over: Any) -> Commitment:
    base: dict[str, Any] = dict(
        id="cm_1",
        agent_id="main",
        session_key=SCOPE.session_key,
        platform="telegram",
        chat_id="1",
        thread_id=None,
        sender_id="u1",
        kind="event_check_in",
        sensitivity="routine",
        source="inferred_user_context",
        status="pending",
        reason="old reason",
        suggested_text="old text",
        dedupe_key="interview:2026-12-01",
        confidence=0.8,
        due_earliest=NOW + 10 * HOUR,
        due_latest=NOW + 20 * HOUR,
        due_timezone="UTC",
        source_message_id=1,
        created_at=NOW,
        updated_at=NOW,
    )
    base.update(over)
    return Commitment(**base)


def test_merge_keeps_higher_confidence_and_widens_the_window() -> None:
    [new] = run_rules(answer(candidate()))[0]
    merged = merge_fields(stored(), new)
    assert merged.confidence == 0.9 and merged.reason == new.reason
    assert merged.due_earliest == NOW + 10 * HOUR
    assert merged.due_latest == new.due_latest
    weaker = merge_fields(stored(confidence=0.95), new)
    assert weaker.confidence == 0.95 and weaker.reason == "old reason"


def test_merge_never_moves_a_snoozed_commitment_earlier() -> None:
    [new] = run_rules(answer(candidate()))[0]
    snoozed = stored(
        status="snoozed",
        snoozed_until=NOW + 40 * HOUR,
        due_earliest=NOW + 40 * HOUR,
        due_latest=NOW + 50 * HOUR,
    )
    merged = merge_fields(snoozed, new)
    assert merged.due_earliest == NOW + 40 * HOUR
    assert merged.due_latest >= merged.due_earliest
