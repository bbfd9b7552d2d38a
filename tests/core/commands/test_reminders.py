"""core/commands: listing and cancelling reminders, on an in-memory store."""

from __future__ import annotations

from core.clock import TestClock
from core.commands import Outcome, ReminderCommands
from core.commitments.visibility import Asker, ChatAccess
from tests.support.command_stores import GROUP, NOW, PRIVATE, FakeReminders, reminder

ALICES, BOBS = reminder(1, "alice"), reminder(2, "bob", cron="0 9 * * 1")
OTHER_CHAT = reminder(3, "alice", key=PRIVATE)


def chat(store: FakeReminders, user: str, *, admin: bool = False) -> ReminderCommands:
    async def is_admin() -> bool:
        return admin

    access = ChatAccess(Asker("main", GROUP, "group", user), is_admin)
    return ReminderCommands(store.store(), TestClock(NOW), access)


async def test_a_member_lists_their_own_and_learns_that_others_exist() -> None:
    store = FakeReminders(ALICES, BOBS, OTHER_CHAT)
    mine = await chat(store, "alice").list()
    assert [r.id for r in mine.items] == [ALICES.id] and not mine.others_hidden
    carols = await chat(store, "carol").list()
    assert carols.items == [] and carols.others_hidden
    everyones = await chat(store, "carol", admin=True).list()
    assert [r.id for r in everyones.items] == [ALICES.id, BOBS.id]
    assert everyones.items[1].repeats == "0 9 * * 1" and everyones.items[1].kind == "reminder"


async def test_cancel_own_not_anothers_nor_another_chats() -> None:
    store = FakeReminders(ALICES, BOBS, OTHER_CHAT)
    alice = chat(store, "alice")
    assert (await alice.cancel(BOBS.id)).outcome is Outcome.NOT_FOUND
    assert (await alice.cancel(OTHER_CHAT.id)).outcome is Outcome.NOT_FOUND
    done = await alice.cancel(f" {ALICES.id}")
    assert done.done and done.item is not None and done.item.status == "cancelled"
    again = await alice.cancel(ALICES.id)
    assert (again.outcome, again.reason) == (Outcome.ALREADY_CLOSED, "already cancelled")
    assert store.rows[BOBS.id].status == store.rows[OTHER_CHAT.id].status == "active"


async def test_the_operator_sees_and_cancels_every_chats() -> None:
    store = FakeReminders(ALICES, OTHER_CHAT, reminder(4, "dan", status="done"))
    operator = ReminderCommands(store.store(), TestClock(NOW))
    assert len((await operator.list()).items) == 2
    assert len((await operator.list(statuses=None)).items) == 3
    assert (await operator.cancel(OTHER_CHAT.id)).done
    assert (await operator.cancel("rm_nope")).outcome is Outcome.NOT_FOUND
