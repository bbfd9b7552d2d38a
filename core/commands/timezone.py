"""`/timezone`: show, set or clear the asker's own time zone, for every
platform, `kept chat` and the admin's `kept users timezone`.

A user's zone is theirs wherever they talk to kept on that platform, so no
chat permission applies: a user changes only their own (the admin CLI names
the user). The set_timezone tool's button (core/commands/buttons.py) is
confirmed here too, and only by the user it was offered to.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from zoneinfo import ZoneInfo

from core.clock import Clock
from core.logs import event
from core.messages import ZoneChoice
from core.users import UserZones, ZoneError, suggest_zones

log = logging.getLogger("kept.commands")

CLEAR_WORDS = frozenset({"clear", "reset", "none", "unset", "default"})


class ZoneOutcome(StrEnum):
    SHOWN = "shown"
    SET = "set"
    CLEARED = "cleared"
    # The user had none to clear: the agent's applies, as before.
    NOT_SET = "not_set"
    INVALID = "invalid"
    # A zone button pressed by someone else than the user it was offered to.
    NOT_YOURS = "not_yours"
    # A zone button's "No": nothing changes.
    DECLINED = "declined"


@dataclass(frozen=True, slots=True)
class ZoneAnswer:
    outcome: ZoneOutcome
    # The zone the user now reads times in (theirs, or the agent's).
    timezone: str
    own: bool  # True when `timezone` is the user's own, False: the agent's
    now: datetime  # the current time, for "it is 09:12 there"
    reason: str = ""  # INVALID: why, in one line

    @property
    def local_now(self) -> datetime:
        return self.now.astimezone(ZoneInfo(self.timezone))


class TimezoneCommands:
    """One user's zone on one platform, as that user (or the admin) asks."""

    def __init__(
        self, zones: UserZones, clock: Clock, *, agent_id: str, platform: str, user_id: str
    ) -> None:
        self._zones = zones
        self._clock = clock
        self._agent_id = agent_id
        self._platform = platform
        self._user_id = user_id

    async def run(self, text: str) -> ZoneAnswer:
        """`/timezone` shows, `/timezone Europe/Paris` sets, `/timezone clear` clears."""
        typed = text.strip()
        if not typed:
            return await self.show()
        if typed.lower() in CLEAR_WORDS:
            return await self.clear()
        return await self.set(typed)

    async def show(self) -> ZoneAnswer:
        own = await self._zones.own(self._platform, self._user_id)
        return self._answer(ZoneOutcome.SHOWN, own)

    async def set(self, text: str) -> ZoneAnswer:
        try:
            stored = await self._zones.set(self._platform, self._user_id, text, now=self._now())
        except ZoneError as exc:
            own = await self._zones.own(self._platform, self._user_id)
            return self._answer(ZoneOutcome.INVALID, own, reason=str(exc))
        event(
            log,
            logging.INFO,
            "user_zone_set",
            agent=self._agent_id,
            platform=self._platform,
            user=self._user_id,
            timezone=stored.timezone,
        )
        return self._answer(ZoneOutcome.SET, stored.timezone)

    async def clear(self) -> ZoneAnswer:
        cleared = await self._zones.clear(self._platform, self._user_id)
        if cleared:
            event(
                log,
                logging.INFO,
                "user_zone_cleared",
                agent=self._agent_id,
                platform=self._platform,
                user=self._user_id,
            )
        return self._answer(ZoneOutcome.CLEARED if cleared else ZoneOutcome.NOT_SET, None)

    async def confirm(self, choice: ZoneChoice) -> ZoneAnswer:
        """A press of the set_timezone tool's button by this user."""
        if choice.user_id != self._user_id:
            own = await self._zones.own(self._platform, self._user_id)
            return self._answer(ZoneOutcome.NOT_YOURS, own)
        if not choice.accept:
            own = await self._zones.own(self._platform, self._user_id)
            return self._answer(ZoneOutcome.DECLINED, own)
        return await self.set(choice.timezone)

    def _answer(self, outcome: ZoneOutcome, own: str | None, *, reason: str = "") -> ZoneAnswer:
        zone = own or self._zones.agent_zone(self._agent_id)
        return ZoneAnswer(outcome, zone, own is not None, self._now(), reason)

    def _now(self) -> datetime:
        return self._clock.now()


def zone_suggestions(typed: str, *, limit: int = 25) -> list[str]:
    """IANA names for autocomplete."""
    return suggest_zones(typed, limit=limit)
