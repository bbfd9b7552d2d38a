"""Discord's buttons: "Dismiss" and "Snooze 1 day" under a heartbeat
follow-up, "Snooze 10 min" / "Snooze 1 h" under a fired reminder, and a
list's row buttons and Prev / Next (their presses: channels/discord/lists.py).

The buttons are persistent: each one's custom_id carries its action and the
commitment ids (core/commands/buttons.py packs and unpacks it), and the
class is registered with the bot at start-up (`Client.add_dynamic_items`,
what `add_view` does for a view made of dynamic items). A click on a
follow-up sent before a restart therefore still reaches `FollowUpActions`,
with no per-message state in memory.

A click is never a conversation turn. What it may touch is re-checked on
every click by core/commands (the chat's follow-ups; in servers the
clicker's own unless they have Manage Messages), so a click never confirms
that another member's follow-up exists. This module only renders.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import discord

from channels.discord.forget_button import ForgetButton
from channels.discord.pressable import Pressable, close_under, ephemeral, pressed_in
from channels.discord.scope import Gate, chat_access
from channels.discord.zone_button import ZoneButton
from core.commands import FollowUpButtonResult, FollowUpCommands, wording
from core.commands.buttons import (
    FollowUpPayload,
    ListItemPayload,
    ListPagePayload,
    ReminderSnoozePayload,
    pack,
)
from core.commands.results import PER_PAGE
from core.commands.times import agent_timezone, local_time
from core.commitments.service import CommitmentService
from core.config.model import KeptConfig
from core.logs import event
from core.messages import (
    Action,
    ButtonAction,
    FollowUpVerb,
    ForgetChoice,
    ItemAction,
    ItemVerb,
    PageAction,
    ReminderSnooze,
    ZoneChoice,
)
from core.users import UserZones

log = logging.getLogger("kept.discord")

_LABELS: dict[FollowUpVerb, tuple[str, discord.ButtonStyle]] = {
    "dismiss": ("Dismiss", discord.ButtonStyle.secondary),
    "snooze": ("Snooze 1 day", discord.ButtonStyle.primary),
}

NOT_FOUND = wording.NOT_FOUND


_ITEM_LABELS: dict[ItemVerb, tuple[str, discord.ButtonStyle]] = {
    "dismiss": ("Dismiss", discord.ButtonStyle.secondary),
    "snooze": ("Snooze", discord.ButtonStyle.primary),
    "cancel": ("Cancel", discord.ButtonStyle.secondary),
}
ITEM_ROWS = 4  # a list's row buttons fill rows 0-3; Prev / Next take the last
ROW_WIDTH = 5  # Discord's buttons per action row


def buttons_view(actions: Sequence[ButtonAction]) -> discord.ui.View | None:
    """The buttons for a message's actions; None when there is nothing to
    attach (or an action does not fit in a custom_id)."""
    buttons: list[discord.ui.DynamicItem[Any]] = []
    shown = next((a.page for a in actions if isinstance(a, ItemAction)), 0)
    numbers: dict[str, int] = {}
    for action in actions:
        if pack(action) is None:
            continue
        match action:
            case Action():
                buttons.append(FollowUpButton(action))
            case ReminderSnooze():
                buttons.append(ReminderSnoozeButton(action))
            case ItemAction(item_id=item_id, page=page):
                number = numbers.setdefault(item_id, page * PER_PAGE + len(numbers) + 1)
                row = min(sum(isinstance(b, ListItemButton) for b in buttons) // ROW_WIDTH, 3)
                buttons.append(ListItemButton(action, number=number, row=row))
            case PageAction(page=page):
                buttons.append(ListPageButton(action, previous=page < shown))
            case ZoneChoice():
                buttons.append(ZoneButton(action))
            case ForgetChoice():
                buttons.append(ForgetButton(action))
    if not buttons:
        return None
    view = discord.ui.View(timeout=None)
    for button in buttons:
        view.add_item(button)
    return view


class FollowUpButton(
    Pressable, discord.ui.DynamicItem[discord.ui.Button[Any]], template=FollowUpPayload.template()
):
    payload, handler = Action, "kept_followups"

    def __init__(self, action: Action) -> None:
        label, style = _LABELS[action.verb]
        super().__init__(
            discord.ui.Button(label=label, style=style, custom_id=FollowUpPayload.pack(action))
        )
        self.action = action


def _label(minutes: int) -> str:
    return f"Snooze {minutes // 60} h" if minutes % 60 == 0 else f"Snooze {minutes} min"


class ReminderSnoozeButton(
    Pressable,
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=ReminderSnoozePayload.template(),
):
    payload, handler, method = ReminderSnooze, "kept_lists", "snooze"

    def __init__(self, action: ReminderSnooze) -> None:
        button = discord.ui.Button[Any](
            label=_label(action.minutes),
            style=discord.ButtonStyle.secondary,
            custom_id=pack(action),
        )
        super().__init__(button)
        self.action = action


class ListItemButton(
    Pressable, discord.ui.DynamicItem[discord.ui.Button[Any]], template=ListItemPayload.template()
):
    payload, handler, method = ItemAction, "kept_lists", "press"

    def __init__(self, action: ItemAction, *, number: int = 0, row: int | None = None) -> None:
        label, style = _ITEM_LABELS[action.verb]
        button = discord.ui.Button[Any](
            label=f"{number} · {label}" if number else label,
            style=style,
            custom_id=pack(action),
            row=row,
        )
        super().__init__(button)
        self.action = action


class ListPageButton(
    Pressable, discord.ui.DynamicItem[discord.ui.Button[Any]], template=ListPagePayload.template()
):
    payload, handler, method = PageAction, "kept_lists", "press"

    def __init__(self, action: PageAction, *, previous: bool = False) -> None:
        button = discord.ui.Button[Any](
            label="◀ Prev" if previous else "Next ▶",
            style=discord.ButtonStyle.secondary,
            custom_id=pack(action),
            row=ITEM_ROWS,
        )
        super().__init__(button)
        self.action = action


# Registered with the bot at start-up, so buttons sent before a restart work.
DYNAMIC_BUTTONS = (
    FollowUpButton,
    ReminderSnoozeButton,
    ListItemButton,
    ListPageButton,
    ZoneButton,
    ForgetButton,
)


class FollowUpActions:
    """What a click on a follow-up button does."""

    def __init__(
        self,
        *,
        commitments: CommitmentService,
        config: Callable[[], KeptConfig],
        gate: Gate,
        users: UserZones | None = None,
    ) -> None:
        self._commitments = commitments
        self._config = config
        self._gate = gate
        self._users = users  # the presser's own zone for "snoozed until"
        # Messages being handled, and recently handled ones with their note:
        # a double click must not snooze twice.
        self._busy: set[int] = set()
        self._done: OrderedDict[int, str] = OrderedDict()

    async def handle(self, interaction: discord.Interaction, action: Action) -> None:
        ref = await pressed_in(interaction, self._gate)
        if ref is None:
            return
        agent_id = self._config().channels.discord.agent
        commands = FollowUpCommands(self._commitments, chat_access(interaction, ref, agent_id))
        found = await commands.pressable(action)
        if found is None:
            await ephemeral(interaction, NOT_FOUND)
            return
        message_id = interaction.message.id if interaction.message is not None else 0
        if message_id in self._done:
            await ephemeral(interaction, self._done[message_id])
            return
        if message_id in self._busy:
            await ephemeral(interaction, "One moment: this follow-up is being updated.")
            return
        self._busy.add(message_id)
        try:
            pressed = await commands.apply(action.verb, found)
            note = await self._note(pressed, interaction, agent_id)
            if not pressed.changed:
                await ephemeral(interaction, note)
                return
            self._remember(message_id, note)
        finally:
            self._busy.discard(message_id)
        event(
            log,
            logging.INFO,
            "discord_followup_" + action.verb,
            agent=agent_id,
            session=ref.session_key(agent_id),
            commitments=",".join(item.id for item in pressed.changed),
            user=interaction.user.id,
        )
        await close_under(interaction, note)

    async def _note(
        self, pressed: FollowUpButtonResult, interaction: discord.Interaction, agent_id: str
    ) -> str:
        zone = agent_timezone(self._config(), agent_id)
        if self._users is not None:
            zone = await self._users.of(agent_id, "discord", str(interaction.user.id))
        # Said in the channel, where a relative timestamp would do too; the
        # presser's own zone reads as they expect.
        style = wording.Style(when=lambda moment: local_time(moment, zone), code=lambda t: f"`{t}`")
        return wording.pressed(pressed, _name(interaction), style)

    def _remember(self, message_id: int, note: str) -> None:
        if not message_id:
            return
        self._done[message_id] = note
        while len(self._done) > 1000:
            self._done.popitem(last=False)


def _name(interaction: discord.Interaction) -> str:
    # A display name, never a mention: an edit must not ping anyone.
    return discord.utils.escape_mentions(interaction.user.display_name)
