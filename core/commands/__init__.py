"""Platform-neutral commands and follow-up actions.

Telegram, Discord and the CLI parse their input into a call here and render
the typed result (core/commands/results.py) their own way. The permission
rule is core/commitments/visibility.py's ChatAccess; button payloads are
packed and unpacked in core/commands/buttons.py.
"""

from core.commands.followups import SNOOZE_BUTTON, FollowUpCommands
from core.commands.reminders import ReminderCommands
from core.commands.results import Change, FollowUpButtonResult, Item, Listing, Outcome

__all__ = [
    "SNOOZE_BUTTON",
    "Change",
    "FollowUpButtonResult",
    "FollowUpCommands",
    "Item",
    "Listing",
    "Outcome",
    "ReminderCommands",
]
