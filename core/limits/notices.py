"""What a user reads when a limit stops kept from answering: one line that
says when it will answer again."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from core.limits.meter import BudgetSpent


def wait_words(wait: timedelta) -> str:
    """A wait as a person says it: "40 seconds", "3 minutes", "5 h 20 min"."""
    seconds = max(1, math.ceil(wait.total_seconds()))
    if seconds < 90:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = math.ceil(seconds / 60)
    if minutes < 90:
        return f"{minutes} minutes"
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def rate_notice(retry_at: datetime, now: datetime, *, shared: bool) -> str:
    who = "This chat is" if shared else "You are"
    return (
        f"{who} writing faster than I answer, so I am not answering these messages "
        f"(they are kept). Write again in {wait_words(retry_at - now)} and I will."
    )


def budget_notice(spent: BudgetSpent, now: datetime) -> str:
    whose = {"user": "your", "chat": "this chat's", "bot": "my"}[spent.subject.kind]
    return (
        f"I have used up {whose} model allowance for today, so I cannot answer for now "
        f"(your messages are kept). It resets at 00:00 UTC, in {wait_words(spent.resets_at - now)}."
    )


CUT_SHORT = "(My answer was cut short here: it reached its length limit.)"
