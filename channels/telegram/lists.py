"""Telegram's /commitments and /reminders lists and every inline keyboard.

A list is one message: a page of up to ten numbered items, a row of buttons
per item (Dismiss / Snooze 1 day for a follow-up, Cancel for a reminder)
and Prev / Next when there is more. A press re-renders the same message
(editMessageText with the new keyboard). What is listed and what a press
may change is decided in core/commands; this module only phrases it.
"""

from __future__ import annotations

from collections.abc import Sequence

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from channels.telegram.send import LABELS
from core.commands import wording
from core.commands.buttons import pack
from core.commands.results import PER_PAGE, Item, Page
from core.commands.times import local_time
from core.messages import (
    Action,
    ButtonAction,
    ForgetChoice,
    ItemAction,
    ItemVerb,
    ListName,
    PageAction,
    ReminderSnooze,
    ZoneChoice,
)

ITEM_LABELS: dict[ItemVerb, str] = {
    "dismiss": "Dismiss",
    "snooze": "Snooze 1 day",
    "cancel": "Cancel",
}
# An item's text in a list: enough to recognise it, and ten fit in one message.
ITEM_TEXT = 200


def forget_label(erase: bool) -> str:
    return "Erase" if erase else "Cancel"


def snooze_label(minutes: int) -> str:
    return f"Snooze {minutes // 60} h" if minutes % 60 == 0 else f"Snooze {minutes} min"


def keyboard(actions: Sequence[ButtonAction]) -> InlineKeyboardMarkup | None:
    """The inline keyboard for a message's actions: a check-in's, a fired
    reminder's or a proposed time zone's buttons in one row, a list's one row
    per item and Prev / Next last. None when nothing can be encoded
    (core/commands/buttons.py)."""
    rows: list[list[InlineKeyboardButton]] = []
    single: list[InlineKeyboardButton] = []
    pages: list[InlineKeyboardButton] = []
    item_rows: dict[str, list[InlineKeyboardButton]] = {}
    shown = next((a.page for a in actions if isinstance(a, ItemAction)), 0)
    for action in actions:
        data = pack(action)
        if data is None:
            continue
        match action:
            case Action(verb):
                single.append(InlineKeyboardButton(LABELS[verb], callback_data=data))
            case ReminderSnooze(minutes=minutes):
                single.append(InlineKeyboardButton(snooze_label(minutes), callback_data=data))
            case ZoneChoice(timezone=zone, accept=accept):
                label = f"Yes, use {zone}" if accept else "No"
                single.append(InlineKeyboardButton(label, callback_data=data))
            case ForgetChoice(erase=erase):
                single.append(InlineKeyboardButton(forget_label(erase), callback_data=data))
            case ItemAction(verb, item_id, page):
                row = item_rows.setdefault(item_id, [])
                number = page * PER_PAGE + len(item_rows)
                label = f"{number}. {ITEM_LABELS[verb]}"
                row.append(InlineKeyboardButton(label, callback_data=data))
            case PageAction(page=page):
                arrow = "◀ Prev" if page < shown else "Next ▶"
                pages.append(InlineKeyboardButton(arrow, callback_data=data))
    if single:
        rows.append(single)
    rows += item_rows.values()
    if pages:
        rows.append(pages)
    return InlineKeyboardMarkup(rows) if rows else None


def list_text(page: Page, name: ListName, timezone: str, viewer: str) -> str:
    """A list page's message, times in the viewer's `timezone` (a repeating
    reminder names its own zone, which the viewer may not share)."""
    listing = page.listing
    heading = wording.list_heading(page, name)
    if not listing.items:
        return heading
    lines = [heading]
    for number, item in enumerate(page.items, page.first):
        if name == "reminders":
            lines.append(_reminder_line(number, item, timezone))
        else:
            lines.append(_commitment_line(number, item, timezone, viewer, listing.everyones))
    lines.append(wording.list_footer(name, wording.Style(when=str)))
    return "\n".join(lines)


def _commitment_line(number: int, item: Item, timezone: str, viewer: str, owner: bool) -> str:
    snoozed = ", snoozed" if item.status == "snoozed" else ""
    whose = f", {_owner(item.owner, viewer)}" if owner else ""
    return (
        f"{number}. {item.id} — {item.subkind.replace('_', ' ')}{whose}, "
        f"due {local_time(item.due, timezone)}{snoozed}\n"
        f"   {_clip(item.text)}"
    )


def _reminder_line(number: int, r: Item, timezone: str) -> str:
    repeat = f", repeats ({r.repeats}, {r.timezone})" if r.repeats else ""
    return f"{number}. {r.id} — {local_time(r.due, timezone)}{repeat}\n   {_clip(r.text)}"


def _clip(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= ITEM_TEXT else one_line[: ITEM_TEXT - 1] + "…"


def _owner(sender_id: str | None, viewer: str) -> str:
    """Whose a follow-up is, for an admin's listing (Telegram gives a bot no
    names for user ids it has not been sent, so the id it is)."""
    if sender_id is None:
        return "nobody's"
    return "yours" if sender_id == viewer else f"user {sender_id}"
