"""Model calls recorded as the meter records them (core/limits/meter.py):
the call's row and its tokens on the payer's and the bot's day, through
the budgets' own `record`. For the `/usage`, `kept usage`, doctor and
export tests."""

from __future__ import annotations

from datetime import datetime

from core.limits.meter import budget_day
from core.limits.store import BOT, CallUsage, Subject
from core.store.backends import Backend


async def record_call(
    backend: Backend,
    platform: str,
    user: str,
    tokens_in: int,
    tokens_out: int,
    at: datetime,
    *,
    chat: str | None = None,
    estimated: bool = False,
    model: str = "gpt-4.1-mini",
    role: str = "chat",
    agent: str = "main",
) -> None:
    shared = chat is not None and chat != user
    usage = CallUsage(
        at=at, agent_id=agent, role=role, model=model, platform=platform, user_id=user,
        chat_id=chat or user, shared=shared, tokens_in=tokens_in, tokens_out=tokens_out,
        estimated=estimated,
    )  # fmt: skip
    subjects = [Subject("user", platform, user), BOT]
    if shared:
        subjects.insert(1, Subject("chat", platform, chat or ""))
    await backend.budgets.record(usage, subjects, budget_day(at), None)
