"""What extraction reads: one user message and the reply it got.

Apart from the rules, the cues and the explicit-reminder split, which all
take exchanges, so none of them has to import another for the type.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Exchange:
    """One user message and the reply it got, as the model saw them."""

    user_message_id: int
    user_text: str
    assistant_text: str
