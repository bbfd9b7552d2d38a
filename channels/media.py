"""What kept says to a message it cannot read (a photo, a voice note, a
sticker, a file, a location): one fixed line, the same on every platform,
instead of silence. It is not the model's answer and is not stored: the
transcript holds what was said in words, and a stored message the model
never answered would be answered by it at the next start (the conversation
manager's recovery), which is exactly what must not happen here.

A caption (Telegram) or text beside an attachment (Discord) is text: that
message is answered normally, and no notice is sent.
"""

from __future__ import annotations

from typing import Literal

MediaKind = Literal[
    "photo", "video", "animation", "voice", "audio", "sticker", "file", "location", "contact"
]

_NAMES: dict[MediaKind, str] = {
    "photo": "photos",
    "video": "videos",
    "animation": "GIFs",
    "voice": "voice messages",
    "audio": "audio",
    "sticker": "stickers",
    "file": "files",
    "location": "locations",
    "contact": "contact cards",
}
# Kinds the user can put words beside (a caption, or text in the same message).
_WITH_WORDS: frozenset[MediaKind] = frozenset({"photo", "video", "animation", "audio", "file"})


def unreadable_notice(kind: MediaKind) -> str:
    """The one reply to a message of `kind` that has no text."""
    hint = " (a caption works too)" if kind in _WITH_WORDS else ""
    return (
        f"I can only read text, so I can't open {_NAMES[kind]}. "
        f"Write what you'd like me to know{hint} and I'll answer."
    )


# The one reply to a message the store refused for good (a value the database
# can never take): it was confirmed, never answered, and is not tried again.
REFUSED_NOTICE = "Sorry, I could not read that message. Could you send it again in other words?"
