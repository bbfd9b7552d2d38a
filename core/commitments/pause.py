"""Per-agent pauses of the extraction pass after errors that will not fix
themselves (a wrong API key, an unknown model name).

Retrying those on every turn would fill the log with one identical line per
message and waste requests; instead the agent's extraction stops for a while,
with exactly one log line saying why and what to do, and one when it works
again.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from core.clock import Clock
from core.logs import event

log = logging.getLogger("kept.commitments")

PAUSING_KINDS: dict[str, str] = {
    "auth": "check the API key in the environment variable named by llm.apiKeyEnv",
    "not_found": "check llm.models.extraction (or llm.models.chat): the endpoint "
    "does not know this model",
}


class Pauses:
    def __init__(self, clock: Clock, pause: timedelta) -> None:
        self._clock = clock
        self._pause = pause
        self._until: dict[str, datetime] = {}

    def paused(self, agent_id: str) -> bool:
        until = self._until.get(agent_id)
        return until is not None and self._clock.now() < until

    def failed(self, agent_id: str, session_key: str, kind: str, error: str) -> None:
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
        if self.paused(agent_id):
            return  # a concurrent call of the same batch already paused it
        until = self._until[agent_id] = self._clock.now() + self._pause
        event(
            log,
            logging.WARNING,
            "extraction_paused",
            agent=agent_id,
            kind=kind,
            until=until.isoformat(timespec="seconds"),
            error=error,
            action=PAUSING_KINDS[kind],
        )

    def succeeded(self, agent_id: str) -> None:
        if self._until.pop(agent_id, None) is not None:
            event(log, logging.INFO, "extraction_resumed", agent=agent_id)
