"""Schedule parsing and fire times, DST included (pure functions, no store)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from core.reminders.model import Reminder
from core.reminders.policy import LATE_PREFIX, MAX_GRACE, MIN_GRACE, decide, grace_for
from core.reminders.schedule import (
    ScheduleError,
    instants,
    local_iso,
    next_cron,
    normalize_cron,
    parse_after,
    parse_at,
    parse_schedule,
    parse_time_of_day,
)

PARIS = "Europe/Paris"
PARIS_TZ = ZoneInfo(PARIS)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def fires(expr: str, tz: str, start: datetime, count: int) -> list[datetime]:
    out, t = [], start
    for _ in range(count):
        t = next_cron(expr, tz, t)
        out.append(t)
    return out


# --- time of day -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("15:00", time(15, 0)),
        ("9:05", time(9, 5)),
        ("09:05", time(9, 5)),
        ("15h30", time(15, 30)),
        ("15h", time(15, 0)),
        ("3pm", time(15, 0)),
        ("3 PM", time(15, 0)),
        ("3:30 p.m.", time(15, 30)),
        ("12am", time(0, 0)),
        ("12pm", time(12, 0)),
        ("11:59pm", time(23, 59)),
    ],
)
def test_times_of_day_are_recognised(text: str, expected: time) -> None:
    assert parse_time_of_day(text) == expected


# Each string beside the nearest one that is a time of day.
NEAR_MISSES = {
    "25:00": ("23:00", time(23, 0)),
    "15": ("15h", time(15, 0)),
    "13pm": ("1pm", time(13, 0)),
    "3:61pm": ("3:59pm", time(15, 59)),
    "noon": ("12pm", time(12, 0)),
    "2026-12-01T09:00": ("09:00", time(9, 0)),
}


@pytest.mark.parametrize("text", list(NEAR_MISSES))
def test_other_strings_are_not_times_of_day(text: str) -> None:
    assert parse_time_of_day(text) is None
    near, expected = NEAR_MISSES[text]
    assert parse_time_of_day(near) == expected


def test_time_of_day_is_its_next_occurrence_in_the_user_timezone() -> None:
    now = utc(2026, 11, 30, 9, 0)  # 10:00 in Paris (UTC+1 in winter)
    assert parse_at("15:00", PARIS, now) == utc(2026, 11, 30, 14, 0)
    assert parse_at("9am", PARIS, now) == utc(2026, 12, 1, 8, 0)  # already past today
    assert parse_at("10:00", PARIS, now) == utc(2026, 12, 1, 9, 0)  # exactly now: tomorrow
    assert parse_at("15:00", "America/New_York", now) == utc(2026, 11, 30, 20, 0)


def test_iso_times_with_and_without_offset() -> None:
    now = utc(2026, 11, 30, 9, 0)
    assert parse_at("2026-12-01T09:00", PARIS, now) == utc(2026, 12, 1, 8, 0)
    assert parse_at("2026-12-01 09:00", PARIS, now) == utc(2026, 12, 1, 8, 0)
    assert parse_at("2026-12-01T09:00+05:00", PARIS, now) == utc(2026, 12, 1, 4, 0)
    assert parse_at("2026-12-01T09:00Z", PARIS, now) == utc(2026, 12, 1, 9, 0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2026-12-01", "needs a time"),
        ("tomorrow morning", "ISO 8601"),
        ("2026-11-30T09:59", "in the past"),
        ("2026-11-30T08:00Z", "in the past"),
    ],
)
def test_bad_at_values_say_why(text: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_at(text, PARIS, utc(2026, 11, 30, 9, 0))


def test_after_takes_durations() -> None:
    now = utc(2026, 11, 30, 9, 0)
    assert parse_after("20m", now) == now + timedelta(minutes=20)
    assert parse_after("in 2h", now) == now + timedelta(hours=2)
    assert parse_after("1h30m", now) == now + timedelta(minutes=90)
    for bad in ("0", "soon", "-5m"):
        with pytest.raises(ScheduleError):
            parse_after(bad, now)


# --- DST: wall times that do not exist or happen twice --------------------------------


def test_a_wall_time_in_the_spring_gap_fires_when_the_clocks_jump() -> None:
    # 2026-03-29 in Paris: 02:00 CET jumps to 03:00 CEST (01:00 UTC).
    assert instants(datetime(2026, 3, 29, 2, 30), PARIS_TZ) == [utc(2026, 3, 29, 1, 0)]
    now = utc(2026, 3, 28, 12, 0)
    assert parse_at("2026-03-29T02:30", PARIS, now) == utc(2026, 3, 29, 1, 0)
    assert parse_at("02:30", PARIS, now) == utc(2026, 3, 29, 1, 0)


def test_a_wall_time_in_the_autumn_overlap_names_two_instants_and_fires_at_the_first() -> None:
    # 2026-10-25 in Paris: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    first, second = utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30)
    assert instants(datetime(2026, 10, 25, 2, 30), PARIS_TZ) == [first, second]
    assert parse_at("2026-10-25T02:30", PARIS, utc(2026, 10, 24, 12, 0)) == first
    # Asked for during the repeated hour, after the first 02:30: the second one.
    assert parse_at("02:30", PARIS, utc(2026, 10, 25, 1, 10)) == second


def test_daily_0900_stays_0900_local_across_the_march_change() -> None:
    got = fires("0 9 * * *", PARIS, utc(2026, 3, 27, 12, 0), 4)
    assert got == [
        utc(2026, 3, 28, 8, 0),  # CET, UTC+1
        utc(2026, 3, 29, 7, 0),  # CEST, UTC+2: the change happened that night
        utc(2026, 3, 30, 7, 0),
        utc(2026, 3, 31, 7, 0),
    ]
    assert {local_iso(t, PARIS)[11:16] for t in got} == {"09:00"}


def test_daily_0900_stays_0900_local_across_the_october_change() -> None:
    got = fires("0 9 * * *", PARIS, utc(2026, 10, 23, 12, 0), 4)
    assert got == [
        utc(2026, 10, 24, 7, 0),
        utc(2026, 10, 25, 8, 0),
        utc(2026, 10, 26, 8, 0),
        utc(2026, 10, 27, 8, 0),
    ]
    assert {local_iso(t, PARIS)[11:16] for t in got} == {"09:00"}


def test_cron_in_the_spring_gap_fires_once_at_the_jump_then_normally() -> None:
    assert fires("30 2 * * *", PARIS, utc(2026, 3, 28, 12, 0), 2) == [
        utc(2026, 3, 29, 1, 0),  # 03:00 CEST: 02:30 did not exist that night
        utc(2026, 3, 30, 0, 30),  # 02:30 CEST
    ]
    # Every 15 minutes: 02:00-02:45 collapse into one firing at 03:00.
    assert fires("*/15 * * * *", PARIS, utc(2026, 3, 29, 0, 40), 3) == [
        utc(2026, 3, 29, 0, 45),  # 01:45 CET
        utc(2026, 3, 29, 1, 0),  # 03:00 CEST
        utc(2026, 3, 29, 1, 15),  # 03:15 CEST
    ]


def test_cron_in_the_autumn_overlap_fires_once() -> None:
    assert fires("30 2 * * *", PARIS, utc(2026, 10, 24, 12, 0), 2) == [
        utc(2026, 10, 25, 0, 30),  # the first 02:30 (CEST) only
        utc(2026, 10, 26, 1, 30),  # 02:30 CET next day
    ]
    got = fires("*/30 * * * *", PARIS, utc(2026, 10, 25, 0, 10), 4)
    # 02:30 CEST, then the repeated 02:00-02:59 is not fired again: 03:00 CET.
    assert got == [
        utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 25, 2, 0),
        utc(2026, 10, 25, 2, 30),
        utc(2026, 10, 25, 3, 0),
    ]


def test_weekdays_at_nine() -> None:
    # 2026-12-04 is a Friday.
    got = fires("0 9 * * 1-5", PARIS, utc(2026, 12, 4, 9, 0), 2)
    assert got == [utc(2026, 12, 7, 8, 0), utc(2026, 12, 8, 8, 0)]


# --- cron validation -------------------------------------------------------------------


def test_cron_aliases_and_spacing_are_normalised() -> None:
    assert normalize_cron("  0  9 * *   1-5 ") == "0 9 * * 1-5"
    assert normalize_cron("@daily") == "0 0 * * *"


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 9 * *", "5 fields"),
        ("0 0 9 * * *", "5 fields"),
        ("61 9 * * *", "invalid cron"),
        ("every day", "5 fields"),
        ("0 9 30 2 *", "never fires"),
    ],
)
def test_bad_cron_expressions_say_why(expr: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_schedule(at=None, after=None, cron=expr, timezone=PARIS, now=utc(2026, 1, 1))


def test_exactly_one_form_and_a_real_timezone() -> None:
    now = utc(2026, 11, 30, 9, 0)
    with pytest.raises(ScheduleError, match="exactly one"):
        parse_schedule(at=None, after=None, cron=None, timezone=PARIS, now=now)
    with pytest.raises(ScheduleError, match="exactly one"):
        parse_schedule(at="15:00", after="2h", cron=None, timezone=PARIS, now=now)
    with pytest.raises(ScheduleError, match="unknown time zone"):
        parse_schedule(at=None, after="2h", cron=None, timezone="Mars/Olympus", now=now)
    s = parse_schedule(at=None, after=None, cron="0 9 * * *", timezone=PARIS, now=now)
    assert (s.kind, s.cron, s.next_fire_at) == ("cron", "0 9 * * *", utc(2026, 12, 1, 8, 0))


# --- missed-reminder policy ---------------------------------------------------------------


def reminder(kind: str, fire: datetime, created: datetime, cron: str | None = None) -> Reminder:
    return Reminder(
        id="rm_test", agent_id="main", session_key="k", platform="telegram", chat_id="1",
        thread_id=None, created_by=None, text="stretch", kind=kind, cron=cron,  # type: ignore[arg-type]
        timezone=PARIS, next_fire_at=fire, status="active", claimed_at=None,
        last_fired_at=None, attempts=0, last_error=None, created_at=created, updated_at=created,
    )  # fmt: skip


def test_grace_scales_with_the_period_within_bounds() -> None:
    assert grace_for(timedelta(minutes=10)) == MIN_GRACE
    assert grace_for(timedelta(hours=2)) == timedelta(minutes=12)
    assert grace_for(timedelta(days=1)) == MAX_GRACE


def test_decisions_for_late_reminders() -> None:
    fire = utc(2026, 12, 1, 8, 0)
    daily = reminder("cron", fire, fire - timedelta(days=3), "0 9 * * *")
    on_time = decide(daily, fire + timedelta(minutes=30))
    assert (on_time.action, on_time.next_fire_at) == ("fire", utc(2026, 12, 2, 8, 0))
    too_late = decide(daily, fire + timedelta(hours=2))
    assert (too_late.action, too_late.next_fire_at) == ("skip", utc(2026, 12, 2, 8, 0))
    # Missed by more than a whole period: skips to the next time after now.
    assert decide(daily, fire + timedelta(days=2, hours=1)).next_fire_at == utc(2026, 12, 4, 8, 0)

    timer = reminder("after", fire, fire - timedelta(minutes=20))
    assert decide(timer, fire + timedelta(minutes=4)).action == "fire"
    late = decide(timer, fire + timedelta(minutes=6))
    assert late.action == "fire_late" and late.next_fire_at is None
    assert late.text(timer) == LATE_PREFIX + "stretch"


def test_a_damaged_cron_row_raises_schedule_error() -> None:
    fire = utc(2026, 12, 1, 8, 0)
    with pytest.raises(ScheduleError):
        decide(reminder("cron", fire, fire, "not a cron"), fire)
