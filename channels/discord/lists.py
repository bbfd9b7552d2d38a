"""Discord's `/commitments list` and `/reminders list` with buttons, and the
presses on them.

A list is an ephemeral answer (only its asker sees or presses it): a page
of up to ten numbered items, a button per action per item (Dismiss /
Snooze for a follow-up, Cancel for a reminder) and Prev / Next when there
is more. A press re-renders the same message (an interaction message edit).
What is listed and what a press may change is decided in core/commands;
this module only phrases it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

import discord

from channels.discord.scope import NOT_ALLOWED, Gate, chat_access, interaction_chat
from channels.discord.views import MESSAGE_LIMIT, buttons_view
from core.clock import Clock
from core.commands import Change, FollowUpCommands, Item, Outcome, ReminderCommands
from core.commands.lists import ListCommands
from core.commands.results import Page
from core.commitments.service import CommitmentService
from core.config.model import KeptConfig
from core.logs import event
from core.messages import ButtonAction, ItemAction, ItemVerb, ListName, PageAction, ReminderSnooze
from core.reminders import ReminderService

log = logging.getLogger("kept.discord")


def list_name(action: ItemAction | PageAction) -> ListName:
    """Which list a list's button belongs to."""
    if isinstance(action, PageAction):
        return action.listing
    return "reminders" if action.verb == "cancel" else "commitments"


def list_actions(page: Page, name: ListName, viewer: str) -> tuple[ButtonAction, ...]:
    """A button per action per item of the page, then Prev / Next."""
    verbs: tuple[ItemVerb, ...] = ("cancel",) if name == "reminders" else ("dismiss", "snooze")
    actions: list[ButtonAction] = [
        ItemAction(verb, item.id, page.number, viewer) for item in page.items for verb in verbs
    ]
    for number in (page.previous, page.next):
        if number is not None:
            actions.append(PageAction(name, number, viewer))
    return tuple(actions)


def list_text(page: Page, name: ListName) -> str:
    listing = page.listing
    if not listing.items:
        if name == "reminders":
            if listing.others_hidden:
                return "No reminders of yours in this chat."
            return "No reminders in this chat."
        return "No pending follow-ups for you in this chat."
    of = f" (page {page.number + 1} of {page.count})" if page.count > 1 else ""
    if name == "reminders":
        lines = [f"Reminders in this chat{of}:"]
        lines += [f"{n}. {reminder_line(r)}" for n, r in enumerate(page.items, page.first)]
    else:
        lines = [f"Pending follow-ups in this chat{of}:"]
        lines += [
            f"{n}. {commitment_line(item, owner=listing.everyones)}"
            for n, item in enumerate(page.items, page.first)
        ]
    return "\n".join(lines)


def list_message(
    page: Page, name: ListName, viewer: str, note: str = ""
) -> tuple[str, discord.ui.View | None]:
    """A list page's content (with what a press did under it) and buttons."""
    content = list_text(page, name)
    suffix = f"\n\n-# {note}" if note else ""
    content = content[: MESSAGE_LIMIT - len(suffix)] + suffix
    return content, buttons_view(list_actions(page, name, viewer))


def commitment_line(item: Item, *, owner: bool = False) -> str:
    state = " (snoozed)" if item.status == "snoozed" else ""
    # A mention in an ephemeral answer shows the member's name and pings nobody.
    whose = (f" for <@{item.owner}>" if item.owner else " for nobody") if owner else ""
    return f"`{item.id}`{whose} {when(item.due)}{state}: {quote(item.text, LIST_TEXT)}"


def reminder_line(r: Item) -> str:
    repeats = f" (repeats `{r.repeats}`)" if r.repeats else ""
    return f"`{r.id}` {when(r.due)}{repeats}: {quote(r.text, LIST_TEXT)}"


# An item's text in a list: ten lines, their ids and times, fit in 2,000 characters.
LIST_TEXT = 90


def quote(text: str, limit: int = 120) -> str:
    one_line = " ".join(text.split())
    clipped = one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"
    return discord.utils.escape_mentions(clipped)


def when(instant: datetime) -> str:
    return f"<t:{int(instant.timestamp())}:R>"


class ListPresses:
    """What a press on a list's button, or on a fired reminder's Snooze,
    does (the bot's `kept_lists`)."""

    def __init__(
        self,
        *,
        commitments: CommitmentService,
        reminders: ReminderService,
        config: Callable[[], KeptConfig],
        clock: Clock,
        gate: Gate,
    ) -> None:
        self._commitments = commitments
        self._reminders = reminders
        self._config = config
        self._clock = clock
        self._gate = gate

    async def lists(self, interaction: discord.Interaction) -> ListCommands | None:
        """The lists as the presser may see them here; None when they may not
        use the bot here."""
        ref = interaction_chat(interaction)
        if ref is None or not await self._gate.allowed(
            interaction.user, interaction.guild_id, interaction.client
        ):
            return None
        agent_id = self._config().channels.discord.agent
        access = chat_access(interaction, ref, agent_id)
        reminders = self._reminders
        return ListCommands(
            FollowUpCommands(self._commitments, access),
            ReminderCommands(reminders.store, self._clock, access, service=reminders),
            access,
        )

    async def press(
        self, interaction: discord.Interaction, action: ItemAction | PageAction
    ) -> None:
        lists = await self.lists(interaction)
        if lists is None:
            await _ephemeral(interaction, NOT_ALLOWED)
            return
        answer = await lists.press(action)
        name = list_name(action)
        if answer.page is None:
            await _ephemeral(interaction, f"This list is someone else's: use /{name} list.")
            return
        if answer.change is not None:
            event(
                log,
                logging.INFO,
                "discord_list_press",
                verb=action.verb if isinstance(action, ItemAction) else "page",
                id=answer.change.id,
                outcome=str(answer.change.outcome),
                user=interaction.user.id,
            )
        content, view = list_message(answer.page, name, lists.viewer, _note(answer.change))
        await interaction.response.edit_message(content=content, view=view)

    async def snooze(self, interaction: discord.Interaction, action: ReminderSnooze) -> None:
        """A fired reminder's Snooze: it comes back once after the delay; the
        message says so and loses its buttons."""
        lists = await self.lists(interaction)
        if lists is None:
            await _ephemeral(interaction, NOT_ALLOWED)
            return
        change = await lists.reminders.snooze_fired(action)
        if change.outcome is Outcome.NOT_FOUND:
            await _ephemeral(interaction, "That reminder was not found in this chat.")
            return
        if not change.done or change.item is None:
            await _ephemeral(interaction, f"Nothing changed: {change.reason}.")
            return
        event(
            log,
            logging.INFO,
            "discord_reminder_snoozed",
            reminder=change.id,
            minutes=action.minutes,
            user=interaction.user.id,
        )
        name = discord.utils.escape_mentions(interaction.user.display_name)
        note = f"Snoozed by {name} until {when(change.item.due)}."
        message = interaction.message
        if message is None:
            await _ephemeral(interaction, note)
            return
        suffix = f"\n\n-# {note}"
        content = message.content[: MESSAGE_LIMIT - len(suffix)].rstrip() + suffix
        await interaction.response.edit_message(content=content, view=None)


def _note(change: Change | None) -> str:
    """What a row's button did, under the re-rendered list."""
    if change is None:
        return ""
    if change.outcome is Outcome.NOT_FOUND:
        return f"`{change.id}` was not found in this chat."
    if not change.done:
        return f"`{change.id}`: nothing changed ({change.reason})."
    item = change.item
    if item is None or item.kind == "reminder":
        return f"Cancelled `{change.id}`."
    if item.status == "dismissed":
        return f"Dismissed `{change.id}`."
    return f"Snoozed `{change.id}` until {when(item.due)}."


async def _ephemeral(interaction: discord.Interaction, text: str) -> None:
    await interaction.response.send_message(text, ephemeral=True)
