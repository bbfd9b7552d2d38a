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

from channels.discord.pressable import MESSAGE_LIMIT
from channels.discord.scope import NOT_ALLOWED, PLATFORM, Gate, chat_access, interaction_chat
from channels.discord.views import buttons_view
from core.clock import Clock
from core.commands import Change, Item, wording
from core.commands.lists import ListCommands, list_actions, list_name
from core.commands.registry import COMMANDS, Invocation
from core.commands.results import Page
from core.commitments.service import CommitmentService
from core.config.model import KeptConfig
from core.logs import event
from core.messages import ItemAction, ListName, PageAction, ReminderSnooze
from core.reminders import ReminderService

log = logging.getLogger("kept.discord")


def code(text: str) -> str:
    """An id in a code span (a typed one may hold anything: clipped, no backticks)."""
    return f"`{text.replace('`', '')[:60]}`"


def command_name(name: str) -> str:
    """How a registered command is typed here: `/commitments dismiss`."""
    command = COMMANDS.get(name)
    path = command.discord if command is not None and command.discord else (name,)
    return "/" + " ".join(path)


def when(instant: datetime) -> str:
    return f"<t:{int(instant.timestamp())}:R>"


# Discord's way of showing ids, times and commands in core's sentences.
STYLE = wording.Style(when=when, code=code, command=command_name)


def list_text(page: Page, name: ListName) -> str:
    listing = page.listing
    heading = wording.list_heading(page, name)
    if not listing.items:
        return heading
    lines = [heading]
    if name == "reminders":
        lines += [f"{n}. {reminder_line(r)}" for n, r in enumerate(page.items, page.first)]
    else:
        lines += [
            f"{n}. {commitment_line(item, owner=listing.everyones)}"
            for n, item in enumerate(page.items, page.first)
        ]
    lines.append(wording.list_footer(name, STYLE))
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
        return Invocation(
            PLATFORM,
            chat_access(interaction, ref, agent_id),
            self._commitments,
            self._reminders,
            self._clock,
            self._config,
        ).lists()

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
            await _ephemeral(interaction, wording.someone_elses_list(name, STYLE))
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
        if not change.done or change.item is None:
            await _ephemeral(interaction, wording.change(change, STYLE))
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
        note = wording.snoozed_by(change, name, STYLE)
        message = interaction.message
        if message is None:
            await _ephemeral(interaction, note)
            return
        suffix = f"\n\n-# {note}"
        content = message.content[: MESSAGE_LIMIT - len(suffix)].rstrip() + suffix
        await interaction.response.edit_message(content=content, view=None)


def _note(change: Change | None) -> str:
    """What a row's button did, under the re-rendered list."""
    return "" if change is None else wording.change(change, STYLE)


async def _ephemeral(interaction: discord.Interaction, text: str) -> None:
    await interaction.response.send_message(text, ephemeral=True)
