"""core/commands: listing, dismissing, snoozing follow-ups and their buttons,
on an in-memory store, with no platform."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import cast

import pytest

from core.clock import TestClock
from core.commands import SNOOZE_BUTTON, FollowUpCommands, Outcome
from core.commitments.service import CommitmentService
from core.commitments.store import CommitmentStore
from core.commitments.visibility import Asker, ChatAccess
from core.messages import Action, ChatKind
from tests.support.command_stores import GROUP, NOW, PRIVATE, FakeCommitments, commitment

ALICES, BOBS = commitment(1, "alice"), commitment(2, "bob")
PRIVATE_ONE = commitment(3, "alice", key=PRIVATE)


class AdminCheck:
    def __init__(self, answer: bool) -> None:
        self.answer, self.calls = answer, 0

    async def __call__(self) -> bool:
        self.calls += 1
        return self.answer


def chat(
    store: FakeCommitments, user: str, *, admin: bool = False, kind: ChatKind = "group"
) -> tuple[FollowUpCommands, AdminCheck]:
    check = AdminCheck(admin)
    key = GROUP if kind == "group" else PRIVATE
    access = ChatAccess(Asker("main", key, kind, user), check)
    return FollowUpCommands(store.service(TestClock(NOW)), access), check


def operator(store: FakeCommitments) -> FollowUpCommands:
    return FollowUpCommands(store.service(TestClock(NOW)))


# --- listing -------------------------------------------------------------------


async def test_a_member_lists_only_their_own_and_the_admin_everyones() -> None:
    store = FakeCommitments(ALICES, BOBS, PRIVATE_ONE)
    member, check = chat(store, "alice")
    mine = await member.list()
    assert [i.id for i in mine.items] == [ALICES.id]
    assert (mine.shared, mine.everyones, check.calls) == (True, False, 1)
    item = mine.items[0]
    assert (item.kind, item.subkind, item.owner, item.due) == (
        "follow_up",
        "event_check_in",
        "alice",
        ALICES.due_earliest,
    )
    admin, _ = chat(store, "carol", admin=True)
    everyones = await admin.list()
    assert [i.id for i in everyones.items] == [ALICES.id, BOBS.id]
    assert everyones.everyones is True


async def test_a_private_chat_never_asks_whether_the_user_is_an_admin() -> None:
    store = FakeCommitments(PRIVATE_ONE)
    commands, check = chat(store, "alice", kind="private")
    listing = await commands.list()
    assert [i.id for i in listing.items] == [PRIVATE_ONE.id]
    assert (listing.shared, listing.everyones, check.calls) == (False, False, 0)


async def test_the_operator_lists_every_chat_by_status_and_agent() -> None:
    sent = commitment(4, "dan", status="sent")
    store = FakeCommitments(ALICES, BOBS, PRIVATE_ONE, sent)
    assert len((await operator(store).list()).items) == 3  # active only by default
    only_sent = await operator(store).list(statuses=("sent",))
    assert [i.id for i in only_sent.items] == [sent.id] and only_sent.items[0].record == sent
    assert (await operator(store).list(agent_id="other")).items == []


# --- dismiss / snooze ------------------------------------------------------------


async def test_dismiss_answers_each_id_and_never_reveals_anothers() -> None:
    closed = commitment(4, "alice", status="expired")
    store = FakeCommitments(ALICES, BOBS, PRIVATE_ONE, closed)
    member, _ = chat(store, "alice")
    ids = [BOBS.id, ALICES.id, "cm_000000000000", PRIVATE_ONE.id, closed.id]
    changes = await member.dismiss(ids)
    assert [(c.id, c.outcome) for c in changes] == [
        (BOBS.id, Outcome.NOT_FOUND),
        (ALICES.id, Outcome.DONE),
        ("cm_000000000000", Outcome.NOT_FOUND),
        (PRIVATE_ONE.id, Outcome.NOT_FOUND),
        (closed.id, Outcome.ALREADY_CLOSED),
    ]
    # Another member's is answered exactly like one that never existed.
    assert changes[0].reason == changes[2].reason == "not found"
    assert changes[0].item is None
    assert changes[4].reason == "already expired"
    assert store.rows[ALICES.id].status == "dismissed"
    assert store.rows[BOBS.id].status == "pending"


@pytest.mark.parametrize("asker", ["member", "operator"])
async def test_a_delivered_check_ins_ids_can_be_typed_like_its_buttons(asker: str) -> None:
    """What a check-in offers ("/dismiss cm_… to drop it, /snooze ID 1d")
    works on it after it was sent, as its buttons do."""
    sent = {"status": "sent", "sent_at": NOW - timedelta(hours=1)}
    first, second = commitment(4, "alice", **sent), commitment(5, "alice", **sent)
    store = FakeCommitments(first, second)
    commands = chat(store, "alice")[0] if asker == "member" else operator(store)
    [dismissed] = await commands.dismiss([first.id])
    assert dismissed.done and store.rows[first.id].status == "dismissed"
    assert store.rows[first.id].sent_at == first.sent_at  # the delivery still counts
    snoozed = await commands.snooze(second.id, duration="1d")
    assert snoozed.done and store.rows[second.id].status == "snoozed"
    assert store.rows[second.id].due_earliest == NOW + timedelta(days=1)
    again = await commands.dismiss([first.id])
    assert [c.reason for c in again] == ["already dismissed"]


async def test_an_admin_dismisses_a_members_follow_up() -> None:
    store = FakeCommitments(ALICES)
    admin, check = chat(store, "carol", admin=True)
    [change] = await admin.dismiss([ALICES.id])
    assert change.done and change.item is not None and change.item.status == "dismissed"
    assert check.calls == 1


async def test_the_operator_dismisses_anything_and_says_why_not() -> None:
    store = FakeCommitments(ALICES, commitment(4, "dan", status="resolved"))
    changes = await operator(store).dismiss([ALICES.id, "cm_4".ljust(15, "0"), "cm_000000000004"])
    assert [c.outcome for c in changes] == [Outcome.DONE, Outcome.NOT_FOUND, Outcome.ALREADY_CLOSED]


async def test_snooze_parses_the_duration_before_looking_anything_up() -> None:
    store = FakeCommitments(ALICES)
    member, check = chat(store, "alice")
    bad = await member.snooze(ALICES.id, duration="soon")
    assert bad.outcome is Outcome.INVALID_DURATION and "soon" in bad.reason
    assert check.calls == 0 and store.changes == 0
    done = await member.snooze(f" {ALICES.id} ", duration="1d")
    assert done.done and done.item is not None and done.item.due == NOW + timedelta(days=1)
    assert store.rows[ALICES.id].status == "snoozed"


@pytest.mark.parametrize("typed", ["2", "90", " 2 ", "1:30"])
async def test_a_duration_without_a_unit_is_refused(typed: str) -> None:
    """`/snooze ID 2` once read as 2 seconds made the follow-up due at once."""
    store = FakeCommitments(ALICES)
    for commands in (chat(store, "alice")[0], operator(store)):
        refused = await commands.snooze(ALICES.id, duration=typed)
        assert refused.outcome is Outcome.INVALID_DURATION
        assert refused.reason == f"{typed.strip()!r} has no unit: say 2h, 30m or 3d"
    assert store.changes == 0 and store.rows[ALICES.id].status == "pending"


async def test_a_snooze_never_makes_a_follow_up_due_sooner() -> None:
    days = timedelta(days=1)
    later = replace(ALICES, due_earliest=NOW + 3 * days, due_latest=NOW + 4 * days)
    store = FakeCommitments(later)
    member, _ = chat(store, "alice")
    sooner = await member.snooze(later.id, duration="1d")
    assert sooner.outcome is Outcome.REFUSED
    assert sooner.reason == "it is due later than that, from 2026-12-03T09:00:00Z"
    before = await operator(store).snooze(later.id, until=NOW + timedelta(days=2))
    assert before.outcome is Outcome.REFUSED and before.reason.startswith("it is due later")
    assert store.changes == 0
    # Later than it was is a snooze.
    after = await operator(store).snooze(later.id, until=NOW + timedelta(days=5))
    assert after.done and store.rows[later.id].due_earliest == NOW + timedelta(days=5)


async def test_every_snooze_wakes_the_heartbeat_and_a_refusal_does_not() -> None:
    """A reopened check-in may be due before the time the scheduler sleeps
    until: typed, CLI and button snoozes all wake it (bot/services.py wires
    `on_snoozed` to the heartbeat's Wake)."""
    woken: list[int] = []
    sent = replace(ALICES, status="sent")
    store = FakeCommitments(sent, BOBS)
    service = CommitmentService(
        cast(CommitmentStore, store), TestClock(NOW), on_snoozed=lambda: woken.append(1)
    )
    access = ChatAccess(Asker("main", GROUP, "group", "alice"), AdminCheck(False))
    typed = await FollowUpCommands(service, access).snooze(sent.id, duration="2h")
    assert typed.done and len(woken) == 1
    assert (await FollowUpCommands(service).snooze(BOBS.id, duration="1d")).done
    assert len(woken) == 2
    pressed = await FollowUpCommands(service, access).press(Action("snooze", (sent.id,)))
    assert pressed.outcome is Outcome.DONE and len(woken) == 3
    refused = await FollowUpCommands(service).snooze(BOBS.id, duration="1h")  # sooner
    assert not refused.done and len(woken) == 3


async def test_snooze_refusals_carry_a_reason_without_the_id() -> None:
    store = FakeCommitments(ALICES, BOBS, commitment(4, "alice", status="dismissed"))
    member, _ = chat(store, "alice")
    too_far = await member.snooze(ALICES.id, duration=timedelta(days=400))
    assert too_far.outcome is Outcome.REFUSED and too_far.reason.startswith("snooze at most")
    closed = await member.snooze("cm_000000000004", duration="1h")
    assert (closed.outcome, closed.reason) == (Outcome.ALREADY_CLOSED, "already dismissed")
    assert (await member.snooze(BOBS.id, duration="1h")).outcome is Outcome.NOT_FOUND
    assert store.changes == 0


async def test_the_operators_naive_until_is_read_in_the_follow_ups_zone() -> None:
    store = FakeCommitments(ALICES)
    change = await operator(store).snooze(ALICES.id, until=datetime(2026, 12, 2, 9, 0))
    assert change.done and change.item is not None
    assert change.item.due.isoformat() == "2026-12-02T09:00:00+01:00"  # Europe/Paris
    missing = await operator(store).snooze("cm_000000000009", until=datetime(2026, 12, 2, 9))
    assert missing.outcome is Outcome.NOT_FOUND


# --- the buttons -------------------------------------------------------------------


@pytest.mark.parametrize("status", ["sent", "pending"])
async def test_the_buttons_act_on_a_delivered_check_in(status: str) -> None:
    mine = replace(ALICES, status=status)
    store = FakeCommitments(mine)
    member, _ = chat(store, "alice")
    snoozed = await member.press(Action("snooze", (mine.id,)))
    assert snoozed.outcome is Outcome.DONE and snoozed.until == NOW + SNOOZE_BUTTON
    dismissed = await member.press(Action("dismiss", (mine.id,)))
    assert dismissed.outcome is Outcome.DONE and dismissed.until is None
    assert store.rows[mine.id].status == "dismissed"
    again = await member.press(Action("dismiss", (mine.id,)))
    assert again.outcome is Outcome.ALREADY_CLOSED and not again.changed
    assert again.unchanged[0].reason == "already dismissed"


async def test_a_button_naming_anothers_follow_up_changes_nothing() -> None:
    store = FakeCommitments(replace(ALICES, status="sent"), replace(BOBS, status="sent"))
    member, _ = chat(store, "alice")
    pressed = await member.press(Action("dismiss", (ALICES.id, BOBS.id)))
    assert pressed.outcome is Outcome.NOT_FOUND and not pressed.changed and not pressed.unchanged
    assert store.changes == 0
    admin, _ = chat(store, "carol", admin=True)
    both = await admin.press(Action("snooze", (ALICES.id, BOBS.id)))
    assert [i.id for i in both.changed] == [ALICES.id, BOBS.id]
