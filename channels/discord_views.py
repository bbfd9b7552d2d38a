"""The "Dismiss" and "Snooze 1 day" buttons under a heartbeat follow-up.

The buttons are persistent: each one's custom_id carries its action and the
commitment ids, and the class is registered with the bot at start-up
(`Client.add_dynamic_items`, what `add_view` does for a view made of dynamic
items). A click on a follow-up sent before a restart therefore still reaches
`FollowUpActions`, with no per-message state in memory.

A click is never a conversation turn. What it may touch is re-checked on
every click: the commitments must belong to the chat the click came from,
and in servers to the member who clicks unless they have Manage Messages
(core/commitments/visibility.py). Anything else is "not found", so a click
never confirms that another member's follow-up exists.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

import discord

from channels.discord_scope import ChatRef, Gate, chat_access, interaction_chat
from core.commitments.model import Commitment
from core.commitments.service import CommitmentService
from core.commitments.store import Filter
from core.config import KeptConfig
from core.logs import event

log = logging.getLogger("kept.discord")

Action = Literal["dismiss", "snooze"]

SNOOZE_FOR = timedelta(days=1)
CUSTOM_ID_LIMIT = 100  # Discord's limit for a component's custom_id
MESSAGE_LIMIT = 2000
_ID = r"cm_[0-9a-z]+"
_IDS = re.compile(rf"^{_ID}$")
TEMPLATE = rf"kept:fu:(?P<action>dismiss|snooze):(?P<ids>{_ID}(?:,{_ID})*)"
_LABELS: dict[Action, tuple[str, discord.ButtonStyle]] = {
    "dismiss": ("Dismiss", discord.ButtonStyle.secondary),
    "snooze": ("Snooze 1 day", discord.ButtonStyle.primary),
}

NOT_ALLOWED = "Sorry, you can't use this bot here."
NOT_FOUND = "That follow-up was not found in this chat."


def custom_id(action: Action, ids: Sequence[str]) -> str:
    return f"kept:fu:{action}:{','.join(ids)}"


def commitment_ids(extras: Mapping[str, str]) -> list[str]:
    """The commitment ids a heartbeat follow-up names; malformed ones are dropped
    (they could not match the button template anyway)."""
    raw = extras.get("commitments", "")
    return [i for i in dict.fromkeys(p.strip() for p in raw.split(",")) if _IDS.match(i)]


def followup_view(ids: Sequence[str]) -> discord.ui.View | None:
    """The two buttons for a follow-up about `ids`; None when there is nothing
    to attach (or too many ids to fit in a custom_id)."""
    if not ids:
        return None
    if len(custom_id("dismiss", ids)) > CUSTOM_ID_LIMIT:
        event(
            log,
            logging.WARNING,
            "discord_followup_without_buttons",
            commitments=",".join(ids),
            reason="too many ids for one custom_id",
        )
        return None
    view = discord.ui.View(timeout=None)
    view.add_item(FollowUpButton("dismiss", ids))
    view.add_item(FollowUpButton("snooze", ids))
    return view


class FollowUpButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=TEMPLATE):
    def __init__(self, action: Action, ids: Sequence[str]) -> None:
        label, style = _LABELS[action]
        super().__init__(
            discord.ui.Button(label=label, style=style, custom_id=custom_id(action, ids))
        )
        self.action: Action = action
        self.ids: tuple[str, ...] = tuple(ids)

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction,
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> FollowUpButton:
        action: Action = "dismiss" if match["action"] == "dismiss" else "snooze"
        return cls(action, match["ids"].split(","))

    async def callback(self, interaction: discord.Interaction) -> None:
        actions = getattr(interaction.client, "kept_followups", None)
        if not isinstance(actions, FollowUpActions):
            await interaction.response.send_message("This button is not available.", ephemeral=True)
            return
        await actions.handle(interaction, self.action, self.ids)


class FollowUpActions:
    """What a click on a follow-up button does."""

    def __init__(
        self,
        *,
        commitments: CommitmentService,
        config: Callable[[], KeptConfig],
        gate: Gate,
    ) -> None:
        self._commitments = commitments
        self._config = config
        self._gate = gate
        # Messages being handled, and recently handled ones with their note:
        # a double click must not snooze twice.
        self._busy: set[int] = set()
        self._done: OrderedDict[int, str] = OrderedDict()

    async def handle(
        self, interaction: discord.Interaction, action: Action, ids: Sequence[str]
    ) -> None:
        ref = interaction_chat(interaction)
        if ref is None or not await self._gate.allowed(
            interaction.user, interaction.guild_id, interaction.client
        ):
            await _ephemeral(interaction, NOT_ALLOWED)
            return
        agent_id = self._config().channels.discord.agent
        key = ref.session_key(agent_id)
        found = await self._lookup(interaction, ref, agent_id, ids)
        if isinstance(found, str):
            await _ephemeral(interaction, found)
            return
        found, scope = found
        message_id = interaction.message.id if interaction.message is not None else 0
        if message_id in self._done:
            await _ephemeral(interaction, self._done[message_id])
            return
        if message_id in self._busy:
            await _ephemeral(interaction, "One moment: this follow-up is being updated.")
            return
        self._busy.add(message_id)
        try:
            if action == "dismiss":
                note, problem = await self._dismiss(interaction, scope, found)
            else:
                note, problem = await self._snooze(interaction, agent_id, scope, found)
            if problem is not None:
                await _ephemeral(interaction, problem)
                return
            self._remember(message_id, note)
        finally:
            self._busy.discard(message_id)
        event(
            log,
            logging.INFO,
            "discord_followup_" + action,
            agent=agent_id,
            session=key,
            commitments=",".join(c.id for c in found),
            user=interaction.user.id,
        )
        await _show(interaction, note)

    async def _lookup(
        self, interaction: discord.Interaction, ref: ChatRef, agent_id: str, ids: Sequence[str]
    ) -> tuple[list[Commitment], Filter] | str:
        """The button's commitments and the filter to change them through, or
        the answer to give: NOT_FOUND unless the clicker may see every one."""
        access = chat_access(interaction, ref, agent_id)
        found: list[Commitment] = []
        # Every status: by the time anyone clicks, the heartbeat has marked
        # the follow-up's commitments `sent`.
        for commitment_id in dict.fromkeys(ids):
            one = await self._commitments.find(access, commitment_id)
            if one is None:
                return NOT_FOUND
            found.append(one[0])
        if not found:
            return NOT_FOUND
        # Only the owner's own, or an admin's whole chat, got this far.
        return found, await access.visible()

    async def _dismiss(
        self, interaction: discord.Interaction, scope: Filter, found: list[Commitment]
    ) -> tuple[str, str | None]:
        # Core decides what a click means, on a delivered (`sent`) follow-up
        # as on an active one.
        outcome = await self._commitments.followup_dismiss([c.id for c in found], scope)
        if not outcome.dismissed:
            return "", f"Nothing changed: {outcome.failed[0][1]}."
        return f"Dismissed by {_name(interaction)}. I won't follow up on this.", None

    async def _snooze(
        self,
        interaction: discord.Interaction,
        agent_id: str,
        scope: Filter,
        found: list[Commitment],
    ) -> tuple[str, str | None]:
        # The heartbeat brings the topic up again then, in a new check-in.
        outcome = await self._commitments.followup_snooze(
            [c.id for c in found], duration=SNOOZE_FOR, where=scope
        )
        if not outcome.snoozed:
            return "", f"Nothing changed: {outcome.failed[0][1]}."
        until = min(c.due_earliest for c in outcome.snoozed)
        timezone = _timezone(self._config(), agent_id)
        return f"Snoozed by {_name(interaction)} until {_local(until, timezone)}.", None

    def _remember(self, message_id: int, note: str) -> None:
        if not message_id:
            return
        self._done[message_id] = note
        while len(self._done) > 1000:
            self._done.popitem(last=False)


async def _show(interaction: discord.Interaction, note: str) -> None:
    """Edit the follow-up to say what happened, and drop its buttons."""
    message = interaction.message
    if message is None:
        await _ephemeral(interaction, note)
        return
    suffix = f"\n\n-# {note}"
    content = message.content[: MESSAGE_LIMIT - len(suffix)].rstrip() + suffix
    await interaction.response.edit_message(content=content, view=None)


async def _ephemeral(interaction: discord.Interaction, text: str) -> None:
    await interaction.response.send_message(text, ephemeral=True)


def _name(interaction: discord.Interaction) -> str:
    # A display name, never a mention: an edit must not ping anyone.
    return discord.utils.escape_mentions(interaction.user.display_name)


def _local(instant: datetime, timezone: str) -> str:
    """`Tue 01 Dec 18:00 (Europe/Paris)`: the time in the agent's time zone."""
    try:
        zone = ZoneInfo(timezone)
    except (ValueError, KeyError):
        zone, timezone = ZoneInfo("UTC"), "UTC"
    return f"{instant.astimezone(zone):%a %d %b %H:%M} ({timezone})"


def _timezone(config: KeptConfig, agent_id: str) -> str:
    try:
        return config.agent(agent_id).timezone
    except KeyError:
        return "UTC"
