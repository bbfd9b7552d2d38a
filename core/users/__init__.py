"""Per-user settings: a user's own time zone, keyed by (platform, user id),
which reminders, follow-up windows, quiet hours, the chat prompt and every
time shown to that user are read in (the agent's `timezone` when the user
has none); and whether kept follows up with them, per agent (theirs, or a
group's set by its admin).

store.py          the UserZoneStore and FollowUpPreferenceStore ports and their records
zones.py          IANA names: validation, suggestions; UserZones, the resolver
followup_prefs.py whether kept follows up with a user (their own switch, a group's)
"""

from core.users.followup_prefs import FollowUpPreferences
from core.users.store import (
    FollowUpPreferenceStore,
    FollowUpState,
    FollowUpSubject,
    Switched,
    UserZone,
    UserZoneStore,
)
from core.users.zones import UserZones, ZoneError, parse_zone, suggest_zones

__all__ = [
    "FollowUpPreferenceStore",
    "FollowUpPreferences",
    "FollowUpState",
    "FollowUpSubject",
    "Switched",
    "UserZone",
    "UserZoneStore",
    "UserZones",
    "ZoneError",
    "parse_zone",
    "suggest_zones",
]
