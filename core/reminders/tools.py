"""The chat model's reminder tools: schedule_reminder, list_reminders, cancel_reminder.

Where a reminder goes is taken from the ToolContext (the stored session of the
calling chat), never from the model's arguments: no argument names a chat,
and the list and cancel tools only ever see the calling chat's reminders, so
an id from another chat simply does not exist for them. In a group they follow
the slash commands' rule (core/commitments/visibility.py): the sender's own
reminders, every member's for a chat admin, matched in the store's statement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.commitments.visibility import Asker, ChatAccess
from core.reminders.limits import ReminderRefused
from core.reminders.model import Reminder
from core.reminders.schedule import ScheduleError, local_iso, parse_schedule, zone
from core.reminders.service import ReminderService
from core.tools import Tool, ToolContext, ToolError, ToolRegistry
from core.users import UserZones

MAX_TEXT_CHARS = 1000

SCHEDULE_DESCRIPTION = (
    "Schedule an exact reminder in this chat: its text is sent here, as is, at the time "
    "given. Use it when the user asks to be reminded of something at a time, after a "
    "delay, or on a recurring schedule. Give `text` and exactly one of `at`, `after` or "
    "`cron`. Times without an offset are read in `timezone` (default: the user's)."
)
SCHEDULE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {
            "type": "string",
            "description": "What to send when the reminder fires, written to the user, "
            "e.g. 'Time to call the dentist.'",
        },
        "at": {
            "type": "string",
            "description": "A date and time in ISO 8601 (2026-12-01T09:00, or with an "
            "offset), or a time of day such as '15:00' or '3pm' (its next occurrence).",
        },
        "after": {
            "type": "string",
            "description": "A delay from now, e.g. '20m', '2h', '1d', '1h30m'.",
        },
        "cron": {
            "type": "string",
            "description": "A recurring schedule as a 5-field cron expression "
            "(minute hour day-of-month month day-of-week), e.g. '0 9 * * 1-5' "
            "for weekdays at 09:00.",
        },
        "timezone": {
            "type": "string",
            "description": "IANA time zone such as 'Europe/Paris'; default: the user's.",
        },
    },
    "required": ["text"],
    "additionalProperties": False,
}


def register_reminder_tools(
    registry: ToolRegistry,
    service: ReminderService,
    *,
    refusal: Callable[[ReminderRefused], str],
    default_timezone: Callable[[str], str] | None = None,
    zones: UserZones | None = None,
) -> None:
    """Add the three tools. Times are read in the calling user's own zone
    (`zones`); without one, `default_timezone(agent_id)` (the agent's
    `timezone` setting), UTC when neither is given. `refusal`: the line a
    reminder over a limit is answered with (core/commands/wording.py's,
    passed in by bot/services.py: core.commands imports this package)."""
    if default_timezone is None:
        default_timezone = zones.agent_zone if zones is not None else (lambda _agent: "UTC")
    tools = _ReminderTools(service, default_timezone, zones, refusal)
    registry.register(
        Tool("schedule_reminder", SCHEDULE_DESCRIPTION, SCHEDULE_PARAMETERS, tools.schedule)
    )
    registry.register(
        Tool(
            "list_reminders",
            "List the active reminders of this chat, soonest first, with the current "
            "date and time in the user's time zone.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            tools.list_,
        )
    )
    registry.register(
        Tool(
            "cancel_reminder",
            "Cancel one of this chat's reminders by its id (from list_reminders).",
            {
                "type": "object",
                "properties": {"id": {"type": "string", "description": "e.g. rm_1a2b3c4d5e6f"}},
                "required": ["id"],
                "additionalProperties": False,
            },
            tools.cancel,
        )
    )


class _ReminderTools:
    def __init__(
        self,
        service: ReminderService,
        default_timezone: Callable[[str], str],
        zones: UserZones | None,
        refusal: Callable[[ReminderRefused], str],
    ) -> None:
        self._service = service
        self._default_timezone = default_timezone
        self._zones = zones
        self._refusal = refusal

    async def schedule(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        text = _string(args, "text")
        if not text:
            raise ToolError("'text' is required: what should the reminder say?")
        if len(text) > MAX_TEXT_CHARS:
            raise ToolError(
                f"'text' is too long ({len(text)} characters; at most {MAX_TEXT_CHARS})"
            )
        timezone = _string(args, "timezone") or await self._timezone(ctx)
        try:
            schedule = parse_schedule(
                at=_string(args, "at"),
                after=_string(args, "after"),
                cron=_string(args, "cron"),
                timezone=timezone,
                # The service's clock, not ctx.now: a turn may have waited on
                # the model for a while since its context was built.
                now=self._service.clock.now(),
            )
        except ScheduleError as exc:
            raise ToolError(str(exc)) from exc
        try:
            reminder = await self._service.schedule(
                agent_id=ctx.agent_id,
                session_key=ctx.session_key,
                target=ctx.target,
                created_by=ctx.sender_id,
                text=text,
                schedule=schedule,
            )
        except ReminderRefused as exc:
            # Written for the user: the model relays it as it stands.
            raise ToolError(self._refusal(exc)) from exc
        return {"scheduled": True, **_describe(reminder)}

    async def list_(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        owner = await _owner(ctx)
        found = await self._service.list_for_session(
            ctx.agent_id, ctx.session_key, created_by=owner
        )
        timezone = await self._timezone(ctx)
        # The current time too: the model needs today's date to write an ISO time.
        now = local_iso(self._service.clock.now(), timezone)
        return {"now": now, "timezone": timezone, "reminders": [_describe(r) for r in found]}

    async def cancel(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        reminder_id = _string(args, "id")
        if not reminder_id:
            raise ToolError("'id' is required (see list_reminders)")
        scope = {
            "agent_id": ctx.agent_id,
            "session_key": ctx.session_key,
            "created_by": await _owner(ctx),
        }
        done = await self._service.cancel(reminder_id, **scope)
        if done is not None:
            return {"cancelled": True, "id": done.id, "text": done.text}
        current = await self._service.store.get(reminder_id, **scope)
        if current is None:
            raise ToolError(f"no reminder {reminder_id!r} in this chat (see list_reminders)")
        raise ToolError(f"reminder {reminder_id!r} is already {current.status}")

    async def _timezone(self, ctx: ToolContext) -> str:
        """The calling user's own zone, else the agent's."""
        if self._zones is not None:
            own = await self._zones.own(ctx.target.platform, ctx.sender_id)
            if own is not None:
                return own
        try:
            name = self._default_timezone(ctx.agent_id)
            zone(name)
        except Exception:
            return "UTC"  # an agent removed from the config, or a bad setting
        return name


async def _owner(ctx: ToolContext) -> str | None:
    """Whose reminders the sender may list and cancel here (None: every
    member's). A sender nobody can name sees nothing in a shared chat."""
    access = ChatAccess(
        Asker(ctx.agent_id, ctx.session_key, ctx.chat_kind, ctx.sender_id or ""), ctx.is_admin
    )
    owner = await access.owner()
    if owner == "":
        raise ToolError("who is asking is unknown here, so no reminder can be shown")
    return owner


def _string(args: dict[str, Any], key: str) -> str | None:
    """The argument as stripped text; None when absent or empty."""
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolError(f"'{key}' must be a string")
    return value.strip() or None


def _describe(r: Reminder) -> dict[str, Any]:
    """A reminder as the model sees it: times in the user's timezone."""
    described: dict[str, Any] = {
        "id": r.id,
        "text": r.text,
        "next_fire_at": local_iso(r.next_fire_at, r.timezone),
        "timezone": r.timezone,
        "repeats": r.cron if r.cron is not None else "no",
    }
    if r.status != "active":
        described["status"] = r.status
    return described
