"""The chat prompt says where the turn is, what renders there, and the user's time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.config.model import AgentConfig
from core.conversation.prompt import TurnPlace, system_prompt

NOW = datetime(2026, 12, 1, 0, 30, tzinfo=UTC)
AGENT = AgentConfig(id="main", system_prompt="Be kind.", timezone="Europe/Paris")


@pytest.mark.parametrize(
    ("platform", "kind", "says"),
    [
        ("telegram", "private", ["on Telegram", "private chat", "Tables do not render"]),
        ("telegram", "group", ["on Telegram", "group chat", "several people"]),
        ("discord", "channel", ["on Discord", "renders Markdown", "a channel"]),
        ("console", "private", ["terminal as plain text", "without Markdown"]),
    ],
)
def test_the_prompt_says_where_it_writes(platform: str, kind: str, says: list[str]) -> None:
    place = TurnPlace(platform, kind, NOW, "Europe/Paris", own_zone=False)  # type: ignore[arg-type]
    prompt = system_prompt(AGENT, place)
    assert prompt.startswith("Be kind.\n\n")
    for words in says:
        assert words in prompt


def test_the_users_own_zone_gives_the_local_time() -> None:
    tokyo = system_prompt(AGENT, TurnPlace("telegram", "private", NOW, "Asia/Tokyo", True))
    assert "Current time for the user: Tuesday 2026-12-01 09:30 (Asia/Tokyo)" in tokyo
    assert "the user's own time zone" in tokyo
    default = system_prompt(AGENT, TurnPlace("telegram", "private", NOW, "Europe/Paris", False))
    assert "Tuesday 2026-12-01 01:30 (Europe/Paris)" in default
    assert "no time zone of their own" in default
