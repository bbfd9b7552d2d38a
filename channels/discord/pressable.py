"""The half every persistent button of kept shares: rebuilt from its
custom_id after a restart (core/commands/buttons.py unpacks it), a press
hands the button's action to what the bot carries for it."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import discord

from channels.discord.scope import NOT_ALLOWED, ChatRef, Gate, interaction_chat
from core.commands.buttons import unpack

NOT_AVAILABLE = "This button is not available."
MESSAGE_LIMIT = 2000


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


async def pressed_in(interaction: discord.Interaction, gate: Gate) -> ChatRef | None:
    """The chat a press came from, or None (and the presser told so) when
    they may not use the bot there."""
    ref = interaction_chat(interaction)
    if ref is None or not await gate.allowed(
        interaction.user, interaction.guild_id, interaction.client
    ):
        await ephemeral(interaction, NOT_ALLOWED)
        return None
    return ref


async def close_under(interaction: discord.Interaction, note: str) -> None:
    """Say under the pressed message what its button did; the answer
    replaces the buttons, so nobody presses them again (a press on a message
    Discord no longer hands over is answered to the presser alone)."""
    message = interaction.message
    if message is None:
        await ephemeral(interaction, note)
        return
    suffix = f"\n\n-# {note}"
    content = message.content[: MESSAGE_LIMIT - len(suffix)].rstrip() + suffix
    await interaction.response.edit_message(content=content, view=None)


async def ephemeral(interaction: discord.Interaction, text: str) -> None:
    await interaction.response.send_message(text, ephemeral=True)
