"""Pairing: how an unknown user in a direct message becomes one the bot
answers (`dmPolicy: pairing`). The user gets a one-time code and nothing
else; the operator approves it with `kept pairing approve CODE` (or drops
it, or blocks the user); the approved and the blocked users are stored.
Platform-neutral: the channel pipeline (channels/base.py) asks, the
platforms only deliver the code.

store.py    the PairingStore port and its records
service.py  Pairing: codes, their lifetime, how often the notice goes out,
            the bound on pending requests
"""

from core.pairing.service import (
    CODE_ALPHABET,
    CODE_LENGTH,
    MAX_PENDING,
    NOTICE_EVERY,
    Pairing,
    normalize_code,
    same_username,
)
from core.pairing.store import (
    BlockedUser,
    Blocking,
    PairedUser,
    PairingOffer,
    PairingRequest,
    PairingStore,
    Standing,
)

__all__ = [
    "CODE_ALPHABET",
    "CODE_LENGTH",
    "MAX_PENDING",
    "NOTICE_EVERY",
    "BlockedUser",
    "Blocking",
    "PairedUser",
    "Pairing",
    "PairingOffer",
    "PairingRequest",
    "PairingStore",
    "Standing",
    "normalize_code",
    "same_username",
]
