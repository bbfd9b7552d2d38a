"""The agent's `sessions_search` and `sessions_history` tools.

The calling chat comes from the ToolContext (the stored session), never from
the model's arguments; a sessionKey argument can only narrow the search, and
one outside the caller's visibility is refused, not answered."""

from __future__ import annotations

from typing import Any

from core.search.service import (
    DEFAULT_LIMIT,
    HISTORY_DEFAULT,
    HISTORY_MAX,
    MAX_LIMIT,
    Caller,
    NotVisible,
    SessionSearch,
    clamp_limit,
)
from core.store.base import SearchScope
from core.tools import Tool, ToolContext, ToolError, ToolRegistry

INDEXING_NOTE = "The search index is still catching up: results may be incomplete."

SEARCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": 'Words to find (all must match). "Quoted words" match as a phrase; '
            "a trailing * matches a prefix. Any language.",
        },
        "sessionKey": {
            "type": "string",
            "description": "Only this conversation (default: every conversation you may see).",
        },
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
    },
    "required": ["query"],
}

HISTORY_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sessionKey": {
            "type": "string",
            "description": "The conversation to read (default: this one).",
        },
        "messageId": {
            "type": "integer",
            "description": "Read around this message (a search result's messageId); "
            "default: the latest messages.",
        },
        "limit": {"type": "integer", "minimum": 1, "maximum": HISTORY_MAX},
    },
}


def register_search_tools(registry: ToolRegistry, search: SessionSearch) -> None:
    async def sessions_search(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("query must be a non-empty string")
        scope = _scope(search, ctx, args.get("sessionKey"))
        limit = clamp_limit(args.get("limit"), DEFAULT_LIMIT, MAX_LIMIT)
        answer = (await search.search(query, scope, limit)).as_json()
        if answer["indexing"]:
            answer["note"] = INDEXING_NOTE
        return answer

    async def sessions_history(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        scope = _scope(search, ctx, args.get("sessionKey") or ctx.session_key)
        assert scope.session_key is not None  # narrowed to one session above
        message_id = args.get("messageId")
        if message_id is not None and not isinstance(message_id, int):
            raise ToolError("messageId must be an integer from a search result")
        limit = clamp_limit(args.get("limit"), HISTORY_DEFAULT, HISTORY_MAX)
        return await search.history(scope.session_key, message_id, limit)

    registry.register(
        Tool(
            "sessions_search",
            "Search past conversations by exact words. Returns snippets with the "
            "conversation, time and role; truncated: true means more matches exist "
            "(narrow the query or raise the limit).",
            SEARCH_PARAMETERS,
            sessions_search,
        )
    )
    registry.register(
        Tool(
            "sessions_history",
            "Read the messages of a conversation, around a search hit or the latest ones.",
            HISTORY_PARAMETERS,
            sessions_history,
        )
    )


def _scope(search: SessionSearch, ctx: ToolContext, session_key: Any) -> SearchScope:
    if session_key is not None and not isinstance(session_key, str):
        raise ToolError("sessionKey must be a string")
    try:
        return search.scope_for(Caller(ctx.agent_id, ctx.session_key), session_key)
    except NotVisible as exc:
        raise ToolError(f"session {exc.args[0]!r} is not visible from this conversation") from None
