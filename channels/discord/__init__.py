"""The Discord channel: `DiscordAdapter` (adapter.py) with its gateway Cog,
catch-up, slash commands, buttons, scope rules and REST root beside it."""

from channels.discord.adapter import DiscordAdapter

__all__ = ["DiscordAdapter"]
