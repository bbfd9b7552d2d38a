"""The reminders' log: one structured event per reminder and decision."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from core.logs import event
from core.reminders.model import Reminder

log = logging.getLogger("kept.reminders")


def log_reminder(level: int, name: str, r: Reminder, **fields: Any) -> None:
    times = {k: v.isoformat() for k, v in fields.items() if isinstance(v, datetime)}
    event(
        log,
        level,
        name,
        agent=r.agent_id,
        session=r.session_key,
        reminder=r.id,
        kind=r.kind,
        **{**fields, **times},
    )
