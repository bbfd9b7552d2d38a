"""A user's export, on each backend: their private chats whole, in a group
only their messages and the bot's replies to them, their follow-ups,
reminders, queued exchanges and settings; nothing of anyone else's; the
same rows an erasure counts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from core.privacy.export import document
from core.privacy.store import ErasedUser
from core.store.backends import Backend, open_backend
from tests.support.usage_rows import record_call
from tests.support.user_data import ANN, BEN, GROUP, NOW, OTHER_AGENT, PRIVATE, seed


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    async with open_backend(storage_url) as opened:
        yield opened


async def test_an_export_holds_all_of_theirs_and_nothing_of_anyone_elses(
    backend: Backend,
) -> None:
    await seed(backend)
    ann = ErasedUser("telegram", ANN)
    exported = await backend.exports.export(ann)
    doc = document(exported, at=NOW)
    assert (doc["kind"], doc["version"], doc["userId"]) == ("kept-user-export", 1, ANN)
    chats = {c["sessionKey"]: c for c in doc["chats"]}
    assert set(chats) == {PRIVATE, GROUP, OTHER_AGENT}
    assert [m["text"] for m in chats[PRIVATE]["messages"]] == [
        "my zebracorn interview is tomorrow", "Good luck!", "I slept badly", "Sorry to hear",
    ]  # fmt: skip
    assert [m["text"] for m in chats[GROUP]["messages"]] == ["zebracorn in the group", "noted"]
    assert {f["reason"] for f in doc["followUps"]} == {"the interview", "the match", "elsewhere"}
    assert {r["text"] for r in doc["reminders"]} == {"stretch", "ann's group reminder"}
    assert [q["userText"] for q in doc["queuedForExtraction"]] == ["queued words"]
    assert doc["settings"] == {"timezone": "Europe/Paris", "paired": True, "followUps": []}
    text = json.dumps(doc)
    # No other member's word or id (as a value: a random id may hold the digits).
    assert "ben" not in text.lower() and f'"{BEN}"' not in text
    bens = json.dumps(document(await backend.exports.export(ErasedUser("telegram", BEN)), at=NOW))
    assert f'"{BEN}"' in bens  # the check finds his id where it is
    counts = await backend.erasure.count(ann)
    assert counts.messages == sum(len(c["messages"]) for c in doc["chats"])
    assert counts.follow_ups == len(doc["followUps"]) and counts.queued == 1


async def test_one_agents_export_and_a_stranger_s_empty_one(backend: Backend) -> None:
    await seed(backend)
    main_only = await backend.exports.export(ErasedUser("telegram", ANN, "main"))
    assert {c.key for c in main_only.chats} == {PRIVATE, GROUP}
    nobody = document(await backend.exports.export(ErasedUser("discord", "5")), at=NOW)
    assert (nobody["chats"], nobody["followUps"], nobody["reminders"]) == ([], [], [])
    assert nobody["settings"] == {"timezone": None, "paired": False, "followUps": []}


async def test_an_export_holds_their_model_calls_and_an_erasure_removes_them(
    backend: Backend,
) -> None:
    await seed(backend)
    ann = ErasedUser("telegram", ANN)
    before = document(await backend.exports.export(ann), at=NOW)
    assert before["modelUsage"] == []
    await record_call(backend, "telegram", ANN, 120, 30, NOW, estimated=True)
    await record_call(backend, "telegram", ANN, 50, 5, NOW, chat="-500", role="extraction")
    await record_call(backend, "telegram", ANN, 7, 7, NOW, agent="side")
    await record_call(backend, "telegram", BEN, 999, 999, NOW, chat="-500")
    doc = document(await backend.exports.export(ann), at=NOW)
    assert doc["modelUsage"][0] == {
        "at": "2026-12-01T09:00:00Z", "agentId": "main", "role": "chat",
        "model": "gpt-4.1-mini", "chatId": ANN, "tokensIn": 120, "tokensOut": 30,
        "estimated": True,
    }  # fmt: skip
    assert [(u["role"], u["chatId"], u["agentId"]) for u in doc["modelUsage"]] == [
        ("chat", ANN, "main"), ("extraction", "-500", "main"), ("chat", ANN, "side"),
    ]  # fmt: skip
    assert "999" not in json.dumps(doc["modelUsage"])  # Ben's call is his
    main_only = await backend.exports.export(ErasedUser("telegram", ANN, "main"))
    assert len(main_only.usage) == 2
    # The same rows an erasure counts and removes; Ben's stay.
    assert (await backend.erasure.count(ann)).usage == 3
    await backend.erasure.erase(ann)
    assert (await backend.exports.export(ann)).usage == []
    assert len((await backend.exports.export(ErasedUser("telegram", BEN))).usage) == 1
