"""The chat commands, each registered once: name, help, arguments,
permission and a handler returning a typed result.

Telegram, Discord and `kept chat` parse their input into a command's
arguments and render what its handler returns (the sentences:
core/commands/wording.py); Telegram's command menu and Discord's command
tree are built from this table. Nothing here is phrased for a platform.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from core.clock import Clock
from core.commands import wording
from core.commands.followups import FollowUpCommands
from core.commands.lists import ListCommands
from core.commands.reminders import ReminderCommands
from core.commands.results import Change, Page
from core.commands.rights import DataShown, ExportMade, ForgetAsked, RightsCommands
from core.commands.times import agent_timezone
from core.commands.timezone import TimezoneCommands, ZoneAnswer
from core.commitments.service import CommitmentService
from core.commitments.visibility import ChatAccess
from core.config.model import KeptConfig
from core.conversation.start_over import StartOver
from core.limits.spend import SpendStores, UsageShown
from core.messages import ListName
from core.privacy.store import PrivacyStores
from core.reminders.service import ReminderService
from core.users import FollowUpPreferences, UserZones
from core.users.followup_prefs import parse_switch


class Permission(StrEnum):
    # Every user allowed to talk to the bot here.
    ANYONE = "anyone"
    # The chat's items: in a group the asker's own, everyone's for a chat
    # admin (core/commitments/visibility.py decides, item by item).
    CHAT = "chat"
    # The asker's own setting, the same in every chat on the platform.
    OWN = "own"
    # What the whole chat shares (its conversation with the bot): in a group
    # a chat admin's to change, in a private chat the user's.
    CHAT_ADMIN = "chat_admin"


@dataclass(frozen=True, slots=True)
class Argument:
    name: str
    help: str
    metavar: str
    required: bool = True
    many: bool = False  # one or more words
    rest: bool = False  # the rest of the line, possibly empty


@dataclass(frozen=True, slots=True)
class Invocation:
    """Who asks, where, and the services a handler acts through."""

    platform: str
    access: ChatAccess
    commitments: CommitmentService
    reminders: ReminderService
    clock: Clock
    config: Callable[[], KeptConfig]
    users: UserZones | None = None
    # `/new`; None: the surface cannot start a conversation over.
    start_over: StartOver | None = None
    # What /forget, /mydata and /export act through; None: not offered here.
    privacy: PrivacyStores | None = None
    # Who switched follow-ups off (`/followups`); None: not available here.
    followup_prefs: FollowUpPreferences | None = None
    # What /usage reads (the model calls' records, the budgets' counters);
    # None: not available here.
    spend: SpendStores | None = None

    @property
    def agent_id(self) -> str:
        return self.access.asker.agent_id

    @property
    def user_id(self) -> str:
        return self.access.asker.user_id

    def followups(self) -> FollowUpCommands:
        return FollowUpCommands(self.commitments, self.access)

    def reminder_commands(self) -> ReminderCommands:
        reminders = self.reminders
        return ReminderCommands(reminders.store, self.clock, self.access, service=reminders)

    def lists(self) -> ListCommands:
        return ListCommands(self.followups(), self.reminder_commands(), self.access)

    def zones(self) -> TimezoneCommands | None:
        if self.users is None:
            return None
        return TimezoneCommands(
            self.users,
            self.clock,
            agent_id=self.agent_id,
            platform=self.platform,
            user_id=self.user_id,
        )

    def rights(self) -> RightsCommands | None:
        if self.privacy is None:
            return None
        return RightsCommands(
            self.privacy, self.clock, platform=self.platform, user_id=self.user_id
        )

    @property
    def private(self) -> bool:
        return self.access.asker.chat_kind == "private"

    async def timezone(self) -> str:
        """The zone the asker reads times in: theirs, else the agent's."""
        if self.users is None:
            return agent_timezone(self.config(), self.agent_id)
        return await self.users.of(self.agent_id, self.platform, self.user_id)


Arguments = dict[str, str | list[str]]


# --- results the registry itself answers ----------------------------------------


@dataclass(frozen=True, slots=True)
class HelpShown:
    commands: tuple[Command, ...]


@dataclass(frozen=True, slots=True)
class WrongUsage:
    command: Command


@dataclass(frozen=True, slots=True)
class UnknownCommand:
    name: str


@dataclass(frozen=True, slots=True)
class ZonesUnavailable:
    """The surface has no per-user zones (no users service)."""


@dataclass(frozen=True, slots=True)
class ListShown:
    name: ListName
    page: Page
    viewer: str


@dataclass(frozen=True, slots=True)
class Changed:
    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True)
class Told:
    """An answer that is one sentence of core/commands/wording.py, the same on
    every surface (a setting switched, a conversation started over)."""

    text: str


Result = (
    HelpShown
    | WrongUsage
    | UnknownCommand
    | ZonesUnavailable
    | ListShown
    | Changed
    | ZoneAnswer
    | Told
    | ForgetAsked
    | DataShown
    | ExportMade
    | UsageShown
)
Handler = Callable[[Invocation, Arguments], Awaitable[Result]]


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    help: str
    permission: Permission
    handler: Handler = field(compare=False, repr=False)
    arguments: tuple[Argument, ...] = ()
    # Where the ids come from, said after a wrong usage.
    hint: str = ""
    # Its place in Discord's tree, e.g. ("commitments", "dismiss").
    discord: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()

    @property
    def usage(self) -> str:
        parts = [f"/{self.name}"]
        for a in self.arguments:
            shown = f"{a.metavar} [{a.metavar}…]" if a.many else a.metavar
            parts.append(shown if a.required else f"[{shown}]")
        text = " ".join(parts)
        return f"{text} ({self.hint})" if self.hint else text

    @property
    def summary(self) -> str:
        """One line for a menu: the help and, with arguments, how to type it."""
        if not self.arguments:
            return self.help
        example = " ".join([f"/{self.name}", *(a.metavar for a in self.arguments)])
        return f"{self.help}: {example}"

    def parse(self, words: Sequence[str]) -> Arguments | None:
        """The typed words as this command's arguments; None for a wrong usage.
        A command without arguments ignores any words after it."""
        values: Arguments = {}
        rest = list(words)
        for a in self.arguments:
            if a.rest:
                values[a.name], rest = " ".join(rest), []
            elif a.many:
                values[a.name], rest = rest, []
            elif rest:
                values[a.name] = rest.pop(0)
            if a.required and not values.get(a.name):
                return None
        if rest and self.arguments:
            return None
        return values


class Registry:
    def __init__(self, commands: Sequence[Command]) -> None:
        self.commands = tuple(commands)
        self._by_name = {n: c for c in commands for n in (c.name, *c.aliases)}

    def get(self, name: str) -> Command | None:
        return self._by_name.get(name.lower())

    def discord(self, *path: str) -> Command:
        """The command at this place in Discord's tree."""
        return next(c for c in self.commands if c.discord == path)

    async def run(self, name: str, words: Sequence[str], call: Invocation) -> Result:
        """A typed command line's answer."""
        command = self.get(name)
        if command is None:
            return UnknownCommand(name)
        arguments = command.parse(words)
        if arguments is None:
            return WrongUsage(command)
        return await command.handler(call, arguments)

    async def call(self, name: str, arguments: Arguments, call: Invocation) -> Result:
        """A command whose arguments the platform parsed (Discord's options)."""
        command = self.get(name)
        assert command is not None, name
        return await command.handler(call, arguments)


# --- the handlers -----------------------------------------------------------------


def _one(arguments: Arguments, name: str) -> str:
    value = arguments.get(name, "")
    return value if isinstance(value, str) else " ".join(value)


def _many(arguments: Arguments, name: str) -> list[str]:
    value = arguments.get(name, [])
    return [value] if isinstance(value, str) else list(value)


async def _help(call: Invocation, arguments: Arguments) -> Result:
    return HelpShown(COMMANDS.commands)


async def _commitments(call: Invocation, arguments: Arguments) -> Result:
    lists = call.lists()
    return ListShown("commitments", await lists.page("commitments"), lists.viewer)


async def _reminders(call: Invocation, arguments: Arguments) -> Result:
    lists = call.lists()
    return ListShown("reminders", await lists.page("reminders"), lists.viewer)


async def _dismiss(call: Invocation, arguments: Arguments) -> Result:
    return Changed(tuple(await call.followups().dismiss(_many(arguments, "id"))))


async def _snooze(call: Invocation, arguments: Arguments) -> Result:
    followups = call.followups()
    change = await followups.snooze(_one(arguments, "id"), duration=_one(arguments, "duration"))
    return Changed((change,))


async def _cancel(call: Invocation, arguments: Arguments) -> Result:
    return Changed((await call.reminder_commands().cancel(_one(arguments, "id")),))


async def _timezone(call: Invocation, arguments: Arguments) -> Result:
    zones = call.zones()
    if zones is None:
        return ZonesUnavailable()
    return await zones.run(_one(arguments, "zone"))


async def _new(call: Invocation, arguments: Arguments) -> Result:
    # A group's conversation is everyone's there: one member starting it over
    # would take it away from the others, so only a chat admin may.
    if call.start_over is None:
        return Told(wording.NEW_UNAVAILABLE)
    if call.access.shared and not await call.access.admin():
        return Told(wording.NEW_ADMINS_ONLY)
    asker = call.access.asker
    await call.start_over.start_over(
        agent_id=asker.agent_id, session_key=asker.session_key, user_id=asker.user_id
    )
    return Told(wording.STARTED_OVER)


async def _forget(call: Invocation, arguments: Arguments) -> Result:
    rights = call.rights()
    if rights is None:
        return Told(wording.RIGHTS_UNAVAILABLE)
    return await rights.ask_forget()


async def _mydata(call: Invocation, arguments: Arguments) -> Result:
    rights = call.rights()
    if rights is None:
        return Told(wording.RIGHTS_UNAVAILABLE)
    if not call.private:
        return Told(wording.private_only("mydata"))
    held, chats = await rights.held()
    zones = call.zones()
    lists = call.lists()
    preference = None
    if call.followup_prefs is not None:
        own = await call.followup_prefs.state(call.agent_id, call.platform, call.user_id)
        preference = wording.followups_brief(own)
    return DataShown(
        held,
        chats,
        await zones.show() if zones is not None else None,
        await lists.page("commitments"),
        await lists.page("reminders"),
        lists.viewer,
        followup_preference=preference,
        retention=call.config().storage.retention,
    )


async def _export(call: Invocation, arguments: Arguments) -> Result:
    rights = call.rights()
    if rights is None:
        return Told(wording.RIGHTS_UNAVAILABLE)
    if not call.private:
        return Told(wording.private_only("export"))
    return await rights.export()


async def _followups(call: Invocation, arguments: Arguments) -> Result:
    """No argument: the state here. `on` / `off`: in a private chat the
    asker's own; in a shared chat a chat admin's switches the whole chat, a
    member's only themselves (the answer says which)."""
    prefs = call.followup_prefs
    if prefs is None:
        return Told(wording.FOLLOWUPS_UNAVAILABLE)
    typed = _one(arguments, "state").strip()
    access = call.access
    key = access.asker.session_key if access.shared else None
    if not typed:
        state = await prefs.state(call.agent_id, call.platform, call.user_id, key)
        return Told(wording.followups_state(state, shared=access.shared))
    enabled = parse_switch(typed)
    if enabled is None:
        command = COMMANDS.get("followups")
        assert command is not None
        return WrongUsage(command)
    now = call.clock.now()
    if access.shared and await access.admin():
        switched = await prefs.set_chat(call.agent_id, access.asker.session_key, enabled, now=now)
        return Told(wording.followups_switched(switched, whole_chat=True))
    switched = await prefs.set_user(call.agent_id, call.platform, call.user_id, enabled, now=now)
    # A member's own "on" under a group switched off: say why nothing comes here.
    state = await prefs.state(call.agent_id, call.platform, call.user_id, key)
    answer = wording.followups_switched(
        switched, whole_chat=False, state=state, shared=access.shared
    )
    return Told(answer)


async def _usage(call: Invocation, arguments: Arguments) -> Result:
    """The asker's own UTC day, wherever they ask: in a group too it is
    theirs alone (a platform user's, in every chat), never the group's."""
    if call.spend is None:
        return Told(wording.USAGE_UNAVAILABLE)
    return await call.spend.today(
        call.config(), call.platform, call.user_id, call.clock.now(), shared=call.access.shared
    )


_FOLLOWUP_ID = "The follow-up's id, e.g. cm_1a2b3c4d5e6f"

COMMANDS = Registry(
    [
        Command(
            "help",
            "What kept does and the commands",
            Permission.ANYONE,
            _help,
            aliases=("start",),
        ),
        Command(
            "commitments",
            "Your open follow-ups in this chat",
            Permission.CHAT,
            _commitments,
            discord=("commitments", "list"),
        ),
        Command(
            "dismiss",
            "Drop a follow-up",
            Permission.CHAT,
            _dismiss,
            (Argument("id", _FOLLOWUP_ID, "ID", many=True),),
            hint="the ids are in /commitments",
            discord=("commitments", "dismiss"),
        ),
        Command(
            "snooze",
            "Postpone a follow-up",
            Permission.CHAT,
            _snooze,
            (
                Argument("id", _FOLLOWUP_ID, "ID"),
                Argument("duration", "How long to wait, e.g. 2h, 1d, 3d", "2h"),
            ),
            hint="a duration like 30m, 2h or 3d",
            discord=("commitments", "snooze"),
        ),
        Command(
            "reminders",
            "Your reminders in this chat",
            Permission.CHAT,
            _reminders,
            discord=("reminders", "list"),
        ),
        Command(
            "cancel",
            "Cancel a reminder",
            Permission.CHAT,
            _cancel,
            (Argument("id", "The reminder's id, e.g. rm_1a2b3c4d5e6f", "ID"),),
            hint="the ids are in /reminders",
            discord=("reminders", "cancel"),
        ),
        Command(
            "timezone",
            "Your time zone",
            Permission.OWN,
            _timezone,
            (
                Argument(
                    "zone",
                    "An IANA name such as Europe/Paris, or clear",
                    "Europe/Paris",
                    required=False,
                    rest=True,
                ),
            ),
            discord=("timezone",),
        ),
        Command(
            "new",
            "Start our conversation in this chat over",
            Permission.CHAT_ADMIN,
            _new,
            discord=("new",),
        ),
        Command(
            "forget",
            "Erase everything I hold from you",
            Permission.OWN,
            _forget,
            discord=("forget",),
        ),
        Command(
            "mydata",
            "What I hold about you",
            Permission.OWN,
            _mydata,
            discord=("mydata",),
        ),
        Command(
            "export",
            "Everything I hold from you, as a file",
            Permission.OWN,
            _export,
            discord=("export",),
        ),
        Command(
            "followups",
            "Switch my check-ins with you off or on",
            Permission.CHAT,
            _followups,
            (
                Argument(
                    "state",
                    "on or off; in a group an admin's applies to the whole group",
                    "on|off",
                    required=False,
                ),
            ),
            discord=("followups",),
        ),
        Command(
            "usage",
            "What you used of the model today, and what is left",
            Permission.OWN,
            _usage,
            discord=("usage",),
        ),
    ]
)
