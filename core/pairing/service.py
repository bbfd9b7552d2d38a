"""Pairing codes: their alphabet, lifetime and the bound on pending requests.

After OpenClaw's pairing flow: eight characters without the ones people
misread (0/O, 1/I), valid for an hour, at most three requests pending per
platform, so a stranger cannot fill the operator's list or the database.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from core.clock import Clock
from core.pairing.store import PairedUser, PairingRequest, PairingStore

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_TTL = timedelta(hours=1)
MAX_PENDING = 3


def normalize_code(text: str) -> str:
    """A code as typed (any case, spaces or dashes) in its stored form."""
    return "".join(ch for ch in text.upper() if ch.isalnum())


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


class Pairing:
    def __init__(
        self,
        store: PairingStore,
        clock: Clock,
        *,
        ttl: timedelta = CODE_TTL,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self.store = store
        self._clock = clock
        self.ttl = ttl
        self.max_pending = max_pending

    async def is_paired(self, platform: str, user_id: str) -> bool:
        return await self.store.is_paired(platform, user_id)

    async def code_for(
        self, platform: str, user_id: str, username: str | None = None
    ) -> PairingRequest | None:
        """The user's code: the pending one again, or a new one; None when
        the platform already has the most requests pending."""
        now = self._clock.now()
        return await self.store.request(
            platform,
            user_id,
            username,
            code=new_code(),
            now=now,
            expires_at=now + self.ttl,
            max_pending=self.max_pending,
        )

    async def approve(self, code: str) -> PairedUser | None:
        return await self.store.approve(normalize_code(code), now=self._clock.now())

    async def revoke(self, platform: str, user_id: str) -> bool:
        return await self.store.revoke(platform, user_id)

    async def pending(self) -> list[PairingRequest]:
        return await self.store.pending(now=self._clock.now())

    async def paired(self) -> list[PairedUser]:
        return await self.store.paired()
