"""The transcript mirror: what kept sent on its own (a check-in, a
reminder) written into the chat's transcript and its full-text index, as
the assistant's message with the platform id it was sent under.

A user's answer then arrives with its question in the model's history, a
reply to the sent message is recognised, and search finds what was sent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from core.store.base import NewMessage, Store

MirroredKind = Literal["checkin", "reminder"]


async def mirror_sent(
    transcript: Store,
    *,
    session_key: str,
    kind: MirroredKind,
    text: str,
    at: datetime,
    platform_message_id: str | None,
) -> None:
    """Write one sent message into its session's transcript; raises what
    the store raises (the send is settled already: the caller decides how
    a missing mirror is reported)."""
    await transcript.add_message(
        NewMessage(
            session_key=session_key,
            role="assistant",
            kind=kind,
            text=text,
            ts=at,
            platform_message_id=platform_message_id,
        )
    )
