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

The list and reminder buttons (ItemAction, PageAction, ReminderSnooze in
core/messages.py), version 1, compact / full:

- a list row: `i<d|s|c>:<token>:<page>:<viewer>` /
  `kept:li:<dismiss|snooze|cancel>:<id>:<page>:<viewer>` (dismiss and
  snooze name a follow-up `cm_…`, cancel a reminder `rm_…`);
- a list page: `p<c|r>:<page>:<viewer>` / `kept:pg:<commitments|reminders>:<page>:<viewer>`;
- a fired reminder's snooze: `z:<token>:<firing>:<minutes>` /
  `kept:rs:<id>:<firing>:<minutes>`, minutes one of REMINDER_SNOOZE_MINUTES.

Numbers are written without leading zeros, so a payload parses back to the
one string it was made from.

A proposed time zone's buttons (core/messages.py ZoneChoice, from the
set_timezone tool), version 1:

- compact (Telegram): `t:y:<user id>:<zone>` / `t:n:<user id>:<zone>`
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
from core.messages import (
    REMINDER_SNOOZE_MINUTES,
    Action,
    ButtonAction,
    FollowUpVerb,
    ItemAction,
    ItemVerb,
    ListName,
    PageAction,
    ReminderSnooze,
    ZoneChoice,
)
from core.reminders.model import ID_PREFIX as REMINDER_PREFIX

log = logging.getLogger("kept.commands")

COMPACT_LIMIT = 64  # bytes: Telegram's callback_data
FULL_LIMIT = 100  # characters: Discord's custom_id

_TOKEN = r"[0-9a-z]+"
_ID = re.compile(rf"^{re.escape(ID_PREFIX)}{_TOKEN}\Z")
_COMPACT_VERB: dict[FollowUpVerb, str] = {"dismiss": "d", "snooze": "s"}
_COMPACT = re.compile(rf"^(?P<verb>[ds]):(?P<ids>{_TOKEN}(?:,{_TOKEN})*)\Z")
# discord.py's DynamicItem matches custom_ids against this template.
FULL_TEMPLATE = (
    rf"kept:fu:(?P<verb>dismiss|snooze):"
    rf"(?P<ids>{ID_PREFIX}{_TOKEN}(?:,{ID_PREFIX}{_TOKEN})*)"
)
_FULL = re.compile(rf"^{FULL_TEMPLATE}\Z")


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


# --- list rows, list pages, a fired reminder's snooze ---------------------------

_PAGE = r"(?:0|[1-9][0-9]{0,2})"  # at most 1,000 pages of 10
_USER = r"[1-9][0-9]{0,19}"  # Telegram and Discord user ids
_FIRING = r"[1-9][0-9]{0,8}"
_MINUTES = "|".join(str(m) for m in REMINDER_SNOOZE_MINUTES)
_ITEM_CODE: dict[ItemVerb, str] = {"dismiss": "d", "snooze": "s", "cancel": "c"}
_LIST_CODE: dict[ListName, str] = {"commitments": "c", "reminders": "r"}
_CM, _RM = re.escape(ID_PREFIX), re.escape(REMINDER_PREFIX)

_ITEM_COMPACT = re.compile(
    rf"^i(?P<verb>[dsc]):(?P<token>{_TOKEN}):(?P<page>{_PAGE}):(?P<viewer>{_USER})\Z"
)
_PAGE_COMPACT = re.compile(rf"^p(?P<list>[cr]):(?P<page>{_PAGE}):(?P<viewer>{_USER})\Z")
_SNOOZE_COMPACT = re.compile(
    rf"^z:(?P<token>{_TOKEN}):(?P<firing>{_FIRING}):(?P<minutes>{_MINUTES})\Z"
)
# discord.py's DynamicItem templates, one per payload class.
ITEM_TEMPLATE = (
    rf"kept:li:(?:(?P<fu>dismiss|snooze):(?P<cm>{_CM}{_TOKEN})|cancel:(?P<rm>{_RM}{_TOKEN}))"
    rf":(?P<page>{_PAGE}):(?P<viewer>{_USER})"
)
PAGE_TEMPLATE = rf"kept:pg:(?P<list>commitments|reminders):(?P<page>{_PAGE}):(?P<viewer>{_USER})"
SNOOZE_TEMPLATE = rf"kept:rs:(?P<id>{_RM}{_TOKEN}):(?P<firing>{_FIRING}):(?P<minutes>{_MINUTES})"
_ITEM_FULL = re.compile(rf"^{ITEM_TEMPLATE}\Z")
_PAGE_FULL = re.compile(rf"^{PAGE_TEMPLATE}\Z")
_SNOOZE_FULL = re.compile(rf"^{SNOOZE_TEMPLATE}\Z")


def _item_prefix(verb: ItemVerb) -> str:
    return REMINDER_PREFIX if verb == "cancel" else ID_PREFIX


def _fits(data: str, limit: int, *, encoded: bool) -> str | None:
    size = len(data.encode()) if encoded else len(data)
    return data if size <= limit else None


def encode_compact(action: ButtonAction) -> str | None:
    """Telegram's callback_data for any button; None when it cannot be
    encoded (an id that could not have been issued, or too long)."""
    if isinstance(action, Action):
        return to_compact(action)
    if isinstance(action, ZoneChoice):
        return zone_to_compact(action)
    data = encode_full(action)
    if data is None:  # the same checks: only a well-formed action is encoded
        return None
    match action:
        case ItemAction(verb, item_id, page, viewer):
            token = item_id.removeprefix(_item_prefix(verb))
            data = f"i{_ITEM_CODE[verb]}:{token}:{page}:{viewer}"
        case PageAction(listing, page, viewer):
            data = f"p{_LIST_CODE[listing]}:{page}:{viewer}"
        case ReminderSnooze(reminder_id, firing, minutes):
            token = reminder_id.removeprefix(REMINDER_PREFIX)
            data = f"z:{token}:{firing}:{minutes}"
    return _fits(data, COMPACT_LIMIT, encoded=True)


def decode_compact(data: str | None) -> ButtonAction | None:
    """Any button of ours from Telegram's callback_data; None for anything else."""
    text = data or ""
    if (match := _ITEM_COMPACT.match(text)) is not None:
        verb = next(v for v, code in _ITEM_CODE.items() if code == match["verb"])
        item_id = _item_prefix(verb) + match["token"]
        return ItemAction(verb, item_id, int(match["page"]), match["viewer"])
    if (match := _PAGE_COMPACT.match(text)) is not None:
        listing = next(n for n, code in _LIST_CODE.items() if code == match["list"])
        return PageAction(listing, int(match["page"]), match["viewer"])
    if (match := _SNOOZE_COMPACT.match(text)) is not None:
        reminder_id = REMINDER_PREFIX + match["token"]
        return ReminderSnooze(reminder_id, int(match["firing"]), int(match["minutes"]))
    return from_compact(data) or zone_from_compact(data)


def encode_full(action: ButtonAction) -> str | None:
    """Discord's custom_id for any button; None when it cannot be encoded."""
    match action:
        case Action():
            return to_full(action)
        case ZoneChoice():
            return zone_to_full(action)
        case ItemAction(verb, item_id, page, viewer):
            data = f"kept:li:{verb}:{item_id}:{page}:{viewer}"
            parsed = decode_full(data)
        case PageAction(listing, page, viewer):
            data = f"kept:pg:{listing}:{page}:{viewer}"
            parsed = decode_full(data)
        case ReminderSnooze(reminder_id, firing, minutes):
            data = f"kept:rs:{reminder_id}:{firing}:{minutes}"
            parsed = decode_full(data)
        case _:
            return None
    # Encoded only when it parses back to itself: an id, page or user that
    # could not have been issued gets no button.
    if parsed != action:
        return None
    return _fits(data, FULL_LIMIT, encoded=False)


def decode_full(data: str | None) -> ButtonAction | None:
    """Any button of ours from Discord's custom_id; None for anything else."""
    text = data or ""
    if (match := _ITEM_FULL.match(text)) is not None:
        verb: ItemVerb = "cancel" if match["rm"] else match["fu"]  # type: ignore[assignment]
        item_id = match["rm"] or match["cm"]
        return ItemAction(verb, item_id, int(match["page"]), match["viewer"])
    if (match := _PAGE_FULL.match(text)) is not None:
        listing: ListName = match["list"]  # type: ignore[assignment]
        return PageAction(listing, int(match["page"]), match["viewer"])
    if (match := _SNOOZE_FULL.match(text)) is not None:
        return ReminderSnooze(match["id"], int(match["firing"]), int(match["minutes"]))
    return from_full(data) or zone_from_full(data)


# --- a proposed time zone's Yes / No -------------------------------------------

_ZONE_USER = r"[0-9A-Za-z_-]{1,40}"
_ZONE = r"[A-Za-z0-9/_+-]{1,60}"
_COMPACT_ZONE = re.compile(rf"^t:(?P<answer>[yn]):(?P<user>{_ZONE_USER}):(?P<zone>{_ZONE})\Z")
ZONE_TEMPLATE = rf"kept:tz:(?P<answer>yes|no):(?P<user>{_ZONE_USER}):(?P<zone>{_ZONE})"
_FULL_ZONE = re.compile(rf"^{ZONE_TEMPLATE}\Z")


def _zone_fits(choice: ZoneChoice) -> bool:
    return bool(re.fullmatch(_ZONE_USER, choice.user_id) and re.fullmatch(_ZONE, choice.timezone))


def zone_to_compact(choice: ZoneChoice) -> str | None:
    """Telegram's callback_data for a zone button; None when it cannot be
    carried (then the reply goes without buttons: /timezone still works)."""
    data = f"t:{'y' if choice.accept else 'n'}:{choice.user_id}:{choice.timezone}"
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
