"""The three schedule forms, and fire times that stay right across DST changes.

Forms: `at` (ISO 8601, or a time of day such as "15:00" / "3pm", read in the
user's timezone: its next occurrence), `after` (a duration such as "20m"),
and `cron` (a 5-field expression read in an IANA timezone).

Wall-clock times are placed on the timeline here, not by croniter: croniter
iterates *naive* wall times (plain calendar arithmetic), and `place` turns
each into an instant with two explicit rules for the two DST oddities:

- A wall time that does not exist (the spring-forward gap, e.g. 02:30 in
  Europe/Paris on the last Sunday of March) fires at the moment the clocks
  jump (03:00 local). It is late by at most the gap, never early and never
  skipped; several gap times of one expression collapse into that one firing.
- A wall time that happens twice (the autumn fall-back, 02:30 on the last
  Sunday of October) fires once, at its first occurrence, as cron does. Only
  when the first occurrence is already past (the reminder was created during
  the repeated hour) does the second one count.

So "every day 09:00 Europe/Paris" is 08:00 UTC in winter and 07:00 UTC in
summer: always 09:00 on the user's clock.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter

from core.config.model import parse_duration
from core.errors import KeptError
from core.reminders.model import ScheduleKind


class ScheduleError(KeptError, ValueError):
    """A schedule that cannot be used; the message says why, for a user or model."""


# Aliases a model is likely to write; everything else must be 5 fields.
_CRON_ALIASES = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
# A bound on the wall times looked at for one fire time: each wall time yields
# an instant after `after` except at a DST edge, so a handful always suffice.
_MAX_CANDIDATES = 50

_TIME_24H = re.compile(r"^([01]?\d|2[0-3])(?:[:h.]([0-5]\d)|h)$", re.IGNORECASE)
_TIME_12H = re.compile(r"^(1[0-2]|0?[1-9])(?:[:.]([0-5]\d))?\s*([ap])\.?\s*m\.?$", re.IGNORECASE)
_DATE_ONLY = re.compile(r"^\d{4}-?\d{2}-?\d{2}$")


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed request: when it first fires and, for cron, how it repeats."""

    kind: ScheduleKind
    next_fire_at: datetime  # UTC
    cron: str | None
    timezone: str


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(
            f"unknown time zone {name!r} (use an IANA name like 'Europe/Paris')"
        ) from exc


# --- wall time -> instant ---------------------------------------------------------


def instants(wall: datetime, tz: ZoneInfo) -> list[datetime]:
    """The UTC instants a naive wall time names in `tz`, earliest first: one
    normally, two in a fall-back overlap, and for a time inside a
    spring-forward gap the single instant the gap ends."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if first == second:
        return [first]
    early, late = min(first, second), max(first, second)
    if _wall(early, tz) == wall and _wall(late, tz) == wall:
        return [early, late]  # the repeated hour
    return [_transition(early, late, tz)]


def place(wall: datetime, tz: ZoneInfo, *, after: datetime | None = None) -> datetime | None:
    """The instant a wall time fires at (see the module docstring): the first
    of its instants strictly after `after`, or None when all are past."""
    for instant in instants(wall, tz):
        if after is None or instant > after:
            return instant
    return None


def _wall(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


def _transition(early: datetime, late: datetime, tz: ZoneInfo) -> datetime:
    """The instant the UTC offset changes between `early` and `late` (a gap's
    end). zoneinfo exposes no transition list, so bisect on whole seconds:
    transitions fall on whole seconds, and an hour-long gap takes ~12 steps."""
    after_offset = late.astimezone(tz).utcoffset()
    lo, hi = math.floor(early.timestamp()), math.ceil(late.timestamp())
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, tz).utcoffset() == after_offset:
            hi = mid
        else:
            lo = mid
    return datetime.fromtimestamp(hi, UTC)


# --- cron ---------------------------------------------------------------------------


def normalize_cron(expr: str) -> str:
    """A valid 5-field expression (aliases expanded, spaces collapsed)."""
    text = " ".join(expr.split())
    text = _CRON_ALIASES.get(text.lower(), text)
    fields = text.split(" ")
    if len(fields) != 5:
        raise ScheduleError(
            f"cron expression {expr!r} must have 5 fields (minute hour day-of-month month "
            f"day-of-week), e.g. '0 9 * * 1-5' for weekdays at 09:00"
        )
    if not croniter.is_valid(text):
        raise ScheduleError(f"invalid cron expression {expr!r}, e.g. '0 9 * * 1-5'")
    return text


def next_cron(expr: str, tz_name: str, after: datetime) -> datetime:
    """The first firing of `expr` in `tz_name` strictly after `after` (UTC).

    Raises ScheduleError for an expression or timezone that cannot be used
    (also one read back from a damaged row) or that never fires (Feb 30).
    """
    tz = zone(tz_name)
    text = normalize_cron(expr)
    try:
        walls = croniter(text, _wall(after, tz))
        for _ in range(_MAX_CANDIDATES):
            instant = place(walls.get_next(datetime), tz, after=after)
            if instant is not None:
                return instant
    except CroniterBadDateError as exc:
        raise ScheduleError(f"cron expression {expr!r} never fires") from exc
    except CroniterError as exc:
        raise ScheduleError(f"invalid cron expression {expr!r}: {exc}") from exc
    raise ScheduleError(f"cron expression {expr!r} has no firing after {after.isoformat()}")


def cron_period(expr: str, tz_name: str, at: datetime) -> timedelta:
    """Time from the firing at `at` to the one after it (scales grace periods)."""
    return next_cron(expr, tz_name, at) - at


def cron_firings(expr: str, tz_name: str, after: datetime, count: int) -> list[datetime]:
    """Up to `count` firings of `expr` in `tz_name` strictly after `after`,
    in order, each placed as `next_cron` places it (the gap times of one
    spring-forward collapse into one firing). One croniter walks the wall
    times: a fresh one per firing would cost a parse each."""
    tz = zone(tz_name)
    text = normalize_cron(expr)
    found: list[datetime] = []
    last = after
    try:
        walls = croniter(text, _wall(after, tz))
        # Collapsed gap times and a repeated hour's second pass yield no firing.
        for _ in range(count * 2 + _MAX_CANDIDATES):
            if len(found) >= count:
                break
            instant = place(walls.get_next(datetime), tz, after=last)
            if instant is not None:
                found.append(instant)
                last = instant
    except CroniterBadDateError as exc:
        if not found:
            raise ScheduleError(f"cron expression {expr!r} never fires") from exc
    except CroniterError as exc:
        raise ScheduleError(f"invalid cron expression {expr!r}: {exc}") from exc
    return found


def shortest_cron_gap(
    expr: str, tz_name: str, after: datetime, minimum: timedelta
) -> timedelta | None:
    """The first gap between two firings of `expr` after `after` that is
    shorter than `minimum`, or None when there is none.

    The firings looked at cover one whole day of the expression's fire times
    and the step into its next firing day: a day holds at most
    1 day / `minimum` + 1 firings spaced `minimum` apart, so an expression
    that never comes closer has its every within-day gap (minutes, hours)
    and a day boundary among them, and one that does shows it there (a
    "* * * * *" at its first pair). Not just the first pair: "0,1 9 * * *"
    is a day apart, then a minute.
    """
    if minimum <= timedelta(0):
        return None
    count = math.ceil(timedelta(days=1) / minimum) + 2
    firings = cron_firings(expr, tz_name, after, count)
    for earlier, later in pairwise(firings):
        if later - earlier < minimum:
            return later - earlier
    return None


# --- at / after ----------------------------------------------------------------------


def parse_time_of_day(text: str) -> time | None:
    """ "15:00", "9:05", "15h30", "15h", "3pm", "3:30 p.m." → a time; else None."""
    value = text.strip()
    if m := _TIME_24H.match(value):
        return time(int(m.group(1)), int(m.group(2) or 0))
    if m := _TIME_12H.match(value):
        hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "p" else 0)
        return time(hour, int(m.group(2) or 0))
    return None


def parse_at(value: str, tz_name: str, now: datetime) -> datetime:
    """An ISO 8601 time (without an offset: read in `tz_name`), or the next
    occurrence of a time of day in `tz_name`. Must be in the future."""
    tz = zone(tz_name)
    text = value.strip()
    clock_time = parse_time_of_day(text)
    if clock_time is not None:
        today = now.astimezone(tz).date()
        for days in range(3):  # today, tomorrow, or (past a DST edge) the day after
            wall = datetime.combine(today + timedelta(days=days), clock_time)
            instant = place(wall, tz, after=now)
            if instant is not None:
                return instant
        raise AssertionError("a time of day always recurs within two days")
    if _DATE_ONLY.match(text):
        raise ScheduleError(
            f"'at' needs a time, not only a date: {value!r} (e.g. '{text}T09:00' or '15:00')"
        )
    try:
        parsed = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError as exc:
        raise ScheduleError(
            f"'at' must be an ISO 8601 time (e.g. 2026-12-01T09:00 or "
            f"2026-12-01T09:00+01:00) or a time of day (15:00, 3pm); got {value!r}"
        ) from exc
    # Without an offset: the user's wall time (the first instant it names).
    instant = instants(parsed, tz)[0] if parsed.tzinfo is None else parsed.astimezone(UTC)
    if instant <= now:
        raise ScheduleError(
            f"{value!r} is in the past: it is now {local_iso(now, tz_name)} ({tz_name})"
        )
    return instant


def parse_after(value: str, now: datetime) -> datetime:
    text = value.strip()
    if text.lower().startswith("in "):
        text = text[3:]
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise ScheduleError(f"'after' must be a duration like '20m', '2h' or '1d': {exc}") from exc
    if seconds <= 0:
        raise ScheduleError(f"'after' must be longer than zero: {value!r}")
    try:
        return now + timedelta(seconds=seconds)
    except OverflowError as exc:
        raise ScheduleError(f"'after' is too far in the future: {value!r}") from exc


def parse_schedule(
    *,
    at: str | None,
    after: str | None,
    cron: str | None,
    timezone: str,
    now: datetime,
) -> Schedule:
    """Exactly one of at / after / cron, validated, with its first fire time."""
    given = [name for name, v in (("at", at), ("after", after), ("cron", cron)) if v]
    if len(given) != 1:
        which = ", ".join(given) if given else "none"
        raise ScheduleError(f"give exactly one of 'at', 'after' or 'cron' (got {which})")
    zone(timezone)
    if at:
        return Schedule("at", parse_at(at, timezone, now), None, timezone)
    if after:
        return Schedule("after", parse_after(after, now), None, timezone)
    assert cron is not None
    expr = normalize_cron(cron)
    return Schedule("cron", next_cron(expr, timezone, now), expr, timezone)


# --- display ---------------------------------------------------------------------------


def local_iso(instant: datetime, tz_name: str) -> str:
    """ISO 8601 with the local offset, to the minute: what a user reads."""
    try:
        tz: ZoneInfo | None = ZoneInfo(tz_name)
    except (ZoneInfoNotFoundError, ValueError):
        tz = None  # a damaged row still gets shown, in UTC
    local = instant.astimezone(tz or UTC)
    return local.isoformat(timespec="minutes")
