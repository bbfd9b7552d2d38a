"""What a config reload changes: the keys that differ, which of them a running
bot applies only at its next start, and the search visibility warning given
at start and again by a reload that widens it (the channels' access
warnings are channels/access.py's, given the same two ways)."""

from __future__ import annotations

import logging
from typing import Any

from core.config.model import KeptConfig
from core.logs import event

# Key paths (camelCase, `*` for any list index or platform) read once at
# start; the README's "applies" column says "restart" for each of them.
RESTART_ONLY = (
    "storage.url",
    "storage.pinCpu",
    "channels.*.enabled",
    "channels.*.tokenEnv",
    "channels.telegram.baseUrl",
    "channels.telegram.webhook",
    "channels.discord.devGuildId",
    "channels.discord.messageContentIntent",
    "channels.discord.apiBaseUrl",
    "channels.discord.shardCount",
    "channels.discord.shardIds",
    "http.listen",
    "logging.level",
    "logging.format",
)

# sessions.search.visibility, narrowest first.
_VISIBILITY_ORDER = ("self", "agent", "all")


def restart_only(key: str) -> str | None:
    """The RESTART_ONLY entry `key` (a dotted path) falls under, if any."""
    parts = key.split(".")
    for pattern in RESTART_ONLY:
        wanted = pattern.split(".")
        if len(parts) >= len(wanted) and all(
            w in ("*", p) for w, p in zip(wanted, parts, strict=False)
        ):
            return ".".join(parts[: len(wanted)])
    return None


def _leaves(node: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            _leaves(value, f"{prefix}.{key}" if prefix else key, out)
    elif isinstance(node, list) and node and isinstance(node[0], dict):
        for index, value in enumerate(node):
            _leaves(value, f"{prefix}.{index}", out)
    else:
        out[prefix] = node


def changed_keys(old: KeptConfig, new: KeptConfig) -> list[str]:
    """Dotted key paths whose value differs between `old` and `new`."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    _leaves(old.model_dump(mode="json", by_alias=True), "", before)
    _leaves(new.model_dump(mode="json", by_alias=True), "", after)
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def restart_only_changes(old: KeptConfig, new: KeptConfig) -> list[str]:
    """The restart-only keys a reload changed (each named once)."""
    found = (restart_only(key) for key in changed_keys(old, new))
    return sorted({key for key in found if key is not None})


def announce_restart_needed(log: logging.Logger, keys: list[str]) -> None:
    for key in keys:
        event(
            log,
            logging.WARNING,
            "config_restart_needed",
            key=key,
            note="read at start: the running bot keeps the value it started with",
            action="restart kept to apply it (`systemctl restart kept`)",
        )


def announce_search_visibility(
    log: logging.Logger, config: KeptConfig, before: KeptConfig | None = None
) -> None:
    """At start (`before` None): a warning when a chat's search reaches other
    chats. On a reload: the same warning when the reload widened it."""
    level = config.sessions.search.visibility
    if level == "self":
        return
    if before is not None:
        was = before.sessions.search.visibility
        if _VISIBILITY_ORDER.index(was) >= _VISIBILITY_ORDER.index(level):
            return
    event(
        log,
        logging.WARNING,
        "search_visibility_wide",
        visibility=level,
        action="sessions_search in one chat finds what was said in every other chat of the "
        "same agent; set sessions.search.visibility to self unless that is what you want",
    )
