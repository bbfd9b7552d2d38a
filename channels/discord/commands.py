"""The slash commands: `/commitments list|dismiss|snooze`, `/reminders list|cancel`
and `/timezone [zone]` (with autocomplete of IANA names).

Parse and render only: what a command does, and what the asker may see, is
decided once for every platform in core/commands (the chat's session: the
channel, the thread or the DM it was used in; in servers the asker's own
follow-ups and reminders unless they have Manage Messages there). Every
answer is ephemeral (only the person who asked sees it), and a command is
never a conversation turn.

Where they are offered: both groups work in a server channel, a thread and
the bot's DM (each is a chat with its own follow-ups), so Discord offers
them there and not in group DMs, which reach an app only when users install
it. None is for admins only: in a server everyone sees and changes their
own items, and Manage Messages (checked per channel by core/commands) widens
that to everyone's, so no group carries `default_permissions`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import discord
from discord import app_commands

from channels.discord.lists import list_message
from channels.discord.lists import quote as _quote
from channels.discord.lists import when as _when
from channels.discord.scope import NOT_ALLOWED, ChatRef, Gate, chat_access, interaction_chat
from core.clock import Clock
from core.commands import Change, FollowUpCommands, Listing, Outcome, ReminderCommands
from core.commands.lists import ListCommands
from core.commands.timezone import TimezoneCommands, describe, zone_suggestions
from core.commitments.service import CommitmentService
from core.commitments.visibility import ChatAccess
from core.config.model import KeptConfig
from core.logs import event
from core.messages import ListName
from core.reminders import ReminderService
from core.users import UserZones

log = logging.getLogger("kept.discord")

MAX_CHOICES = 25  # Discord's limit for autocomplete
NO_CHAT = "This command works in a server channel, a thread or a DM with me."


@dataclass(frozen=True, slots=True)
class Where:
    """The chat a command was used in, its session, and what the user who
    asked may see there."""

    ref: ChatRef
    agent_id: str
    session_key: str
    access: ChatAccess


class CommandSupport:
    """What the command groups share: services, the gate, scope resolution."""

    def __init__(
        self,
        *,
        commitments: CommitmentService,
        reminders: ReminderService,
        config: Callable[[], KeptConfig],
        clock: Clock,
        gate: Gate,
        users: UserZones | None = None,
    ) -> None:
        self.commitments = commitments
        self.reminders = reminders
        self.config = config
        self.clock = clock
        self.gate = gate
        self.users = users

    async def where(self, interaction: discord.Interaction) -> Where | None:
        """The interaction's chat, or None when it may not use the bot here."""
        ref = interaction_chat(interaction)
        if ref is None:
            return None
        if not await self.gate.allowed(interaction.user, interaction.guild_id, interaction.client):
            return None
        agent_id = self.config().channels.discord.agent
        return Where(
            ref, agent_id, ref.session_key(agent_id), chat_access(interaction, ref, agent_id)
        )

    async def check(self, interaction: discord.Interaction) -> bool:
        """A group's interaction_check: refuses (and says so) outside the allow-lists."""
        if interaction_chat(interaction) is None:
            await reply(interaction, NO_CHAT)
            return False
        if await self.where(interaction) is None:
            event(
                log,
                logging.INFO,
                "discord_command_refused",
                user=interaction.user.id,
                guild=interaction.guild_id,
            )
            refusal = await self.gate.refusal(interaction.user, interaction.guild_id)
            await reply(interaction, refusal)
            return False
        return True

    def followups(self, where: Where) -> FollowUpCommands:
        return FollowUpCommands(self.commitments, where.access)

    def reminder_commands(self, where: Where) -> ReminderCommands:
        return ReminderCommands(self.reminders.store, self.clock, where.access)

    async def show_list(
        self, interaction: discord.Interaction, where: Where, name: ListName
    ) -> None:
        """The first page of a list, with its buttons (presses: channels/discord/lists.py)."""
        lists = ListCommands(self.followups(where), self.reminder_commands(where), where.access)
        content, view = list_message(await lists.page(name), name, lists.viewer)
        await reply(interaction, content, view)

    async def manageable(self, where: Where, current: str) -> list[app_commands.Choice[str]]:
        """Autocomplete: this chat's active commitments the user may change."""
        listing = await self.followups(where).list(limit=200)
        return _choices(listing, current)


@app_commands.allowed_contexts(guilds=True, dms=True, private_channels=False)
@app_commands.guild_install()
class CommitmentsGroup(app_commands.Group):
    def __init__(self, support: CommandSupport) -> None:
        super().__init__(
            name="commitments", description="Follow-ups I plan to bring up in this chat"
        )
        self._s = support

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return await self._s.check(interaction)

    @app_commands.command(name="list", description="Your pending follow-ups in this chat")
    async def list_(self, interaction: discord.Interaction) -> None:
        where = await self._s.where(interaction)
        if where is None:
            return await reply(interaction, NOT_ALLOWED)
        # In a server a follow-up may be about someone's private life, said in
        # passing: members see their own, moderators (Manage Messages) all,
        # and whose each one is.
        await self._s.show_list(interaction, where, "commitments")

    @app_commands.command(name="dismiss", description="Drop a follow-up: I won't bring it up")
    @app_commands.rename(commitment_id="id")
    @app_commands.describe(commitment_id="The follow-up's id, e.g. cm_1a2b3c4d5e6f")
    async def dismiss(self, interaction: discord.Interaction, commitment_id: str) -> None:
        where = await self._s.where(interaction)
        if where is None:
            return await reply(interaction, NOT_ALLOWED)
        [change] = await self._s.followups(where).dismiss([commitment_id])
        if change.done:
            _log_change("dismissed", interaction, where, change.id)
            assert change.item is not None
            return await reply(interaction, f"Dismissed `{change.id}`: {_quote(change.item.text)}")
        await reply(interaction, _unchanged(change))

    @app_commands.command(name="snooze", description="Bring a follow-up up later")
    @app_commands.rename(commitment_id="id")
    @app_commands.describe(
        commitment_id="The follow-up's id, e.g. cm_1a2b3c4d5e6f",
        duration="How long to wait, e.g. 2h, 1d, 3d",
    )
    async def snooze(
        self, interaction: discord.Interaction, commitment_id: str, duration: str
    ) -> None:
        where = await self._s.where(interaction)
        if where is None:
            return await reply(interaction, NOT_ALLOWED)
        change = await self._s.followups(where).snooze(commitment_id, duration=duration)
        if change.done:
            _log_change("snoozed", interaction, where, change.id)
            assert change.item is not None
            until = _when(change.item.due)
            return await reply(interaction, f"Snoozed `{change.id}` until {until}.")
        if change.outcome is Outcome.REFUSED:
            return await reply(interaction, f"Could not snooze `{change.id}`: {change.reason}.")
        await reply(interaction, _unchanged(change))

    @dismiss.autocomplete("commitment_id")
    @snooze.autocomplete("commitment_id")
    async def _ids(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        # Autocomplete skips interaction_check, so the gate is applied here.
        where = await self._s.where(interaction)
        if where is None:
            return []
        return await self._s.manageable(where, current)


@app_commands.allowed_contexts(guilds=True, dms=True, private_channels=False)
@app_commands.guild_install()
class RemindersGroup(app_commands.Group):
    def __init__(self, support: CommandSupport) -> None:
        super().__init__(name="reminders", description="Exact reminders scheduled in this chat")
        self._s = support

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return await self._s.check(interaction)

    @app_commands.command(name="list", description="Your active reminders in this chat")
    async def list_(self, interaction: discord.Interaction) -> None:
        where = await self._s.where(interaction)
        if where is None:
            return await reply(interaction, NOT_ALLOWED)
        # Reminders follow the follow-ups' rule: a member sees their own.
        await self._s.show_list(interaction, where, "reminders")

    @app_commands.command(name="cancel", description="Cancel one of this chat's reminders")
    @app_commands.rename(reminder_id="id")
    @app_commands.describe(reminder_id="The reminder's id, e.g. rm_1a2b3c4d5e6f")
    async def cancel(self, interaction: discord.Interaction, reminder_id: str) -> None:
        where = await self._s.where(interaction)
        if where is None:
            return await reply(interaction, NOT_ALLOWED)
        change = await self._s.reminder_commands(where).cancel(reminder_id)
        if change.outcome is Outcome.NOT_FOUND:
            return await reply(interaction, f"`{_code(change.id)}`: not found in this chat.")
        if not change.done:
            return await reply(interaction, f"`{change.id}` is {change.reason}.")
        _log_change("reminder_cancelled", interaction, where, change.id)
        assert change.item is not None
        await reply(interaction, f"Cancelled `{change.id}`: {_quote(change.item.text)}")

    @cancel.autocomplete("reminder_id")
    async def _ids(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        where = await self._s.where(interaction)
        if where is None:
            return []
        return _choices(await self._s.reminder_commands(where).list(), current)


def timezone_command(support: CommandSupport) -> app_commands.Command[Any, ..., None]:
    """`/timezone` shows the user's own zone, `/timezone zone:Europe/Paris`
    sets it, `/timezone zone:clear` clears it. A user's zone is theirs on
    every server and DM, so it works wherever the bot may be used."""

    @app_commands.command(
        name="timezone", description="Your own time zone: times I show you and your reminders"
    )
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=False)
    @app_commands.guild_install()
    @app_commands.describe(zone="An IANA name such as Europe/Paris, or clear")
    async def timezone(interaction: discord.Interaction, zone: str | None = None) -> None:
        where = await support.where(interaction)
        if where is None:
            return await reply(interaction, NOT_ALLOWED)
        if support.users is None:
            return await reply(interaction, "Time zones are not available here.")
        commands = TimezoneCommands(
            support.users,
            support.clock,
            agent_id=where.agent_id,
            platform="discord",
            user_id=str(interaction.user.id),
        )
        answer = await commands.run(zone or "")
        event(
            log,
            logging.INFO,
            "discord_timezone",
            agent=where.agent_id,
            user=interaction.user.id,
            outcome=answer.outcome.value,
        )
        await reply(interaction, discord.utils.escape_mentions(describe(answer)))

    @timezone.autocomplete("zone")
    async def zones(
        interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=n, value=n) for n in zone_suggestions(current)]

    return timezone


def command_groups(
    support: CommandSupport,
) -> list[app_commands.Group | app_commands.Command[Any, ..., None]]:
    return [CommitmentsGroup(support), RemindersGroup(support), timezone_command(support)]


async def on_tree_error(
    interaction: discord.Interaction, error: app_commands.AppCommandError
) -> None:
    """The tree's error handler: a refused check has already answered; anything
    else is logged and answered with one short line."""
    if isinstance(error, app_commands.CheckFailure):
        return
    command = interaction.command.qualified_name if interaction.command else None
    event(
        log,
        logging.ERROR,
        "discord_command_failed",
        command=command,
        user=interaction.user.id,
        error=repr(getattr(error, "original", error)),
    )
    await reply(interaction, "Sorry, something went wrong. Please try again.")


async def reply(
    interaction: discord.Interaction, text: str, view: discord.ui.View | None = None
) -> None:
    """An ephemeral answer (a follow-up message when already answered)."""
    extra = {"view": view} if view is not None else {}
    if interaction.response.is_done():
        await interaction.followup.send(text, ephemeral=True, **extra)
    else:
        await interaction.response.send_message(text, ephemeral=True, **extra)


def _unchanged(change: Change) -> str:
    """Why a dismiss or snooze changed nothing."""
    if change.outcome is Outcome.NOT_FOUND:
        # Another chat's id, or another member's for someone without
        # Manage Messages, is simply unknown here.
        return f"`{_code(change.id)}`: not found in this chat (see `/commitments list`)."
    if change.outcome is Outcome.INVALID_DURATION:
        return change.reason
    if change.item is not None:  # found closed before anything was tried
        return f"`{change.id}` is {change.reason}."
    return f"`{change.id}`: {change.reason}."


def _choices(listing: Listing, current: str) -> list[app_commands.Choice[str]]:
    """Autocomplete: the listed items whose id or text contains what was typed."""
    needle = current.strip().lower()
    return [
        app_commands.Choice(name=f"{item.id} — {item.text}"[:100], value=item.id)
        for item in listing.items
        if needle in item.id.lower() or needle in item.text.lower()
    ][:MAX_CHOICES]  # choice names hold 100 characters


def _code(text: str) -> str:
    return text.replace("`", "")[:60]


def _log_change(what: str, interaction: discord.Interaction, where: Where, item: str) -> None:
    event(
        log,
        logging.INFO,
        "discord_" + what,
        agent=where.agent_id,
        session=where.session_key,
        id=item,
        user=interaction.user.id,
    )
