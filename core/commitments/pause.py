"""Per-agent pauses of the extraction pass after errors that will not fix
themselves (a wrong API key, an unknown model name).

Retrying those on every turn would fill the log with one identical line per
message and waste requests; instead the agent's extraction stops for a while,
with exactly one log line saying why and what to do, and one when it works
again. The pause is a row in the database, so with several workers the
first to hit the error pauses every worker and logs it once; the others
learn of it within PAUSE_LOOK (a look costs one read per agent at most that
often, never one per turn).
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from core.clock import Clock
from core.logs import event

log = logging.getLogger("kept.commitments")

PAUSING_KINDS: dict[str, str] = {
    "auth": "check the API key in the environment variable named by llm.apiKeyEnv",
    "not_found": "check llm.models.extraction (or llm.models.chat): the endpoint "
    "does not know this model",
    "no_api_path": "set llm.baseUrl to the API root, usually ending in /v1",
}
# How long a worker trusts "not paused" before it reads the pauses again.
PAUSE_LOOK = timedelta(seconds=5)


@dataclass(frozen=True, slots=True)
class PauseResult:
    began: bool  # no live pause existed: this call started one
    until: datetime  # when the live pause ends


class PauseStore(abc.ABC):
    """The extraction pauses, one row per agent."""

    @abc.abstractmethod
    async def pause(
        self, agent_id: str, *, until: datetime, kind: str, error: str, now: datetime
    ) -> PauseResult:
        """Pause `agent_id` until `until`, unless a pause is live at `now`
        (then that one stands)."""

    @abc.abstractmethod
    async def paused_until(self, agent_id: str) -> datetime | None:
        """The end of the agent's latest pause (maybe past), None if none."""

    @abc.abstractmethod
    async def resume(self, agent_id: str) -> bool:
        """Forget the agent's pause; True if there was one to forget."""


class Pauses:
    def __init__(self, store: PauseStore, clock: Clock, pause: timedelta) -> None:
        self._store = store
        self._clock = clock
        self._pause = pause
        self._known: dict[str, datetime] = {}  # pauses seen or made, maybe ended
        self._looked: dict[str, datetime] = {}  # last read of an agent's pause

    async def paused(self, agent_id: str) -> bool:
        now = self._clock.now()
        until = self._known.get(agent_id)
        if until is not None and now < until:
            return True
        looked = self._looked.get(agent_id)
        if looked is not None and now - looked < PAUSE_LOOK:
            return False
        self._looked[agent_id] = now
        try:
            until = await self._store.paused_until(agent_id)
        except Exception as exc:
            # Extraction goes on: a storage fault is reported by the writes.
            event(log, logging.WARNING, "extraction_pause_unread", agent=agent_id, error=repr(exc))
            return False
        if until is None:
            return False
        self._known[agent_id] = until
        return now < until

    async def failed(self, agent_id: str, session_key: str, kind: str, error: str) -> None:
        """Log a failed extraction call; pause the agent if the error calls for it."""
        if kind not in PAUSING_KINDS:
            event(
                log,
                logging.WARNING,
                "extraction_model_failed",
                agent=agent_id,
                session=session_key,
                kind=kind,
                error=error,
            )
            return
        now = self._clock.now()
        until = now + self._pause
        try:
            result = await self._store.pause(agent_id, until=until, kind=kind, error=error, now=now)
        except Exception as exc:
            # Paused here at least, so this worker does not retry on every turn.
            result = PauseResult(agent_id not in self._known, until)
            event(
                log, logging.WARNING, "extraction_pause_unstored", agent=agent_id, error=repr(exc)
            )
        self._known[agent_id] = result.until
        if not result.began:
            return  # another call (maybe another worker's) paused it and said so
        event(
            log,
            logging.WARNING,
            "extraction_paused",
            agent=agent_id,
            kind=kind,
            until=result.until.isoformat(timespec="seconds"),
            error=error,
            action=PAUSING_KINDS[kind],
        )

    async def succeeded(self, agent_id: str) -> None:
        if self._known.pop(agent_id, None) is None:
            return  # no pause seen: nothing to lift, no read per call
        try:
            lifted = await self._store.resume(agent_id)
        except Exception as exc:
            event(
                log, logging.WARNING, "extraction_pause_unlifted", agent=agent_id, error=repr(exc)
            )
            return
        if lifted:
            event(log, logging.INFO, "extraction_resumed", agent=agent_id)
