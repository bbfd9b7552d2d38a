"""The chat model's `set_timezone` tool: it proposes, the user decides.

When a user says where they are or what time it is for them, the model may
propose a zone. The tool changes nothing: it puts "Yes, use <zone>" / "No"
buttons under the model's reply (core/messages.py ZoneChoice), and only a
press by that user stores it (core/commands/timezone.py). A platform
without buttons gets no offer; the model is told to suggest `/timezone`.
"""

from __future__ import annotations

from typing import Any

from core.messages import zone_choices
from core.tools import Tool, ToolContext, ToolError, ToolRegistry, ToolResult
from core.users.zones import UserZones, ZoneError, parse_zone

# Platforms whose adapters ask the user to confirm a ZoneChoice: buttons on
# Telegram and Discord, a y / n question in `kept chat`.
CONFIRMS_BY_BUTTON = frozenset({"telegram", "discord", "console"})

DESCRIPTION = (
    "Propose setting the user's own time zone, when they say where they are or "
    "what their local time is. It changes nothing by itself: the user gets a "
    "button to confirm under your reply. Use an IANA name such as Europe/Paris "
    "or Asia/Tokyo."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "timezone": {"type": "string", "description": "IANA time zone, e.g. Europe/Paris"},
    },
    "required": ["timezone"],
    "additionalProperties": False,
}


def register_user_tools(registry: ToolRegistry, zones: UserZones) -> None:
    async def set_timezone(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        raw = args.get("timezone")
        if not isinstance(raw, str):
            raise ToolError("timezone must be a string such as Europe/Paris")
        if not ctx.sender_id:
            raise ToolError("this turn has no user whose time zone could be set")
        try:
            zone = parse_zone(raw)
        except ZoneError as exc:
            raise ToolError(str(exc)) from None
        platform = ctx.target.platform
        current = await zones.own(platform, ctx.sender_id)
        if current == zone:
            return {"status": "unchanged", "timezone": zone, "note": "already the user's zone"}
        if platform not in CONFIRMS_BY_BUTTON:
            return {
                "status": "not_offered",
                "timezone": zone,
                "note": f"nothing changed; tell the user they can type /timezone {zone}",
            }
        if not any(getattr(o, "user_id", None) == ctx.sender_id for o in ctx.offers):
            ctx.offers.extend(zone_choices(ctx.sender_id, zone))
        return {
            "status": "proposed",
            "timezone": zone,
            "current": current,
            "note": "nothing is changed yet: the user sees Yes / No buttons under your "
            "reply. Ask them to confirm; do not say it is set.",
        }

    registry.register(Tool("set_timezone", DESCRIPTION, PARAMETERS, set_timezone))
