"""A reply's send state on every backend: stored -> sending (once, fenced)
-> sent, and the replies still `stored` are the ones recovery sends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from core.store import Store
from tests.core.store.test_contract import KEY, OTHER, T0, add, add_session, ids
from tests.support.store_helpers import open_any_store


@pytest.fixture
async def store(storage_url: str) -> AsyncIterator[Store]:
    async with open_any_store(storage_url) as opened:
        await add_session(opened, KEY)
        await add_session(opened, OTHER)
        yield opened


async def test_a_reply_goes_stored_sending_sent_and_only_once_to_sending(store: Store) -> None:
    user = await add(store, "hello", platform_message_id="7")
    reply = await add(store, "hi", "assistant", at=1, in_reply_to=user.id, send_state="stored")

    assert ids(await store.unsent_replies(since=T0)) == [reply.id]
    assert await store.begin_reply_send(reply.id) is True
    assert await store.begin_reply_send(reply.id) is False  # a second sender is fenced off
    assert await store.unsent_replies(since=T0) == []  # left: in doubt, never sent again
    await store.reply_sent(reply.id, "900")
    assert await store.begin_reply_send(reply.id) is False
    found = await store.get_message(reply.id)
    assert found is not None and found.platform_message_id == "900"


async def test_unsent_replies_are_the_stored_ones_in_order_within_the_window(
    store: Store,
) -> None:
    first = await add(store, "one", at=0, platform_message_id="1")
    second = await add(store, "two", at=1, key=OTHER, platform_message_id="2")
    a = await add(store, "a", "assistant", at=2, in_reply_to=first.id, send_state="stored")
    b = await add(
        store, "b", "assistant", at=3, key=OTHER, in_reply_to=second.id, send_state="stored"
    )
    old = await add(store, "c", "assistant", at=-600, in_reply_to=first.id, send_state="stored")
    await add(store, "tool row, no state", "assistant", at=4, in_reply_to=first.id)

    assert ids(await store.unsent_replies(since=T0)) == [a.id, b.id]
    assert old.id in ids(await store.unsent_replies(since=T0 - timedelta(hours=1)))
    await store.begin_reply_send(a.id)
    assert ids(await store.unsent_replies(since=T0)) == [b.id]


async def test_a_reply_that_is_not_stored_state_is_not_fenced_in(store: Store) -> None:
    user = await add(store, "hello", platform_message_id="8")
    legacy = await add(store, "from before the send state", "assistant", in_reply_to=user.id)
    assert await store.begin_reply_send(legacy.id) is False
    assert await store.unsent_replies(since=T0) == []
    # A reply in the `stored` state, beside it, is.
    stored = await add(
        store, "with a send state", "assistant", in_reply_to=user.id, send_state="stored"
    )
    assert ids(await store.unsent_replies(since=T0)) == [stored.id]
    assert await store.begin_reply_send(stored.id) is True
