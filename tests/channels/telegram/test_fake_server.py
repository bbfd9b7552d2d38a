"""The fake Bot API itself: tokens are checked and updates confirmed by offset."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from tests.fakes.telegram_server import FakeTelegram


async def test_fake_refuses_a_wrong_token_and_confirms_by_offset(tmp_path: Path) -> None:
    async with FakeTelegram() as fake, aiohttp.ClientSession() as http:
        async with http.post(f"{fake.root}/botWRONG/getMe") as resp:
            assert resp.status == 401
        await fake.push_message("one")
        await fake.push_message("two")
        url = f"{fake.root}/bot{fake.token}/getUpdates"
        async with http.post(url, data={"timeout": "0"}) as resp:
            ids = [u["update_id"] for u in (await resp.json())["result"]]
        assert len(ids) == 2
        async with http.post(url, data={"offset": str(ids[0] + 1), "timeout": "0"}) as resp:
            assert [u["update_id"] for u in (await resp.json())["result"]] == ids[1:]
        assert fake.confirmed == ids[:1]
