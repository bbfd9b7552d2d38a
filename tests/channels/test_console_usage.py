"""`/usage` in `kept chat`, on both backends: the local user's own UTC day
(an operator's own `kept chat` is charged like anyone), and what is left of
`limits.perUser.tokensPerDay` when a cap is set (none here: it says so)."""

from __future__ import annotations

from datetime import timedelta

from tests.channels.test_console_rights import Chat, chat  # noqa: F401 (the fixture)
from tests.support.usage_rows import record_call


async def test_usage_shows_the_local_users_own_day(chat: Chat) -> None:  # noqa: F811
    before = await chat.say("/usage", "No daily allowance")
    assert "0 calls, 0 tokens in, 0 tokens out" in " ".join(before.split())
    backend, now = chat.services.backend, chat.clock.now()
    await record_call(backend, "console", "ann", 2500, 500, now - timedelta(minutes=5))
    await record_call(backend, "console", "bob", 9999, 9999, now)
    shown = " ".join((await chat.say("/usage", "No daily allowance")).split())
    assert "Your use of the model today (the UTC day 2026-11-30): 1 call, 2,500 tokens in, " in (
        shown
    )
    assert "500 tokens out." in shown and "9,999" not in shown
    assert chat.model.requests == []
