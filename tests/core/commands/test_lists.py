"""core/commands/lists.py: a list a page at a time, and what its buttons do,
on in-memory stores with no platform."""

from __future__ import annotations

from core.clock import TestClock
from core.commands import FollowUpCommands, Item, Outcome, ReminderCommands
from core.commands.lists import ListCommands
from core.commands.results import PER_PAGE, Listing, page_of
from core.commitments.visibility import Asker, ChatAccess
from core.messages import ItemAction, PageAction
from tests.support.command_stores import (
    GROUP,
    NOW,
    FakeCommitments,
    FakeReminders,
    commitment,
    reminder,
)


def lists(
    commitments: FakeCommitments, reminders: FakeReminders, user: str, *, admin: bool = False
) -> ListCommands:
    async def is_admin() -> bool:
        return admin

    access = ChatAccess(Asker("main", GROUP, "group", user), is_admin)
    clock = TestClock(NOW)
    return ListCommands(
        FollowUpCommands(commitments.service(clock), access),
        ReminderCommands(reminders.store(), clock, access),
        access,
    )


def test_pages_hold_ten_and_a_page_past_the_end_is_the_last() -> None:
    listing = Listing([Item.of_commitment(commitment(n, "alice")) for n in range(12)])
    first, second = page_of(listing, 0), page_of(listing, 1)
    assert len(first.items) == PER_PAGE and (first.previous, first.next) == (None, 1)
    assert len(second.items) == 2 and (second.previous, second.next) == (0, None)
    assert second.first == 11 and page_of(listing, 7).number == 1
    empty = page_of(Listing([]), 3)
    assert (empty.number, empty.count, empty.items) == (0, 1, [])


async def test_a_members_list_pages_through_their_own_only() -> None:
    mine = [commitment(n, "alice") for n in range(12)]
    commitments = FakeCommitments(*mine, commitment(50, "bob"))
    alice = lists(commitments, FakeReminders(), "alice")

    page = await alice.page("commitments")
    assert [i.id for i in page.items] == [c.id for c in mine[:10]] and page.count == 2
    answer = await alice.press(PageAction("commitments", 1, "alice"))
    assert answer.page is not None and answer.change is None
    assert [i.id for i in answer.page.items] == [c.id for c in mine[10:]]


async def test_a_row_button_is_the_typed_command_and_the_page_shows_the_result() -> None:
    rows = [commitment(n, "alice") for n in range(11)]
    commitments = FakeCommitments(*rows)
    alice = lists(commitments, FakeReminders(), "alice")

    answer = await alice.press(ItemAction("dismiss", rows[10].id, 1, "alice"))
    assert answer.change is not None and answer.change.done
    assert commitments.rows[rows[10].id].status == "dismissed"
    # Page 2 emptied: the last page there is, with the remaining ten.
    assert answer.page is not None and answer.page.number == 0 and answer.page.count == 1

    snoozed = await alice.press(ItemAction("snooze", rows[0].id, 0, "alice"))
    assert snoozed.change is not None and snoozed.change.done
    assert commitments.rows[rows[0].id].status == "snoozed"


async def test_a_row_button_on_a_reminder_cancels_it() -> None:
    mine = reminder(1, "alice")
    reminders = FakeReminders(mine)
    alice = lists(FakeCommitments(), reminders, "alice")
    answer = await alice.press(ItemAction("cancel", mine.id, 0, "alice"))
    assert answer.change is not None and answer.change.done
    assert reminders.rows[mine.id].status == "cancelled"
    assert answer.page is not None and answer.page.listing.items == []


async def test_another_users_list_does_nothing_even_for_an_admin() -> None:
    bobs = commitment(1, "bob")
    commitments = FakeCommitments(bobs)
    admin = lists(commitments, FakeReminders(), "carol", admin=True)
    for action in (ItemAction("dismiss", bobs.id, 0, "bob"), PageAction("commitments", 0, "bob")):
        answer = await admin.press(action)
        assert answer.page is None and answer.change is None
    assert commitments.rows[bobs.id].status == "pending"


async def test_a_member_cannot_act_on_anothers_item_through_a_list_of_their_own() -> None:
    bobs = commitment(1, "bob")
    commitments = FakeCommitments(bobs)
    alice = lists(commitments, FakeReminders(), "alice")
    answer = await alice.press(ItemAction("dismiss", bobs.id, 0, "alice"))  # a forged button
    assert answer.change is not None and answer.change.outcome is Outcome.NOT_FOUND
    assert commitments.rows[bobs.id].status == "pending"
