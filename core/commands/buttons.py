"""Button payloads: one declarative class per action, each with `pack` and
`unpack`, in one compact format for both platforms (the idea of aiogram's
CallbackData).

A press arrives as a string the platform kept for us (Telegram's
`callback_data`, at most 64 bytes; Discord's `custom_id`, at most 100
characters), possibly from a message sent before a restart or by an older
version. Every payload is packed to fit 64 bytes, so the same string serves
both platforms. A string in any other shape unpacks to None ("this button no
longer works"), never to a guess. Ids are validated here, so an adapter
never hands core a forged one that could not have been issued.

The format (version 1 of Telegram's payloads, which Discord now uses too):

- a check-in's follow-ups: `d:<tokens>` / `s:<tokens>`, ids without their
  `cm_` prefix, comma-separated, as many as fit (four standard ids);
- a list row: `i<d|s|c>:<token>:<page>:<viewer>` (dismiss and snooze name a
  follow-up `cm_…`, cancel a reminder `rm_…`);
- a list page: `p<c|r>:<page>:<viewer>`;
- a fired reminder's snooze: `z:<token>:<firing>:<minutes>`, minutes one of
  REMINDER_SNOOZE_MINUTES;
- a proposed time zone: `t:<y|n>:<user id>:<zone>`; the zone is carried as
  the model proposed it and validated when pressed (core/commands/timezone.py);
- a /forget prompt's Erase / Cancel: `f:<y|n>:<user id>:<issued>`, issued in
  Unix seconds, checked when pressed (core/commands/rights.py).

Numbers are written without leading zeros, so a payload unpacks to the one
action it was packed from. Discord's buttons sent before this format carry
`kept:fu:…`, `kept:li:…`, `kept:pg:…`, `kept:rs:…` and `kept:tz:…`
(each class's `legacy`): they still unpack, and are never packed again.
"""

from __future__ import annotations

import logging
import re
from typing import ClassVar, Generic, TypeVar

from core.commitments.model import ID_PREFIX as FOLLOWUP_PREFIX
from core.logs import event
from core.messages import (
    REMINDER_SNOOZE_MINUTES,
    Action,
    ButtonAction,
    FollowUpVerb,
    ForgetChoice,
    ItemAction,
    ItemVerb,
    ListName,
    PageAction,
    ReminderSnooze,
    ZoneChoice,
)
from core.reminders.model import ID_PREFIX as REMINDER_PREFIX

log = logging.getLogger("kept.commands")

LIMIT = 64  # bytes: Telegram's callback_data (Discord's custom_id holds 100 characters)

A = TypeVar("A", bound=ButtonAction)

_TOKEN = r"[0-9a-z]+"
_PAGE = r"(?:0|[1-9][0-9]{0,2})"  # at most 1,000 pages of 10
_USER = r"[1-9][0-9]{0,19}"  # Telegram and Discord user ids
_FIRING = r"[1-9][0-9]{0,8}"
_MINUTES = "|".join(str(m) for m in REMINDER_SNOOZE_MINUTES)
_CM, _RM = re.escape(FOLLOWUP_PREFIX), re.escape(REMINDER_PREFIX)
_ZONE_USER = r"[0-9A-Za-z_-]{1,40}"
_ZONE = r"[A-Za-z0-9/_+-]{1,60}"
_FOLLOWUP_ID = re.compile(rf"{_CM}{_TOKEN}")
_ISSUED = r"[1-9][0-9]{0,11}"  # Unix seconds


def _group(match: re.Match[str], name: str) -> str | None:
    """A named group of whichever format matched (the others lack it)."""
    return match.groupdict().get(name)


def _code_of(codes: dict[str, str], code: str) -> str:
    return next(name for name, c in codes.items() if c == code)


class Payload(Generic[A]):
    """One action's payload. A subclass declares the action it carries, its
    pattern (named groups), how an action is written (`write`) and read
    back (`read`), and the patterns of formats older buttons carry."""

    action: ClassVar[type]
    pattern: ClassVar[str]
    legacy: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def write(cls, action: A) -> str:
        raise NotImplementedError

    @classmethod
    def read(cls, match: re.Match[str]) -> A:
        raise NotImplementedError

    @classmethod
    def pack(cls, action: A) -> str | None:
        """The payload for `action`; None when it cannot be carried (an id,
        page or user that could not have been issued, or too long): the
        message then goes without that button."""
        data = cls.write(action)
        if len(data.encode()) > LIMIT or cls.unpack(data) != action:
            return None
        return data

    @classmethod
    def unpack(cls, data: str | None) -> A | None:
        text = data or ""
        for source in (cls.pattern, *cls.legacy):
            match = re.fullmatch(source, text)
            if match is not None:
                return cls.read(match)
        return None

    @classmethod
    def template(cls) -> str:
        """One regex for every format this class unpacks (discord.py's
        DynamicItem template), its groups unnamed."""
        sources = (re.sub(r"\(\?P<\w+>", "(?:", s) for s in (cls.pattern, *cls.legacy))
        return "|".join(f"(?:{s})" for s in sources)


class FollowUpPayload(Payload[Action]):
    """A check-in's Dismiss / Snooze 1 day."""

    action = Action
    _verbs: ClassVar[dict[str, str]] = {"dismiss": "d", "snooze": "s"}
    pattern = rf"(?P<verb>[ds]):(?P<tokens>{_TOKEN}(?:,{_TOKEN})*)"
    legacy = (rf"kept:fu:(?P<full>dismiss|snooze):(?P<ids>{_CM}{_TOKEN}(?:,{_CM}{_TOKEN})*)",)

    @classmethod
    def pack(cls, action: Action) -> str | None:
        """As many of the ids as fit; the rest stay reachable by /dismiss."""
        prefix = f"{cls._verbs[action.verb]}:"
        ids = valid_ids(action.commitment_ids)
        packed = ""
        for commitment_id in ids:
            token = commitment_id.removeprefix(FOLLOWUP_PREFIX)
            candidate = f"{packed},{token}" if packed else token
            if len((prefix + candidate).encode()) > LIMIT:
                event(log, logging.WARNING, "followup_buttons_truncated", ids=len(ids))
                break
            packed = candidate
        return prefix + packed if packed else None

    @classmethod
    def read(cls, match: re.Match[str]) -> Action:
        if _group(match, "full"):
            verb: FollowUpVerb = "dismiss" if match["full"] == "dismiss" else "snooze"
            return Action(verb, tuple(match["ids"].split(",")))
        verb = "dismiss" if match["verb"] == "d" else "snooze"
        return Action(verb, tuple(FOLLOWUP_PREFIX + t for t in match["tokens"].split(",")))


class ListItemPayload(Payload[ItemAction]):
    """A list row's Dismiss / Snooze / Cancel."""

    action = ItemAction
    _verbs: ClassVar[dict[str, str]] = {"dismiss": "d", "snooze": "s", "cancel": "c"}
    pattern = rf"i(?P<verb>[dsc]):(?P<token>{_TOKEN}):(?P<page>{_PAGE}):(?P<viewer>{_USER})"
    legacy = (
        rf"kept:li:(?:(?P<fu>dismiss|snooze):(?P<cm>{_CM}{_TOKEN})|cancel:(?P<rm>{_RM}{_TOKEN}))"
        rf":(?P<page>{_PAGE}):(?P<viewer>{_USER})",
    )

    @staticmethod
    def _prefix(verb: ItemVerb) -> str:
        return REMINDER_PREFIX if verb == "cancel" else FOLLOWUP_PREFIX

    @classmethod
    def write(cls, action: ItemAction) -> str:
        token = action.item_id.removeprefix(cls._prefix(action.verb))
        return f"i{cls._verbs[action.verb]}:{token}:{action.page}:{action.viewer}"

    @classmethod
    def pack(cls, action: ItemAction) -> str | None:
        # The id must carry its verb's prefix: a cancel names a reminder.
        if not action.item_id.startswith(cls._prefix(action.verb)):
            return None
        return super().pack(action)

    @classmethod
    def read(cls, match: re.Match[str]) -> ItemAction:
        page, viewer = int(match["page"]), match["viewer"]
        if _group(match, "verb"):
            verb: ItemVerb = _code_of(cls._verbs, match["verb"])  # type: ignore[assignment]
            return ItemAction(verb, cls._prefix(verb) + match["token"], page, viewer)
        if _group(match, "rm"):
            return ItemAction("cancel", match["rm"], page, viewer)
        return ItemAction(match["fu"], match["cm"], page, viewer)


class ListPagePayload(Payload[PageAction]):
    """A list's Prev / Next."""

    action = PageAction
    _lists: ClassVar[dict[str, str]] = {"commitments": "c", "reminders": "r"}
    pattern = rf"p(?P<list>[cr]):(?P<page>{_PAGE}):(?P<viewer>{_USER})"
    legacy = (rf"kept:pg:(?P<full>commitments|reminders):(?P<page>{_PAGE}):(?P<viewer>{_USER})",)

    @classmethod
    def write(cls, action: PageAction) -> str:
        return f"p{cls._lists[action.listing]}:{action.page}:{action.viewer}"

    @classmethod
    def read(cls, match: re.Match[str]) -> PageAction:
        listing: ListName = _group(match, "full") or _code_of(cls._lists, match["list"])  # type: ignore[assignment]
        return PageAction(listing, int(match["page"]), match["viewer"])


class ReminderSnoozePayload(Payload[ReminderSnooze]):
    """A fired reminder's Snooze 10 min / 1 h."""

    action = ReminderSnooze
    pattern = rf"z:(?P<token>{_TOKEN}):(?P<firing>{_FIRING}):(?P<minutes>{_MINUTES})"
    legacy = (rf"kept:rs:(?P<id>{_RM}{_TOKEN}):(?P<firing>{_FIRING}):(?P<minutes>{_MINUTES})",)

    @classmethod
    def write(cls, action: ReminderSnooze) -> str:
        token = action.reminder_id.removeprefix(REMINDER_PREFIX)
        return f"z:{token}:{action.firing}:{action.minutes}"

    @classmethod
    def pack(cls, action: ReminderSnooze) -> str | None:
        if not action.reminder_id.startswith(REMINDER_PREFIX):
            return None
        return super().pack(action)

    @classmethod
    def read(cls, match: re.Match[str]) -> ReminderSnooze:
        reminder_id = _group(match, "id") or REMINDER_PREFIX + match["token"]
        return ReminderSnooze(reminder_id, int(match["firing"]), int(match["minutes"]))


class ZoneChoicePayload(Payload[ZoneChoice]):
    """The set_timezone tool's "Yes, use <zone>" / "No"."""

    action = ZoneChoice
    pattern = rf"t:(?P<answer>[yn]):(?P<user>{_ZONE_USER}):(?P<zone>{_ZONE})"
    legacy = (rf"kept:tz:(?P<full>yes|no):(?P<user>{_ZONE_USER}):(?P<zone>{_ZONE})",)

    @classmethod
    def write(cls, action: ZoneChoice) -> str:
        return f"t:{'y' if action.accept else 'n'}:{action.user_id}:{action.timezone}"

    @classmethod
    def read(cls, match: re.Match[str]) -> ZoneChoice:
        accept = (_group(match, "full") or match["answer"]) in ("y", "yes")
        return ZoneChoice(match["user"], match["zone"], accept)


class ForgetPayload(Payload[ForgetChoice]):
    """A /forget prompt's Erase / Cancel: whose data, and when it was asked."""

    action = ForgetChoice
    pattern = rf"f:(?P<answer>[yn]):(?P<user>{_USER}):(?P<issued>{_ISSUED})"

    @classmethod
    def write(cls, action: ForgetChoice) -> str:
        return f"f:{'y' if action.erase else 'n'}:{action.user_id}:{action.issued}"

    @classmethod
    def read(cls, match: re.Match[str]) -> ForgetChoice:
        return ForgetChoice(match["user"], int(match["issued"]), match["answer"] == "y")


PAYLOADS: tuple[type[Payload[ButtonAction]], ...] = (  # type: ignore[assignment]
    FollowUpPayload,
    ListItemPayload,
    ListPagePayload,
    ReminderSnoozePayload,
    ZoneChoicePayload,
    ForgetPayload,
)


def payload_of(action: ButtonAction) -> type[Payload[ButtonAction]]:
    return next(p for p in PAYLOADS if isinstance(action, p.action))


def pack(action: ButtonAction) -> str | None:
    """Any button's payload; None when it cannot be carried."""
    return payload_of(action).pack(action)


def unpack(data: str | None) -> ButtonAction | None:
    """Any button of ours, in the current format or an older one; None for anything else."""
    for payload in PAYLOADS:
        action = payload.unpack(data)
        if action is not None:
            return action
    return None


def valid_ids(ids: tuple[str, ...]) -> tuple[str, ...]:
    """The follow-up ids that could have been issued, once each, in order."""
    return tuple(i for i in dict.fromkeys(ids) if _FOLLOWUP_ID.fullmatch(i))
