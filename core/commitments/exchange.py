"""What extraction reads: one user message and the reply it got.

A module of its own: the rules, the pre-filter and the explicit-reminder
split all take exchanges, and none of them has to import another for the type.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Exchange:
    """One user message and the reply it got, as the model saw them."""

    user_message_id: int
    user_text: str
    assistant_text: str
