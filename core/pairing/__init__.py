"""Pairing: how an unknown user in a direct message becomes one the bot
answers (`dmPolicy: pairing`). The user gets a one-time code and nothing
else; the operator approves it with `kept pairing approve CODE`; the
approved user is stored. Platform-neutral: the channel pipeline
(channels/base.py) asks, the platforms only deliver the code.

store.py    the PairingStore port and its records
service.py  Pairing: codes, their lifetime, the bound on pending requests
"""

from core.pairing.service import CODE_ALPHABET, CODE_LENGTH, Pairing, normalize_code
from core.pairing.store import PairedUser, PairingRequest, PairingStore

__all__ = [
    "CODE_ALPHABET",
    "CODE_LENGTH",
    "PairedUser",
    "Pairing",
    "PairingRequest",
    "PairingStore",
    "normalize_code",
]
