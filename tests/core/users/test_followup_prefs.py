"""The FollowUpPreferenceStore, on every backend (`storage_url`): a user's
own switch per agent and platform, a group's per session; switching off
dismisses the active follow-ups with the reason and drops the queued
exchanges, in one transaction; erasure removes a user's switch (a
"setting") and export contains it; a group's goes with its session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from core.commitments.exchange import Exchange
from core.commitments.jobs import NewJob
from core.commitments.store import Filter
from core.privacy.export import document
from core.privacy.store import ErasedUser, ErasureCounts
from core.store.backends import Backend, open_backend
from core.users import FollowUpPreferences, FollowUpState, FollowUpSubject
from core.users.followup_prefs import DISMISSED_REASON, parse_switch
from tests.support.followups import store_rows
from tests.support.user_data import ANN, BEN, GROUP, NOW, PRIVATE, follow_up, scope, seed


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    async with open_backend(storage_url) as opened:
        yield opened


def prefs(backend: Backend) -> FollowUpPreferences:
    return FollowUpPreferences(backend.followup_prefs)


async def statuses(backend: Backend) -> dict[str, tuple[str, str | None]]:
    rows = await store_rows(backend.store, "SELECT reason, status, last_error FROM commitments")
    return {r[0]: (r[1], r[2]) for r in rows}


def test_on_and_off_words() -> None:
    assert parse_switch("ON") is True and parse_switch(" off ") is False
    assert parse_switch("maybe") is None and parse_switch("") is None


async def test_a_users_switch_is_per_agent_and_platform(backend: Backend) -> None:
    p = prefs(backend)
    assert await p.state("main", "telegram", ANN) == FollowUpState(None, None)
    assert (await p.state("main", "telegram", ANN)).on
    off = await p.set_user("main", "telegram", ANN, False, now=NOW)
    assert (off.enabled, off.changed) == (False, True)
    state = await p.state("main", "telegram", ANN, PRIVATE)
    assert (state.own, state.chat, state.on, state.own_updated_at) == (False, None, False, NOW)
    # Another agent, another platform, another user: untouched.
    assert (await p.state("side", "telegram", ANN)).on
    assert (await p.state("main", "discord", ANN)).on
    assert (await p.state("main", "telegram", BEN)).on
    again = await p.set_user("main", "telegram", ANN, False, now=NOW + timedelta(minutes=1))
    assert again.changed is False
    on = await p.set_user("main", "telegram", ANN, True, now=NOW + timedelta(minutes=2))
    assert (on.enabled, on.changed) == (True, True)
    assert (await p.state("main", "telegram", ANN)).own is True


async def test_a_groups_switch_applies_to_every_member_there_only(backend: Backend) -> None:
    p = prefs(backend)
    await p.set_chat("main", GROUP, False, now=NOW)
    in_group = await p.state("main", "telegram", BEN, GROUP)
    assert (in_group.own, in_group.chat, in_group.on) == (None, False, False)
    assert (await p.state("main", "telegram", BEN, PRIVATE)).on  # elsewhere: on
    ann_group = FollowUpSubject("main", "telegram", ANN, GROUP)
    ann_private = FollowUpSubject("main", "telegram", ANN, PRIVATE)
    nobody = FollowUpSubject("main", "telegram", None, GROUP)
    assert await p.silenced([ann_group, ann_private, nobody]) == {ann_group, nobody}
    await p.set_user("main", "telegram", ANN, False, now=NOW)
    assert await p.silenced([ann_group, ann_private, nobody]) == {ann_group, ann_private, nobody}
    await p.set_chat("main", GROUP, True, now=NOW)
    assert await p.silenced([ann_group, ann_private, nobody]) == {ann_group, ann_private}
    assert await p.silenced([]) == set()


async def test_many_subjects_are_read_in_chunks(backend: Backend) -> None:
    p = prefs(backend)
    for n in range(0, 700, 7):
        await p.set_user("main", "telegram", str(n), False, now=NOW)
    subjects = [FollowUpSubject("main", "telegram", str(n), f"k{n}") for n in range(700)]
    silenced = await p.silenced(subjects)
    assert {s.user_id for s in silenced} == {str(n) for n in range(0, 700, 7)}


async def test_switching_off_dismisses_with_the_reason_and_drops_queued(backend: Backend) -> None:
    await seed(backend)
    before = await statuses(backend)
    assert before["the interview"] == ("pending", None)  # positive control
    queued = NewJob(scope(GROUP, "-500", BEN, "group"), Exchange(9, "ben queued", "ok"))
    await backend.extraction_jobs.enqueue(queued, worker="w", now=NOW, lease_until=NOW)

    off = await prefs(backend).set_user("main", "telegram", ANN, False, now=NOW)
    assert (off.dismissed, off.unqueued) == (2, 1)  # her private and group follow-ups; her job
    after = await statuses(backend)
    assert after["the interview"] == ("dismissed", DISMISSED_REASON)
    assert after["the match"] == ("dismissed", DISMISSED_REASON)
    assert after["ben's match"] == ("pending", None)  # another member's
    assert after["elsewhere"] == ("pending", None)  # another agent's
    jobs = await store_rows(backend.store, "SELECT user_text FROM extraction_jobs")
    assert [r[0] for r in jobs] == ["ben queued"]
    dismissed = await backend.commitments.list(Filter(statuses=("dismissed",)))
    assert {c.dismissed_at for c in dismissed} == {NOW}
    # Switching on again reopens nothing.
    await prefs(backend).set_user("main", "telegram", ANN, True, now=NOW)
    assert (await statuses(backend))["the interview"] == ("dismissed", DISMISSED_REASON)


async def test_a_group_switched_off_dismisses_everyones_there(backend: Backend) -> None:
    await seed(backend)
    off = await prefs(backend).set_chat("main", GROUP, False, now=NOW)
    assert (off.dismissed, off.unqueued) == (2, 0)
    after = await statuses(backend)
    assert after["the match"][0] == after["ben's match"][0] == "dismissed"
    assert after["the interview"] == ("pending", None)  # Ann's private chat


async def test_erasure_removes_the_users_switch_and_export_contains_it(
    backend: Backend,
) -> None:
    await seed(backend)
    p = prefs(backend)
    await p.set_user("side", "telegram", ANN, False, now=NOW)
    await p.set_user("main", "telegram", BEN, False, now=NOW)
    await p.set_chat("main", GROUP, True, now=NOW)  # the group's: nobody's in particular

    doc = document(await backend.exports.export(ErasedUser("telegram", ANN)), at=NOW)
    assert doc["settings"]["followUps"] == [
        {"agentId": "side", "on": False, "updatedAt": "2026-12-01T09:00:00Z"}
    ]
    assert BEN not in str(doc["settings"])
    main_only = await backend.exports.export(ErasedUser("telegram", ANN, "main"))
    assert main_only.followups == []

    # Her zone is a setting too: it and her switch.
    counts = await backend.erasure.count(ErasedUser("telegram", ANN))
    assert counts.settings == 2
    assert (await backend.erasure.erase(ErasedUser("telegram", ANN))).settings == 2
    assert (await p.state("side", "telegram", ANN)).own is None
    assert (await p.state("main", "telegram", BEN)).own is False  # Ben's stays
    assert (await p.state("main", "telegram", BEN, GROUP)).chat is True  # the group's stays


async def test_a_groups_switch_goes_when_the_groups_session_is_erased(backend: Backend) -> None:
    await seed(backend)
    p = prefs(backend)
    await p.set_chat("main", GROUP, False, now=NOW)
    await p.set_chat("main", "agent:main:telegram:group:-999", False, now=NOW)
    planned = await backend.erasure.count_session(GROUP)
    assert planned.settings == 1 and planned.chats == 1
    assert await backend.erasure.erase_session(GROUP) == planned
    assert (await p.state("main", "telegram", BEN, GROUP)).chat is None
    # A switch set where no message was ever stored goes too.
    assert await backend.erasure.erase_session("agent:main:telegram:group:-999") == (
        ErasureCounts(settings=1)
    )
    assert (await p.state("main", "telegram", BEN, "agent:main:telegram:group:-999")).on


async def test_an_extraction_answered_after_the_switch_stores_nothing_about_them(
    backend: Backend,
) -> None:
    """The model was already reading their exchange when they switched off:
    what it answers is not stored for them (the statement that stores it
    reads the switch), while another member's answer in the same chat is."""
    await seed(backend)
    await prefs(backend).set_user("main", "telegram", ANN, False, now=NOW)
    await follow_up(backend, scope(GROUP, "-500", ANN, "group"), "ann's late topic")
    await follow_up(backend, scope(GROUP, "-500", BEN, "group"), "ben's late topic")
    reasons = {c.reason for c in await backend.commitments.list(Filter(statuses=("pending",)))}
    assert "ben's late topic" in reasons
    assert "ann's late topic" not in reasons


async def test_an_exchange_of_someone_switched_off_is_never_queued(backend: Backend) -> None:
    """The queue's own write reads the switch: their exchange is not stored
    for the extraction model at all, another member's in the same chat is."""
    await prefs(backend).set_user("main", "telegram", ANN, False, now=NOW)
    theirs = NewJob(scope(GROUP, "-500", ANN, "group"), Exchange(7, "ann's words", "ok"))
    others = NewJob(scope(GROUP, "-500", BEN, "group"), Exchange(8, "ben's words", "ok"))
    assert (
        await backend.extraction_jobs.enqueue(theirs, worker="w", now=NOW, lease_until=NOW) is None
    )
    assert await backend.extraction_jobs.enqueue(others, worker="w", now=NOW, lease_until=NOW)
    # The group's own switch (its admin's) stops everyone's there.
    await prefs(backend).set_chat("main", GROUP, False, now=NOW)
    assert (
        await backend.extraction_jobs.enqueue(others, worker="w", now=NOW, lease_until=NOW) is None
    )
    jobs = await store_rows(backend.store, "SELECT user_text FROM extraction_jobs")
    assert jobs == []  # ben's queued one went with the group's switch
