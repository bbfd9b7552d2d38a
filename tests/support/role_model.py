"""A model that answers per role, for the full-story tests on every platform:
a chat reply; for extraction the interview commitment DESIGN.md shows when the
exchange mentions an interview, else nothing; the check-in for the heartbeat."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from core.llm import Completion
from tests.support.scripted_model import text

PARIS = ZoneInfo("Europe/Paris")


def interview_answer(now: datetime) -> str:
    """The extraction answer DESIGN.md shows for "interview tomorrow"."""
    evening = (now + timedelta(days=1)).astimezone(PARIS).replace(hour=18, minute=0, second=0)
    candidate = {
        "kind": "event_check_in",
        "sensitivity": "routine",
        "source": "inferred_user_context",
        "dueWindow": {
            "earliest": evening.isoformat(),
            "latest": (evening + timedelta(hours=18)).isoformat(),
        },
        "reason": "user has a job interview tomorrow",
        "suggestedText": "How did the interview go?",
        "confidence": 0.9,
        "dedupeKey": f"interview:{evening.date().isoformat()}",
    }
    return json.dumps({"candidates": [candidate], "resolved": []})


class RoleModel:
    """Answers per role: a chat reply; for extraction the interview
    commitment when the exchange mentions an interview, else nothing; the
    check-in for the heartbeat."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self.now = now
        self.roles: list[str] = []

    async def complete(
        self,
        role: str,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
    ) -> Completion:
        self.roles.append(role)
        if role == "extraction":
            # The exchange travels in the last user message (the system
            # prompt's own example mentions an interview too).
            if "interview" in str(messages[-1]["content"]).lower():
                return text(interview_answer(self.now()))
            return text('{"candidates": [], "resolved": []}')
        if role == "heartbeat":
            return text("How did the interview go?")
        return text("Good luck! You'll do great.")
