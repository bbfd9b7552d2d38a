"""The /forget prompt's "Erase" / "Cancel" buttons on Discord.

Persistent like the other buttons (views.py): the custom_id carries the user
the prompt was made for and when (core/commands/buttons.py), and the class
is registered at start-up, so a press after a restart still works. Only that
user's press counts, and only within the lapse; core/commands/rights.py
decides, and the store erases in one transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import discord

from channels.discord.pressable import Pressable, close_under, ephemeral, pressed_in
from channels.discord.scope import PLATFORM, Gate
from core.clock import Clock
from core.commands import wording
from core.commands.buttons import ForgetPayload
from core.commands.rights import ForgetOutcome, RightsCommands
from core.config.model import KeptConfig
from core.logs import event
from core.messages import ForgetChoice
from core.privacy.store import PrivacyStores

log = logging.getLogger("kept.discord")


class ForgetButton(
    Pressable, discord.ui.DynamicItem[discord.ui.Button[Any]], template=ForgetPayload.template()
):
    payload, handler = ForgetChoice, "kept_forget"

    def __init__(self, choice: ForgetChoice) -> None:
        style = discord.ButtonStyle.danger if choice.erase else discord.ButtonStyle.secondary
        button: discord.ui.Button[Any] = discord.ui.Button(
            label="Erase" if choice.erase else "Cancel",
            style=style,
            custom_id=ForgetPayload.pack(choice),
        )
        super().__init__(button)
        self.action = choice


class ForgetActions:
    """What a press on a /forget prompt's button does."""

    def __init__(
        self,
        *,
        privacy: PrivacyStores | None,
        config: Callable[[], KeptConfig],
        clock: Clock,
        gate: Gate,
    ) -> None:
        self._privacy = privacy
        self._config = config
        self._clock = clock
        self._gate = gate

    async def handle(self, interaction: discord.Interaction, choice: ForgetChoice) -> None:
        ref = await pressed_in(interaction, self._gate)
        if ref is None:
            return
        if self._privacy is None:
            await ephemeral(interaction, wording.NO_LONGER_WORKS)
            return
        rights = RightsCommands(
            self._privacy, self._clock, platform=PLATFORM, user_id=str(interaction.user.id)
        )
        answer = await rights.answer_forget(choice)
        agent_id = self._config().channels.discord.agent
        event(
            log,
            logging.INFO,
            "discord_forget_button",
            agent=agent_id,
            session=ref.session_key(agent_id),
            user=interaction.user.id,
            outcome=answer.outcome.value,
            erased=answer.counts.total,
        )
        # /forget is typed alike on Discord (a top-level command).
        note = wording.forget_answer(answer)
        if answer.outcome is ForgetOutcome.NOT_YOURS:
            await ephemeral(interaction, note)
            return
        await close_under(interaction, note)
