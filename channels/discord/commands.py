"""The slash commands: `/commitments list|dismiss|snooze`, `/reminders list|cancel`,
`/timezone [zone]` (with autocomplete of IANA names), `/new`, `/forget`,
`/mydata`, `/export` (what kept holds from the user: erased after an
Erase press, shown, or sent as a file), `/followups [on|off]` and `/usage`
(the user's own day of model calls).

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
that to everyone's, so no group carries `default_permissions`. `/new` in a
server needs Manage Messages too, checked the same way, so a member who
tries it is told why rather than not shown it.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import discord
from discord import app_commands

from channels.discord.lists import STYLE, list_message
from channels.discord.scope import (
    NOT_ALLOWED,
    PLATFORM,
    ChatRef,
    Gate,
    chat_access,
    interaction_chat,
)
from channels.discord.views import buttons_view
from core.clock import Clock
from core.commands import Listing, wording
from core.commands.registry import COMMANDS, Changed, Command, Invocation, ListShown, Result, Told
from core.commands.rights import DataShown, ExportMade, ForgetAsked
from core.commands.timezone import ZoneAnswer, zone_suggestions
from core.commitments.service import CommitmentService
from core.commitments.visibility import ChatAccess
from core.config.model import KeptConfig
from core.conversation.start_over import StartOver
from core.limits.spend import SpendStores, UsageShown
from core.logs import event
from core.privacy.store import PrivacyStores
from core.reminders import ReminderService
from core.users import FollowUpPreferences, UserZones

log = logging.getLogger("kept.discord")

MAX_CHOICES = 25  # Discord's limit for autocomplete
NO_CHAT = "This command works in a server channel, a thread or a DM with me."


@dataclass(frozen=True, slots=True)
class CommandOrigin:
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
        start_over: StartOver | None = None,
        privacy: PrivacyStores | None = None,
        followup_prefs: FollowUpPreferences | None = None,
        spend: SpendStores | None = None,
    ) -> None:
        self.followup_prefs = followup_prefs
        self.spend = spend
        self.commitments = commitments
        self.reminders = reminders
        self.config = config
        self.clock = clock
        self.gate = gate
        self.users = users
        self.start_over = start_over
        self.privacy = privacy

    async def origin(self, interaction: discord.Interaction) -> CommandOrigin | None:
        """The interaction's chat, or None when it may not use the bot here."""
        ref = interaction_chat(interaction)
        if ref is None:
            return None
        if not await self.gate.allowed(interaction.user, interaction.guild_id, interaction.client):
            return None
        agent_id = self.config().channels.discord.agent
        return CommandOrigin(
            ref, agent_id, ref.session_key(agent_id), chat_access(interaction, ref, agent_id)
        )

    async def check(self, interaction: discord.Interaction) -> bool:
        """A group's interaction_check: refuses (and says so) outside the allow-lists."""
        if interaction_chat(interaction) is None:
            await reply(interaction, NO_CHAT)
            return False
        if await self.origin(interaction) is None:
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

    def invocation(self, origin: CommandOrigin) -> Invocation:
        return Invocation(
            PLATFORM,
            origin.access,
            self.commitments,
            self.reminders,
            self.clock,
            self.config,
            self.users,
            start_over=self.start_over,
            privacy=self.privacy,
            followup_prefs=self.followup_prefs,
            spend=self.spend,
        )

    async def answer(
        self,
        interaction: discord.Interaction,
        origin: CommandOrigin,
        name: str,
        arguments: dict[str, str | list[str]],
    ) -> Result:
        """Run a registered command with the options Discord parsed, and reply
        with what it answered."""
        result = await COMMANDS.call(name, arguments, self.invocation(origin))
        match result:
            case ListShown(listing, page, viewer):
                content, view = list_message(page, listing, viewer)
                await reply(interaction, content, view)
            case Changed(changes):
                await reply(interaction, wording.changes(list(changes), STYLE))
            case ZoneAnswer():
                await reply(interaction, discord.utils.escape_mentions(wording.zone(result)))
            case Told(text):
                await reply(interaction, discord.utils.escape_mentions(text))
            case ForgetAsked(counts, actions):
                await reply(interaction, wording.forget_prompt(counts), buttons_view(actions))
            case DataShown():
                await self._my_data(interaction, result)
            case ExportMade(filename, data, chats):
                limit = interaction.filesize_limit
                if len(data) > limit:
                    await reply(interaction, wording.export_too_large(len(data), limit))
                else:
                    upload = discord.File(io.BytesIO(data), filename=filename)
                    await reply(interaction, wording.export_sent(chats), file=upload)
            case UsageShown():
                await reply(interaction, wording.usage_today(result))
            case _:
                await reply(interaction, wording.ZONES_UNAVAILABLE)
        return result

    async def _my_data(self, interaction: discord.Interaction, shown: DataShown) -> None:
        """The summary, then this chat's follow-ups and reminders with their buttons."""
        await reply(interaction, wording.my_data(shown, STYLE))
        for name, page in (("commitments", shown.followups), ("reminders", shown.reminders)):
            if page.listing.items:
                content, view = list_message(page, name, shown.viewer)  # type: ignore[arg-type]
                await reply(interaction, content, view)

    async def manageable(
        self, origin: CommandOrigin, current: str
    ) -> list[app_commands.Choice[str]]:
        """Autocomplete: this chat's active commitments the user may change."""
        listing = await self.invocation(origin).followups().list(limit=200)
        return _choices(listing, current)


# The registry's commands, by their place in Discord's tree.
LIST_FOLLOWUPS = COMMANDS.discord("commitments", "list")
DISMISS = COMMANDS.discord("commitments", "dismiss")
SNOOZE = COMMANDS.discord("commitments", "snooze")
LIST_REMINDERS = COMMANDS.discord("reminders", "list")
CANCEL = COMMANDS.discord("reminders", "cancel")
TIMEZONE = COMMANDS.discord("timezone")
NEW = COMMANDS.discord("new")
FORGET = COMMANDS.discord("forget")
MYDATA = COMMANDS.discord("mydata")
EXPORT = COMMANDS.discord("export")
USAGE = COMMANDS.discord("usage")
FOLLOWUPS = COMMANDS.discord("followups")


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

    @app_commands.command(name="list", description=LIST_FOLLOWUPS.help)
    async def list_(self, interaction: discord.Interaction) -> None:
        origin = await self._s.origin(interaction)
        if origin is None:
            return await reply(interaction, NOT_ALLOWED)
        # In a server a follow-up may be about someone's private life, said in
        # passing: members see their own, moderators (Manage Messages) all,
        # and whose each one is.
        await self._s.answer(interaction, origin, LIST_FOLLOWUPS.name, {})

    @app_commands.command(name="dismiss", description=DISMISS.help)
    @app_commands.rename(commitment_id="id")
    @app_commands.describe(commitment_id=DISMISS.arguments[0].help)
    async def dismiss(self, interaction: discord.Interaction, commitment_id: str) -> None:
        origin = await self._s.origin(interaction)
        if origin is None:
            return await reply(interaction, NOT_ALLOWED)
        result = await self._s.answer(interaction, origin, DISMISS.name, {"id": [commitment_id]})
        _log_changes("dismissed", interaction, origin, result)

    @app_commands.command(name="snooze", description=SNOOZE.help)
    @app_commands.rename(commitment_id="id")
    @app_commands.describe(
        commitment_id=SNOOZE.arguments[0].help,
        duration=SNOOZE.arguments[1].help,
    )
    async def snooze(
        self, interaction: discord.Interaction, commitment_id: str, duration: str
    ) -> None:
        origin = await self._s.origin(interaction)
        if origin is None:
            return await reply(interaction, NOT_ALLOWED)
        arguments: dict[str, str | list[str]] = {"id": commitment_id, "duration": duration}
        result = await self._s.answer(interaction, origin, SNOOZE.name, arguments)
        _log_changes("snoozed", interaction, origin, result)

    @dismiss.autocomplete("commitment_id")
    @snooze.autocomplete("commitment_id")
    async def _ids(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        # Autocomplete skips interaction_check, so the gate is applied here.
        origin = await self._s.origin(interaction)
        if origin is None:
            return []
        return await self._s.manageable(origin, current)


@app_commands.allowed_contexts(guilds=True, dms=True, private_channels=False)
@app_commands.guild_install()
class RemindersGroup(app_commands.Group):
    def __init__(self, support: CommandSupport) -> None:
        super().__init__(name="reminders", description="Exact reminders scheduled in this chat")
        self._s = support

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return await self._s.check(interaction)

    @app_commands.command(name="list", description=LIST_REMINDERS.help)
    async def list_(self, interaction: discord.Interaction) -> None:
        origin = await self._s.origin(interaction)
        if origin is None:
            return await reply(interaction, NOT_ALLOWED)
        # Reminders follow the follow-ups' rule: a member sees their own.
        await self._s.answer(interaction, origin, LIST_REMINDERS.name, {})

    @app_commands.command(name="cancel", description=CANCEL.help)
    @app_commands.rename(reminder_id="id")
    @app_commands.describe(reminder_id=CANCEL.arguments[0].help)
    async def cancel(self, interaction: discord.Interaction, reminder_id: str) -> None:
        origin = await self._s.origin(interaction)
        if origin is None:
            return await reply(interaction, NOT_ALLOWED)
        result = await self._s.answer(interaction, origin, CANCEL.name, {"id": reminder_id})
        _log_changes("reminder_cancelled", interaction, origin, result)

    @cancel.autocomplete("reminder_id")
    async def _ids(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        origin = await self._s.origin(interaction)
        if origin is None:
            return []
        return _choices(await self._s.invocation(origin).reminder_commands().list(), current)


def timezone_command(support: CommandSupport) -> app_commands.Command[Any, ..., None]:
    """`/timezone` shows the user's own zone, `/timezone zone:Europe/Paris`
    sets it, `/timezone zone:clear` clears it. A user's zone is theirs on
    every server and DM, so it works wherever the bot may be used."""

    @app_commands.command(name=TIMEZONE.name, description=TIMEZONE.help)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=False)
    @app_commands.guild_install()
    @app_commands.describe(zone=TIMEZONE.arguments[0].help)
    async def timezone(interaction: discord.Interaction, zone: str | None = None) -> None:
        origin = await support.origin(interaction)
        if origin is None:
            return await reply(interaction, NOT_ALLOWED)
        result = await support.answer(interaction, origin, TIMEZONE.name, {"zone": zone or ""})
        if isinstance(result, ZoneAnswer):
            event(
                log,
                logging.INFO,
                "discord_timezone",
                agent=origin.agent_id,
                user=interaction.user.id,
                outcome=result.outcome.value,
            )

    @timezone.autocomplete("zone")
    async def zones(
        interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=n, value=n) for n in zone_suggestions(current)]

    return timezone


def bare_command(support: CommandSupport, spec: Command) -> app_commands.Command[Any, ..., None]:
    """A command without arguments, wherever the bot may be used, answered
    by the registry (core/commands decides who may; every answer is
    ephemeral, so a server sees none of it): `/new` (in a server only
    members with Manage Messages there may; the command is offered to
    everyone, so a member who tries is told why not), `/forget`, `/mydata`
    and `/export` (the last two answer only in the bot's DM), `/usage`."""
    name = spec.name

    @app_commands.command(name=name, description=spec.help)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=False)
    @app_commands.guild_install()
    async def run(interaction: discord.Interaction) -> None:
        origin = await support.origin(interaction)
        if origin is None:
            return await reply(interaction, NOT_ALLOWED)
        await support.answer(interaction, origin, name, {})
        event(
            log,
            logging.INFO,
            "discord_command",
            agent=origin.agent_id,
            session=origin.session_key,
            command=name,
            user=interaction.user.id,
        )

    return run


def followups_command(support: CommandSupport) -> app_commands.Command[Any, ..., None]:
    """`/followups` shows whether follow-ups reach the user here,
    `/followups state:off` (or `on`) switches them: the user's own, or in a
    server channel from someone with Manage Messages the whole channel's."""

    @app_commands.command(name=FOLLOWUPS.name, description=FOLLOWUPS.help)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=False)
    @app_commands.guild_install()
    @app_commands.describe(state=FOLLOWUPS.arguments[0].help)
    @app_commands.choices(
        state=[
            app_commands.Choice(name="on", value="on"),
            app_commands.Choice(name="off", value="off"),
        ]
    )
    async def followups(
        interaction: discord.Interaction, state: app_commands.Choice[str] | None = None
    ) -> None:
        origin = await support.origin(interaction)
        if origin is None:
            return await reply(interaction, NOT_ALLOWED)
        chosen = state.value if state is not None else ""
        await support.answer(interaction, origin, FOLLOWUPS.name, {"state": chosen})
        if chosen:
            event(
                log,
                logging.INFO,
                "discord_followups",
                agent=origin.agent_id,
                session=origin.session_key,
                user=interaction.user.id,
                state=chosen,
            )

    return followups


def command_groups(
    support: CommandSupport,
) -> list[app_commands.Group | app_commands.Command[Any, ..., None]]:
    return [
        CommitmentsGroup(support),
        RemindersGroup(support),
        timezone_command(support),
        bare_command(support, NEW),
        *(bare_command(support, spec) for spec in (FORGET, MYDATA, EXPORT)),
        followups_command(support),
        bare_command(support, USAGE),
    ]


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
    await reply(interaction, wording.FAILED)


async def reply(
    interaction: discord.Interaction,
    text: str,
    view: discord.ui.View | None = None,
    *,
    file: discord.File | None = None,
) -> None:
    """An ephemeral answer (a follow-up message when already answered)."""
    extra: dict[str, Any] = {"view": view} if view is not None else {}
    if file is not None:
        extra["file"] = file
    if interaction.response.is_done():
        await interaction.followup.send(text, ephemeral=True, **extra)
    else:
        await interaction.response.send_message(text, ephemeral=True, **extra)


def _choices(listing: Listing, current: str) -> list[app_commands.Choice[str]]:
    """Autocomplete: the listed items whose id or text contains what was typed."""
    needle = current.strip().lower()
    return [
        app_commands.Choice(name=f"{item.id} — {item.text}"[:100], value=item.id)
        for item in listing.items
        if needle in item.id.lower() or needle in item.text.lower()
    ][:MAX_CHOICES]  # choice names hold 100 characters


def _log_changes(
    what: str, interaction: discord.Interaction, origin: CommandOrigin, result: Result
) -> None:
    if not isinstance(result, Changed):
        return
    for change in result.changes:
        if change.done:
            event(
                log,
                logging.INFO,
                "discord_" + what,
                agent=origin.agent_id,
                session=origin.session_key,
                id=change.id,
                user=interaction.user.id,
            )
