"""The AppStateStore on each backend (`storage_url`): a value is read back
as written, replaced whole, kept across a reopen, and one key never shows
another's value."""

from __future__ import annotations

from core.store.backends import open_backend


async def test_values_are_read_back_replaced_and_kept_across_a_reopen(storage_url: str) -> None:
    async with open_backend(storage_url) as backend:
        state = backend.app_state
        assert await state.get("discord.commands:1:global") is None
        await state.put("discord.commands:1:global", "aaa")
        await state.put("discord.commands:1:guild:7", "bbb")
        await state.put("discord.commands:1:global", "ccc")
        assert await state.get("discord.commands:1:global") == "ccc"
        assert await state.get("discord.commands:1:guild:7") == "bbb"
        assert await state.get("discord.commands:2:global") is None

    async with open_backend(storage_url) as reopened:
        assert await reopened.app_state.get("discord.commands:1:global") == "ccc"
