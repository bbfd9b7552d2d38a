"""Terminal output shared by the listing commands."""

from __future__ import annotations

import sys

from rich.console import Console, RenderableType

from core.privacy.store import ErasureCounts


def scope_label(agent_id: str, platform: str, chat_id: str, thread_id: str | None) -> str:
    """`agent / platform / chat [#thread]`, as the tables' captions explain."""
    where = f"{agent_id} / {platform} / {chat_id}"
    return where + (f" #{thread_id}" if thread_id else "")


def member_label(sender_id: str | None) -> str:
    """Whose a follow-up is: the platform user id of the member whose message
    it came from (several members share a group chat's scope)."""
    return sender_id if sender_id else "-"


def print_table(table: RenderableType) -> None:
    # A terminal gets its own width; a pipe or file gets room for whole rows.
    width = None if sys.stdout.isatty() else 200
    Console(highlight=False, width=width).print(table)


def counts_json(counts: ErasureCounts) -> dict[str, int]:
    """An erasure's counts as the --json documents name them."""
    return {
        "privateChats": counts.chats,
        "messages": counts.messages,
        "followUps": counts.follow_ups,
        "reminders": counts.reminders,
        "queuedExchanges": counts.queued,
        "platformUpdates": counts.updates,
        "settings": counts.settings,
        "usage": counts.usage,
    }
