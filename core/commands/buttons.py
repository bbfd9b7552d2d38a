"""A follow-up button's payload: encoded into and parsed from the platform's
button data in this one place, for both platforms.

A press arrives as a string the platform kept for us (Telegram's
`callback_data`, at most 64 bytes; Discord's `custom_id`, at most 100
characters), possibly from a message sent before a restart or by an older
version. Each format below is version 1 of its platform's payload; a string
in any other shape parses to None ("this button no longer works"), never to
a guess. Ids are validated here, so an adapter never hands core a forged one
that could not have been issued.

- compact (Telegram): `d:<ids>` / `s:<ids>`, ids without their `cm_` prefix,
  comma-separated, as many as fit (four standard ids).
- full (Discord): `kept:fu:dismiss:cm_…,cm_…` / `kept:fu:snooze:…`; a
  check-in naming too many ids to fit gets no buttons.

A proposed time zone's buttons (core/messages.py ZoneChoice, from the
set_timezone tool), version 1:

- compact (Telegram): `z:y:<user id>:<zone>` / `z:n:<user id>:<zone>`
- full (Discord): `kept:tz:yes:<user id>:<zone>` / `kept:tz:no:…`

The zone is carried as the model proposed it and validated when pressed
(core/commands/timezone.py), so a name tzdata no longer knows is answered,
not guessed.
"""

from __future__ import annotations

import logging
import re

from core.commitments.model import ID_PREFIX
from core.logs import event
from core.messages import Action, FollowUpVerb, ZoneChoice

log = logging.getLogger("kept.commands")

COMPACT_LIMIT = 64  # bytes: Telegram's callback_data
FULL_LIMIT = 100  # characters: Discord's custom_id

_TOKEN = r"[0-9a-z]+"
_ID = re.compile(rf"^{re.escape(ID_PREFIX)}{_TOKEN}$")
_COMPACT_VERB: dict[FollowUpVerb, str] = {"dismiss": "d", "snooze": "s"}
_COMPACT = re.compile(rf"^(?P<verb>[ds]):(?P<ids>{_TOKEN}(?:,{_TOKEN})*)$")
# discord.py's DynamicItem matches custom_ids against this template.
FULL_TEMPLATE = (
    rf"kept:fu:(?P<verb>dismiss|snooze):"
    rf"(?P<ids>{ID_PREFIX}{_TOKEN}(?:,{ID_PREFIX}{_TOKEN})*)"
)
_FULL = re.compile(rf"^{FULL_TEMPLATE}$")


def valid_ids(ids: tuple[str, ...]) -> tuple[str, ...]:
    """The ids that could have been issued, once each, in order."""
    return tuple(i for i in dict.fromkeys(ids) if _ID.match(i))


def to_compact(action: Action) -> str | None:
    """Telegram's callback_data for this action, None when it names no valid id."""
    prefix = f"{_COMPACT_VERB[action.verb]}:"
    ids = valid_ids(action.commitment_ids)
    packed = ""
    for commitment_id in ids:
        token = commitment_id.removeprefix(ID_PREFIX)
        candidate = f"{packed},{token}" if packed else token
        if len((prefix + candidate).encode()) > COMPACT_LIMIT:
            # Rare; the rest stay reachable by /dismiss.
            event(log, logging.WARNING, "followup_buttons_truncated", ids=len(ids))
            break
        packed = candidate
    return prefix + packed if packed else None


def from_compact(data: str | None) -> Action | None:
    match = _COMPACT.match(data or "")
    if match is None:
        return None
    verb = next(v for v, code in _COMPACT_VERB.items() if code == match["verb"])
    return Action(verb, tuple(ID_PREFIX + token for token in match["ids"].split(",")))


def to_full(action: Action) -> str | None:
    """Discord's custom_id for this action; None when it names no valid id or
    too many to fit."""
    ids = valid_ids(action.commitment_ids)
    if not ids:
        return None
    data = f"kept:fu:{action.verb}:{','.join(ids)}"
    if len(data) > FULL_LIMIT:
        event(
            log,
            logging.WARNING,
            "followup_without_buttons",
            commitments=",".join(ids),
            reason="too many ids for one button",
            action="none needed: /commitments dismiss or snooze reaches them",
        )
        return None
    return data


def from_full(data: str | None) -> Action | None:
    match = _FULL.match(data or "")
    if match is None:
        return None
    verb: FollowUpVerb = "dismiss" if match["verb"] == "dismiss" else "snooze"
    return Action(verb, tuple(match["ids"].split(",")))


_USER = r"[0-9A-Za-z_-]{1,40}"
_ZONE = r"[A-Za-z0-9/_+-]{1,60}"
_COMPACT_ZONE = re.compile(rf"^z:(?P<answer>[yn]):(?P<user>{_USER}):(?P<zone>{_ZONE})$")
ZONE_TEMPLATE = rf"kept:tz:(?P<answer>yes|no):(?P<user>{_USER}):(?P<zone>{_ZONE})"
_FULL_ZONE = re.compile(rf"^{ZONE_TEMPLATE}$")


def _zone_fits(choice: ZoneChoice) -> bool:
    return bool(re.fullmatch(_USER, choice.user_id) and re.fullmatch(_ZONE, choice.timezone))


def zone_to_compact(choice: ZoneChoice) -> str | None:
    """Telegram's callback_data for a zone button; None when it cannot be
    carried (then the reply goes without buttons: /timezone still works)."""
    data = f"z:{'y' if choice.accept else 'n'}:{choice.user_id}:{choice.timezone}"
    if not _zone_fits(choice) or len(data.encode()) > COMPACT_LIMIT:
        return None
    return data


def zone_from_compact(data: str | None) -> ZoneChoice | None:
    match = _COMPACT_ZONE.match(data or "")
    if match is None:
        return None
    return ZoneChoice(match["user"], match["zone"], match["answer"] == "y")


def zone_to_full(choice: ZoneChoice) -> str | None:
    """Discord's custom_id for a zone button; None when it cannot be carried."""
    data = f"kept:tz:{'yes' if choice.accept else 'no'}:{choice.user_id}:{choice.timezone}"
    if not _zone_fits(choice) or len(data) > FULL_LIMIT:
        return None
    return data


def zone_from_full(data: str | None) -> ZoneChoice | None:
    match = _FULL_ZONE.match(data or "")
    if match is None:
        return None
    return ZoneChoice(match["user"], match["zone"], match["answer"] == "yes")
