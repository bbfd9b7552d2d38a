"""The heartbeat's decision log: one event per scope and outcome."""

from __future__ import annotations

import logging

from core.commitments.model import Scope
from core.logs import event

log = logging.getLogger("kept.heartbeat")


def log_decision(scope: Scope, due: int, outcome: str, **fields: object) -> None:
    event(
        log,
        logging.WARNING if outcome in ("failed", "model_failed") else logging.INFO,
        "heartbeat",
        agent=scope.agent_id,
        session=scope.session_key,
        due=due,
        outcome=outcome,
        **fields,
    )
