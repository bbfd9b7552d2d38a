"""The half every persistent button of kept shares: rebuilt from its
custom_id after a restart (core/commands/buttons.py unpacks it), a press
hands the button's action to what the bot carries for it."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import discord

from core.commands.buttons import unpack

NOT_AVAILABLE = "This button is not available."


class Pressable:
    """Mixed into a `discord.ui.DynamicItem` subclass (before it), which
    brings the template: `payload` is the action type its custom_id holds,
    `handler` the bot attribute that acts on a press, `method` its method
    taking (interaction, action)."""

    payload: ClassVar[type[Any]]
    handler: ClassVar[str]
    method: ClassVar[str] = "handle"
    action: Any

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> Any:
        action = unpack(match.string)
        if not isinstance(action, cls.payload):  # the template matched: it parses
            raise ValueError(f"not a {cls.__name__}: {match.string!r}")
        return cls(action)  # type: ignore[call-arg]

    async def callback(self, interaction: discord.Interaction) -> None:
        acts = getattr(interaction.client, self.handler, None)
        if acts is None:
            await interaction.response.send_message(NOT_AVAILABLE, ephemeral=True)
            return
        await getattr(acts, self.method)(interaction, self.action)
