"""IANA time zone names as users type them, and each user's zone.

Names come from the system's (or the tzdata package's) zone database through
`zoneinfo`; a typed name is matched without regard to case, so `europe/paris`
is stored as `Europe/Paris`. `UserZones` answers "which zone does this user
read times in": theirs when they set one, else the agent's (config).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from datetime import datetime
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from core.logs import event
from core.users.store import UserKey, UserZone, UserZoneStore

log = logging.getLogger("kept.users")

MAX_SUGGESTIONS = 25  # Discord's autocomplete limit


class ZoneError(ValueError):
    """A zone name kept cannot use; the message is one line for the user."""


@cache
def _names() -> dict[str, str]:
    """Lower-cased name → canonical spelling, for every known zone. The
    `posix/` and `right/` copies some systems ship are left out."""
    return {
        name.lower(): name
        for name in available_timezones()
        if not name.startswith(("posix/", "right/")) and name != "localtime"
    }


def parse_zone(text: str) -> str:
    """The canonical IANA name for `text` (`Europe/Paris`, `utc`); ZoneError
    with a hint when it names no zone."""
    typed = text.strip()
    if not typed:
        raise ZoneError("give a time zone name, e.g. Europe/Paris or Asia/Tokyo")
    name = _names().get(typed.lower().replace(" ", "_"))
    if name is not None:
        try:
            ZoneInfo(name)
            return name
        except (ZoneInfoNotFoundError, ValueError):
            pass
    close = suggest_zones(typed, limit=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; e.g. Europe/Paris or Asia/Tokyo"
    raise ZoneError(f"unknown time zone {typed[:60]!r}{hint}")


def suggest_zones(typed: str, *, limit: int = MAX_SUGGESTIONS) -> list[str]:
    """Zone names for autocomplete: those starting with what was typed (or
    whose city does), then those containing it; alphabetical within each."""
    needle = typed.strip().lower().replace(" ", "_")
    names = sorted(_names().values())
    if not needle:
        return names[:limit]
    starts = [n for n in names if n.lower().startswith(needle)]
    cities = [n for n in names if n.lower().rsplit("/", 1)[-1].startswith(needle)]
    contains = [n for n in names if needle in n.lower()]
    return list(dict.fromkeys([*starts, *cities, *contains]))[:limit]


class UserZones:
    """Each user's zone, falling back to their agent's. A storage fault on a
    read falls back too (logged): a time shown in the agent's zone is better
    than no answer."""

    def __init__(self, store: UserZoneStore, agent_zone: Callable[[str], str]) -> None:
        self._store = store
        self._agent_zone = agent_zone  # agent id → its configured timezone

    @property
    def store(self) -> UserZoneStore:
        return self._store

    async def own(self, platform: str, user_id: str | None) -> str | None:
        """The zone the user set, None when they set none (or it cannot be read)."""
        if not user_id:
            return None
        try:
            found = await self._store.zone(platform, user_id)
        except Exception as exc:
            event(
                log,
                logging.WARNING,
                "user_zone_unread",
                platform=platform,
                user=user_id,
                error=repr(exc),
                action="check the database; the agent's timezone applies meanwhile",
            )
            return None
        return found.timezone if found is not None else None

    async def of(self, agent_id: str, platform: str, user_id: str | None) -> str:
        """The zone `user_id` reads times in: theirs, else the agent's."""
        return await self.own(platform, user_id) or self._agent_zone(agent_id)

    async def many(self, users: Collection[UserKey]) -> dict[UserKey, str]:
        """The zones of those of `users` who set one ({} when unreadable)."""
        if not users:
            return {}
        try:
            return await self._store.zones(users)
        except Exception as exc:
            event(
                log,
                logging.WARNING,
                "user_zone_unread",
                users=len(users),
                error=repr(exc),
                action="check the database; the agent's timezone applies meanwhile",
            )
            return {}

    def agent_zone(self, agent_id: str) -> str:
        return self._agent_zone(agent_id)

    async def set(self, platform: str, user_id: str, text: str, *, now: datetime) -> UserZone:
        """Validate and store; ZoneError for a name that is no zone."""
        return await self._store.set_zone(platform, user_id, parse_zone(text), now=now)

    async def clear(self, platform: str, user_id: str) -> bool:
        return await self._store.clear_zone(platform, user_id)
