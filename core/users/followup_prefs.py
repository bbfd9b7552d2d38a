"""Follow-up preferences: whether kept infers follow-ups from a user's
messages and checks in with them.

A user switches their own off (`/followups off`, `kept users followups`):
under that agent, on that platform, in every chat. A shared chat's admin
switches a whole group or channel off. Off means: their messages are not
sent to the extraction model (decided before any call, core/commitments),
their pending follow-ups are dismissed with the reason, and no check-in is
sent to them (the heartbeat asks the database at delivery,
core/heartbeat). Reminders are the user's explicit requests and are not
affected. Switching back on resumes extraction for new messages only.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime

from core.logs import event
from core.users.store import (
    FollowUpPreferenceStore,
    FollowUpState,
    FollowUpSubject,
    Switched,
)

log = logging.getLogger("kept.users")

# Recorded on each follow-up that switching off dismissed (its last_error,
# as the heartbeat's "HEARTBEAT_OK" is).
DISMISSED_REASON = "follow-ups switched off"

ON_WORDS = frozenset({"on", "yes", "enable", "enabled", "true", "1"})
OFF_WORDS = frozenset({"off", "no", "disable", "disabled", "false", "0", "stop"})


def parse_switch(text: str) -> bool | None:
    """`on` → True, `off` → False; None for anything else."""
    word = text.strip().lower()
    if word in ON_WORDS:
        return True
    if word in OFF_WORDS:
        return False
    return None


class FollowUpPreferences:
    """Reads and switches preferences. Reads that gate extraction or a
    check-in are never answered from memory: another worker or the CLI may
    have switched one a moment ago."""

    def __init__(self, store: FollowUpPreferenceStore) -> None:
        self._store = store

    @property
    def store(self) -> FollowUpPreferenceStore:
        return self._store

    async def state(
        self, agent_id: str, platform: str, user_id: str, session_key: str | None = None
    ) -> FollowUpState:
        """The settings that apply to `user_id` (and, in a shared chat, the
        chat's); what `/followups` and `/mydata` show."""
        return await self._store.state(agent_id, platform, user_id, session_key)

    async def silenced(self, subjects: Collection[FollowUpSubject]) -> set[FollowUpSubject]:
        if not subjects:
            return set()
        return await self._store.silenced(subjects)

    async def set_user(
        self, agent_id: str, platform: str, user_id: str, enabled: bool, *, now: datetime
    ) -> Switched:
        switched = await self._store.set_user(agent_id, platform, user_id, enabled, now=now)
        event(
            log,
            logging.INFO,
            "followups_switched",
            agent=agent_id,
            platform=platform,
            user=user_id,
            enabled=enabled,
            changed=switched.changed,
            dismissed=switched.dismissed,
            unqueued=switched.unqueued,
        )
        return switched

    async def set_chat(
        self, agent_id: str, session_key: str, enabled: bool, *, now: datetime
    ) -> Switched:
        switched = await self._store.set_chat(agent_id, session_key, enabled, now=now)
        event(
            log,
            logging.INFO,
            "followups_switched",
            agent=agent_id,
            session=session_key,
            enabled=enabled,
            changed=switched.changed,
            dismissed=switched.dismissed,
            unqueued=switched.unqueued,
        )
        return switched
