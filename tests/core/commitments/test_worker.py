"""The extraction worker's queue: eligibility, batching window, bound and
drops, on the same harness as test_commitments_extraction (real manager,
store and LLMClient against the fake OpenAI server)."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

from core.conversation.events import ReplyEvent
from tests.core.commitments.test_extraction import LOG, SCOPE_42, make_harness
from tests.fakes.openai_server import error

__all__ = ["make_harness"]  # the fixture, shared with the other module


async def test_only_normal_conversation_turns_are_eligible(make_harness) -> None:
    h = await make_harness()
    h.fake.push(error(400))  # the chat call fails: the apology is not extracted from
    await h.say("interview tomorrow")
    assert h.extraction_requests() == []
    await h.say("interview tomorrow")
    [first_ok] = h.extraction_requests()
    assert first_ok.model == "extract-model"
    session = await h.store.get_session(SCOPE_42.session_key)
    assert session is not None
    rows = await h.store.history(SCOPE_42.session_key, before_turn_of=10**9, limit=10)
    user, assistant = rows[-2], rows[-1]
    for kind in ("heartbeat", "reminder", "command"):
        await h.worker.on_reply(ReplyEvent(session, user, assistant, "u42", turn_kind=kind))
    await h.worker.on_reply(ReplyEvent(session, replace(user, text="  "), assistant, "u42"))
    assert h.worker.queued == 0


async def test_batching_window_groups_exchanges_per_scope(make_harness) -> None:
    h = await make_harness(batch_seconds=2.0)
    for text in ("first", "second", "third"):
        await h.say(text, settle=False)
    await h.say("elsewhere", chat="7", settle=False)
    await h.manager.drain()
    assert h.extraction_requests() == [] and h.worker.queued == 4
    await h.clock.advance(2)
    await h.settle()
    requests = h.extraction_requests()
    assert len(requests) == 2
    by_chat = {len(json.loads(r.last_user_text or "")["exchanges"]): r for r in requests}
    assert set(by_chat) == {1, 3}
    texts = [e["user"] for e in json.loads(by_chat[3].last_user_text or "")["exchanges"]]
    assert texts == ["first", "second", "third"]


async def test_a_full_queue_drops_with_one_log_line(make_harness, caplog) -> None:
    caplog.set_level(logging.INFO, logger=LOG)
    h = await make_harness(batch_seconds=60.0, max_queue=2)
    for i in range(5):
        await h.say(f"message {i}", settle=False)
    await h.manager.drain()
    assert (h.worker.queued, h.worker.dropped, h.worker.high_water) == (2, 3, 2)
    assert caplog.text.count("extraction_queue_full") == 1


async def test_a_full_batch_does_not_wait_for_the_window(make_harness) -> None:
    h = await make_harness(batch_seconds=60.0, max_batch=2)
    await h.say("first", settle=False)
    await h.manager.drain()
    assert h.worker.queued == 1
    await h.say("second", settle=False)
    await h.settle()  # no clock advance: the second item filled the batch
    [request] = h.extraction_requests()
    assert len(json.loads(request.last_user_text or "")["exchanges"]) == 2


async def test_a_backlog_is_worked_off_in_bounded_batches(make_harness) -> None:
    h = await make_harness(max_batch=2, batch_seconds=60.0)
    await h.say("first", settle=False)
    await h.manager.drain()  # queued; the queue waits out its window
    session = await h.store.get_session(SCOPE_42.session_key)
    assert session is not None
    rows = await h.store.history(SCOPE_42.session_key, before_turn_of=10**9, limit=10)
    user, assistant = rows[-2], rows[-1]
    for _ in range(5):
        await h.worker.on_reply(ReplyEvent(session, user, assistant, "u42"))
    await h.clock.advance(60)
    await h.settle()
    sizes = [len(json.loads(r.last_user_text or "")["exchanges"]) for r in h.extraction_requests()]
    assert sizes == [2, 2, 2]
