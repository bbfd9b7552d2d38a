"""`/new` through the fake Bot API with the real python-telegram-bot: the
chat's next turn reaches the model without the earlier messages; in a group
only a chat administrator may start the shared conversation over."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.commands import wording
from core.search.redact import Redactor
from core.store.base import SearchScope
from tests.support.telegram_harness import TelegramHarness, telegram_harness

GROUP = -100800
ADMIN, MEMBER = 8, 9
PRIVATE_KEY = "agent:main:telegram:private:42"
GROUP_KEY = f"agent:main:telegram:group:{GROUP}"


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path) as harness:
        harness.fake.members[(GROUP, ADMIN)] = "administrator"
        yield harness


async def said(tg: TelegramHarness, text: str, **where: object) -> str:
    """Send a message (or command) and return the bot's answer to it."""
    before = len(tg.fake.sent)
    await tg.fake.push_message(text, **where)  # type: ignore[arg-type]
    await tg.fake.wait_for(lambda: len(tg.fake.sent) > before)
    return tg.fake.sent[before].text


def last_context(tg: TelegramHarness) -> list[str]:
    _, messages, _ = tg.model.requests[-1]
    return [m["content"] for m in messages[1:]]


def in_group(user: int) -> dict[str, object]:
    return {"chat_id": GROUP, "chat_type": "supergroup", "user_id": user}


async def test_new_in_a_private_chat_starts_the_conversation_over(tg: TelegramHarness) -> None:
    await tg.start()
    await said(tg, "my code word is zebra", chat_id=42)
    await said(tg, "remember it?", chat_id=42)
    assert "my code word is zebra" in last_context(tg)  # positive control
    requests = len(tg.model.requests)

    assert await said(tg, "/new", chat_id=42) == wording.STARTED_OVER
    assert len(tg.model.requests) == requests  # the command is no turn

    assert await said(tg, "what was it?", chat_id=42) == "echo: what was it?"
    assert last_context(tg) == ["what was it?"]
    hits = await tg.store.search(
        "zebra", scope=SearchScope(session_key=PRIVATE_KEY), limit=5, redactor=Redactor()
    )
    assert hits  # still stored and searchable


async def test_in_a_group_a_member_is_refused_and_an_admin_starts_over(
    tg: TelegramHarness,
) -> None:
    await tg.start()
    await said(tg, "@kept_bot the plan is zebra", **in_group(MEMBER))

    assert await said(tg, "/new", **in_group(MEMBER)) == wording.NEW_ADMINS_ONLY
    await said(tg, "@kept_bot what was the plan?", **in_group(MEMBER))
    assert "@kept_bot the plan is zebra" in last_context(tg)  # the refusal changed nothing

    assert await said(tg, "/new@kept_bot", **in_group(ADMIN)) == wording.STARTED_OVER
    await said(tg, "@kept_bot hello", **in_group(MEMBER))
    assert last_context(tg) == ["@kept_bot hello"]
    assert list(await tg.store.context_starts([GROUP_KEY, PRIVATE_KEY])) == [GROUP_KEY]


async def test_help_and_the_command_menu_list_new(tg: TelegramHarness) -> None:
    await tg.start()
    menu = tg.fake.calls_to("setMyCommands")[0].params["commands"]
    assert "new" in {c["command"] for c in menu}
    assert "/new" in await said(tg, "/help", chat_id=42)
