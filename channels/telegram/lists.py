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
from core.commands.buttons import pack
from core.commands.results import PER_PAGE, Item, Page
from core.commands.times import local_time
from core.messages import (
    Action,
    ButtonAction,
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


def list_actions(page: Page, name: ListName, viewer: str) -> tuple[ButtonAction, ...]:
    """A row of buttons per item of the page, then Prev / Next."""
    verbs: tuple[ItemVerb, ...] = ("cancel",) if name == "reminders" else ("dismiss", "snooze")
    actions: list[ButtonAction] = [
        ItemAction(verb, item.id, page.number, viewer) for item in page.items for verb in verbs
    ]
    for number in (page.previous, page.next):
        if number is not None:
            actions.append(PageAction(name, number, viewer))
    return tuple(actions)


def commitments_text(page: Page, timezone: str, viewer: str) -> str:
    listing = page.listing
    if not listing.items:
        if listing.shared and not listing.everyones:
            return "You have no open follow-ups in this chat."
        return "No open follow-ups in this chat."
    if not listing.shared:
        head = "Open follow-ups in this chat"
    elif listing.everyones:
        head = "Open follow-ups in this chat, everyone's (you are an admin)"
    else:
        head = "Your open follow-ups in this chat"
    lines = [head + _of(page) + ":"]
    for number, item in enumerate(page.items, page.first):
        snoozed = ", snoozed" if item.status == "snoozed" else ""
        owner = f", {_owner(item.owner, viewer)}" if listing.everyones else ""
        lines.append(
            f"{number}. {item.id} — {item.subkind.replace('_', ' ')}{owner}, "
            f"due {local_time(item.due, timezone)}{snoozed}\n"
            f"   {_clip(item.text)}"
        )
    lines.append("Drop one with /dismiss ID, postpone it with /snooze ID 2h.")
    return "\n".join(lines)


def reminders_text(page: Page, timezone: str) -> str:
    """A page of reminders, times in the viewer's `timezone` (a repeating
    one names its own zone, which the viewer may not share)."""
    listing = page.listing
    if not listing.items:
        if listing.others_hidden:
            return "You have no reminders in this chat."
        return "No reminders in this chat."
    lines = ["Reminders in this chat" + _of(page) + ":"]
    for number, r in enumerate(page.items, page.first):
        lines.append(_reminder_line(number, r, timezone))
    lines.append("Cancel one with /cancel ID.")
    return "\n".join(lines)


def _reminder_line(number: int, r: Item, timezone: str) -> str:
    repeat = f", repeats ({r.repeats}, {r.timezone})" if r.repeats else ""
    return f"{number}. {r.id} — {local_time(r.due, timezone)}{repeat}\n   {_clip(r.text)}"


def _of(page: Page) -> str:
    return f" (page {page.number + 1} of {page.count})" if page.count > 1 else ""


def _clip(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= ITEM_TEXT else one_line[: ITEM_TEXT - 1] + "…"


def _owner(sender_id: str | None, viewer: str) -> str:
    """Whose a follow-up is, for an admin's listing (Telegram gives a bot no
    names for user ids it has not been sent, so the id it is)."""
    if sender_id is None:
        return "nobody's"
    return "yours" if sender_id == viewer else f"user {sender_id}"
