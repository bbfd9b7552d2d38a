"""The /commitments and /reminders lists with buttons: a page at a time, and
what a row's button or Prev / Next does, for every platform.

A list's buttons name the user it was made for (`viewer`): in a group,
where everyone sees the list, only that user may page it or press its rows.
A row's button is the typed command it stands for (dismiss, snooze, cancel),
so the permission rule and the answers are exactly the typed commands'.
"""

from __future__ import annotations

from core.commands.followups import SNOOZE_BUTTON, FollowUpCommands
from core.commands.reminders import ReminderCommands
from core.commands.results import Change, ListAnswer, Page, page_of
from core.commitments.visibility import ChatAccess
from core.messages import ButtonAction, ItemAction, ItemVerb, ListName, PageAction


class ListCommands:
    def __init__(
        self, followups: FollowUpCommands, reminders: ReminderCommands, access: ChatAccess
    ) -> None:
        self._followups = followups
        self._reminders = reminders
        self._access = access

    @property
    def reminders(self) -> ReminderCommands:
        return self._reminders

    @property
    def viewer(self) -> str:
        """Whose lists these are: the user id the buttons carry."""
        return self._access.asker.user_id

    async def page(self, listing: ListName, number: int = 0) -> Page:
        if listing == "commitments":
            return page_of(await self._followups.list(), number)
        return page_of(await self._reminders.list(), number)

    async def press(self, action: ItemAction | PageAction) -> ListAnswer:
        if action.viewer != self.viewer:
            return ListAnswer(None)
        if isinstance(action, PageAction):
            return ListAnswer(await self.page(action.listing, action.page))
        change = await self._act(action)
        listing: ListName = "reminders" if action.verb == "cancel" else "commitments"
        return ListAnswer(await self.page(listing, action.page), change)

    async def _act(self, action: ItemAction) -> Change:
        if action.verb == "dismiss":
            [change] = await self._followups.dismiss([action.item_id])
            return change
        if action.verb == "snooze":
            return await self._followups.snooze(action.item_id, duration=SNOOZE_BUTTON)
        return await self._reminders.cancel(action.item_id)


def list_name(action: ItemAction | PageAction) -> ListName:
    """Which list a list's button belongs to."""
    if isinstance(action, PageAction):
        return action.listing
    return "reminders" if action.verb == "cancel" else "commitments"


def list_actions(page: Page, name: ListName, viewer: str) -> tuple[ButtonAction, ...]:
    """The buttons of a list page: each item's (Dismiss / Snooze for a
    follow-up, Cancel for a reminder), then Prev / Next."""
    verbs: tuple[ItemVerb, ...] = ("cancel",) if name == "reminders" else ("dismiss", "snooze")
    actions: list[ButtonAction] = [
        ItemAction(verb, item.id, page.number, viewer) for item in page.items for verb in verbs
    ]
    for number in (page.previous, page.next):
        if number is not None:
            actions.append(PageAction(name, number, viewer))
    return tuple(actions)
