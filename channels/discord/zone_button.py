"""The set_timezone tool's "Yes, use <zone>" / "No" buttons on Discord.

Persistent like the follow-up buttons (views.py): the custom_id carries the
user it was offered to and the zone (core/commands/buttons.py), and the class
is registered at start-up, so a press after a restart still works. Only the
user it was offered to may answer (core/commands/timezone.py decides).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import discord

from channels.discord.pressable import Pressable, close_under, ephemeral, pressed_in
from channels.discord.scope import Gate
from core.clock import Clock
from core.commands import wording
from core.commands.buttons import ZoneChoicePayload
from core.commands.timezone import TimezoneCommands, ZoneOutcome
from core.config.model import KeptConfig
from core.logs import event
from core.messages import ZoneChoice
from core.users import UserZones

log = logging.getLogger("kept.discord")


def zone_label(choice: ZoneChoice) -> str:
    return f"Yes, use {choice.timezone}"[:80] if choice.accept else "No"


class ZoneButton(
    Pressable, discord.ui.DynamicItem[discord.ui.Button[Any]], template=ZoneChoicePayload.template()
):
    payload, handler = ZoneChoice, "kept_zones"

    def __init__(self, choice: ZoneChoice) -> None:
        style = discord.ButtonStyle.primary if choice.accept else discord.ButtonStyle.secondary
        button: discord.ui.Button[Any] = discord.ui.Button(
            label=zone_label(choice), style=style, custom_id=ZoneChoicePayload.pack(choice)
        )
        super().__init__(button)
        self.action = choice


class ZoneActions:
    """What a press on a proposed zone's button does."""

    def __init__(
        self,
        *,
        users: UserZones | None,
        config: Callable[[], KeptConfig],
        clock: Clock,
        gate: Gate,
    ) -> None:
        self._users = users
        self._config = config
        self._clock = clock
        self._gate = gate

    async def handle(self, interaction: discord.Interaction, choice: ZoneChoice) -> None:
        ref = await pressed_in(interaction, self._gate)
        if ref is None:
            return
        if self._users is None:
            await ephemeral(interaction, wording.NO_LONGER_WORKS)
            return
        agent_id = self._config().channels.discord.agent
        commands = TimezoneCommands(
            self._users,
            self._clock,
            agent_id=agent_id,
            platform="discord",
            user_id=str(interaction.user.id),
        )
        answer = await commands.confirm(choice)
        event(
            log,
            logging.INFO,
            "discord_zone_button",
            agent=agent_id,
            session=ref.session_key(agent_id),
            user=interaction.user.id,
            outcome=answer.outcome.value,
        )
        note = wording.zone(answer)
        if answer.outcome in (ZoneOutcome.NOT_YOURS, ZoneOutcome.INVALID):
            await ephemeral(interaction, note)
            return
        await close_under(interaction, note)
