"""Extraction respects the follow-up switch: the messages of a user who
switched follow-ups off (or of everyone in a group whose admin did) never
reach the extraction model, whether they arrive after the switch or were
already queued; another user's still do. Switching back on resumes with
new messages only. On the harness of test_extraction (real manager, store
and LLMClient against the fake OpenAI server)."""

from __future__ import annotations

from core.users import FollowUpPreferences
from tests.core.commitments.test_extraction import START, Harness, make_harness
from tests.support.followups import store_rows

__all__ = ["make_harness"]  # the fixture, shared with the other module

GROUP_KEY = "agent:main:telegram:group:-500"


def sent_to_extraction(h: Harness) -> str:
    """Every extraction request's body, as one text to look for words in."""
    return "\n".join(r.body_text for r in h.extraction_requests())


def prefs_of(h: Harness) -> FollowUpPreferences:
    assert h.prefs is not None
    return h.prefs


async def test_an_opted_out_users_messages_never_reach_the_model(make_harness) -> None:
    h = await make_harness(prefs=True)
    await h.say("zebra interview tomorrow")  # positive control: it is extracted
    assert "zebra" in sent_to_extraction(h)

    await prefs_of(h).set_user("main", "telegram", "u42", False, now=START)
    await h.say("okapi interview tomorrow")
    await h.say("giraffe exam tomorrow", chat="7")  # another user's: still extracted
    body = sent_to_extraction(h)
    assert "okapi" not in body and "giraffe" in body
    assert len(h.extraction_requests()) == 2
    jobs = await store_rows(h.store, "SELECT user_text FROM extraction_jobs")
    assert jobs == []  # nothing of theirs was even queued


async def test_queued_before_the_switch_is_not_sent(make_harness) -> None:
    h = await make_harness(prefs=True, batch_seconds=60.0)
    await h.say("okapi interview tomorrow", settle=False)
    await h.say("giraffe exam tomorrow", chat="7", settle=False)
    await h.manager.drain()
    assert h.worker.queued == 2 and h.extraction_requests() == []
    switched = await prefs_of(h).set_user("main", "telegram", "u42", False, now=START)
    assert switched.unqueued == 1  # its row went with the switch
    await h.clock.advance(60)
    await h.settle()
    body = sent_to_extraction(h)
    assert "giraffe" in body and "okapi" not in body


async def test_switching_back_on_resumes_with_new_messages_only(make_harness) -> None:
    h = await make_harness(prefs=True)
    prefs = prefs_of(h)
    await prefs.set_user("main", "telegram", "u42", False, now=START)
    await h.say("okapi interview tomorrow")
    await prefs.set_user("main", "telegram", "u42", True, now=START)
    await h.say("zebra interview tomorrow")
    body = sent_to_extraction(h)
    assert "zebra" in body and "okapi" not in body


async def test_a_group_switched_off_by_its_admin_sends_nobodys(make_harness) -> None:
    h = await make_harness(prefs=True)
    await h.say("zebra match tomorrow", chat="-500", chat_kind="group", sender="u1")
    assert "zebra" in sent_to_extraction(h)  # positive control
    await prefs_of(h).set_chat("main", GROUP_KEY, False, now=START)
    await h.say("okapi match tomorrow", chat="-500", chat_kind="group", sender="u1")
    await h.say("gnu match tomorrow", chat="-500", chat_kind="group", sender="u2")
    await h.say("giraffe exam tomorrow", chat="7")  # a private chat: still extracted
    body = sent_to_extraction(h)
    assert "okapi" not in body and "gnu" not in body and "giraffe" in body


async def test_a_member_switched_off_in_a_group_only_them(make_harness) -> None:
    h = await make_harness(prefs=True)
    await prefs_of(h).set_user("main", "telegram", "u1", False, now=START)
    await h.say("okapi match tomorrow", chat="-500", chat_kind="group", sender="u1")
    await h.say("gnu match tomorrow", chat="-500", chat_kind="group", sender="u2")
    body = sent_to_extraction(h)
    assert "okapi" not in body and "gnu" in body


async def test_switched_off_and_on_again_before_the_batch_ran_it_is_not_sent(
    make_harness,
) -> None:
    """The switch-off dropped the queued row; the worker's copy in memory is
    not sent although the preference says on again by then."""
    h = await make_harness(prefs=True, batch_seconds=60.0)
    await h.say("okapi interview tomorrow", settle=False)
    await h.say("giraffe exam tomorrow", chat="7", settle=False)
    await h.manager.drain()
    prefs = prefs_of(h)
    await prefs.set_user("main", "telegram", "u42", False, now=START)
    await prefs.set_user("main", "telegram", "u42", True, now=START)
    await h.clock.advance(60)
    await h.settle()
    body = sent_to_extraction(h)
    assert "giraffe" in body and "okapi" not in body
