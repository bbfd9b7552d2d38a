"""Starting a chat's conversation over (`/new`).

The start is a column of the session's row (`sessions.context_after`: the
id of the last message before it), read by the very statements that build a
turn's context, so whichever worker answers next, and a restarted process,
sees it: nothing about it is cached in memory (the manager's session cache
holds the session's identity only).

What the start changes, for every model call of the chat:
- the chat model's history (`Store.history`) holds only later turns;
- a message stored before it and never answered is not answered any more
  (`Store.unanswered`, `unanswered_up_to`), nor is an answer to one that
  never left sent (`Store.unsent_replies`): they belonged to the earlier
  conversation, which the user just closed (a turn already under way when
  the start comes still finishes and sends its reply);
- the extraction model never reads exchanges from both sides of a start in
  one call (core/commitments/batch.py).
The check-in model reads no transcript at all (only the follow-ups, which
stay until dismissed). The earlier messages stay stored: the search tools
and `kept search` find them, `/forget` and `kept sessions forget` erase
them, the export holds them.
"""

from __future__ import annotations

import logging

from core.logs import event
from core.store.base import Store

log = logging.getLogger("kept.conversation")


class StartOver:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def start_over(self, *, agent_id: str, session_key: str, user_id: str) -> None:
        """Start the chat's conversation afresh, asked by `user_id` (whom the
        caller checked may). A chat with nothing stored yet has nothing
        earlier to leave out: that is a start too."""
        stored = await self._store.start_over(session_key)
        event(
            log,
            logging.INFO,
            "conversation_started_over",
            agent=agent_id,
            session=session_key,
            user=user_id,
            stored=stored,
        )
