"""Answering what a stopped or dead worker left unanswered, while running.

At start-up `kept run` answers the messages stored but never answered (the
previous process stopped mid-turn). With several workers, the one that died
is not the one that restarts: its chats' stored messages would wait for the
chat's next message. So every worker looks again every RECOVERY_EVERY for
messages unanswered for at least QUIET_FOR whose chat nobody holds; a live
turn holds its chat (the database's session lock) for its whole length, so
a chat nobody holds with an old unanswered message has nobody answering it.
Answering is the manager's usual owed-first turn under the chat's lock, so a
message is never answered twice, whoever gets there first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from core.clock import Clock
from core.conversation.manager import ConversationManager
from core.logs import event

log = logging.getLogger("kept.conversation")

RECOVERY_EVERY = 60.0
QUIET_FOR = timedelta(seconds=60)


class UnansweredRecovery:
    def __init__(
        self,
        manager: ConversationManager,
        clock: Clock,
        platforms: Callable[[], set[str]],
        every: float = RECOVERY_EVERY,
    ) -> None:
        self._manager = manager
        self._clock = clock
        self._platforms = platforms
        self._every = every

    async def run(self) -> None:
        """Look every `every` seconds until cancelled; never raises."""
        while True:
            await self._clock.sleep(self._every)
            await self.look()

    async def look(self) -> int:
        try:
            return await self._manager.recover_unanswered(
                platforms=self._platforms(), quiet_for=QUIET_FOR
            )
        except Exception as exc:
            event(
                log,
                logging.WARNING,
                "recovery_failed",
                error=repr(exc),
                action="check the database; the next look retries",
            )
            return 0
