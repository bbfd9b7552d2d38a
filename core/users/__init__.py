"""Per-user settings, keyed by (platform, user id): today a user's own time
zone, which reminders, follow-up windows, quiet hours, the chat prompt and
every time shown to that user are read in (the agent's `timezone` when the
user has none).

store.py  the UserZoneStore port and its record
zones.py  IANA names: validation, suggestions; UserZones, the resolver
"""

from core.users.store import UserZone, UserZoneStore
from core.users.zones import UserZones, ZoneError, parse_zone, suggest_zones

__all__ = ["UserZone", "UserZoneStore", "UserZones", "ZoneError", "parse_zone", "suggest_zones"]
