"""Pairing codes: their alphabet, lifetime, how often the notice goes out,
and the bound on pending requests.

After OpenClaw's pairing flow: eight characters without the ones people
misread (0/O, 1/I), valid for an hour. A stranger can neither lock others
out nor make the bot send on their behalf: each user has one pending code,
a full list drops its oldest request to make room for a newcomer, and the
notice with a code is sent once, then at most once an hour while its user
keeps writing.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from core.clock import Clock
from core.pairing.store import (
    BlockedUser,
    Blocking,
    PairedUser,
    PairingOffer,
    PairingRequest,
    PairingStore,
    Standing,
)

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_TTL = timedelta(hours=1)
# Room for every real person who writes within an hour; past it the oldest
# request gives way (its user gets a new code when they write again).
MAX_PENDING = 200
NOTICE_EVERY = timedelta(hours=1)


def normalize_code(text: str) -> str:
    """A code as typed (any case, spaces or dashes) in its stored form."""
    return "".join(ch for ch in text.upper() if ch.isalnum())


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def same_username(a: str | None, b: str) -> bool:
    """Whether a stored username is the one typed (`@` and case aside)."""
    typed = b.strip().lower().lstrip("@")
    return bool(typed) and a is not None and a.strip().lower().lstrip("@") == typed


class Pairing:
    def __init__(
        self,
        store: PairingStore,
        clock: Clock,
        *,
        ttl: timedelta = CODE_TTL,
        max_pending: int = MAX_PENDING,
        notice_every: timedelta = NOTICE_EVERY,
    ) -> None:
        self.store = store
        self._clock = clock
        self.ttl = ttl
        self.max_pending = max_pending
        self.notice_every = notice_every

    async def is_paired(self, platform: str, user_id: str) -> bool:
        return await self.store.is_paired(platform, user_id)

    async def standing(self, platform: str, user_id: str) -> Standing:
        return await self.store.standing(platform, user_id)

    async def offer(
        self, platform: str, user_id: str, username: str | None = None
    ) -> PairingOffer | None:
        """The user's code for a message of theirs, and whether the notice
        is due (once per code, again once `notice_every` has passed); None
        when they are blocked."""
        return await self._request(platform, user_id, username, self.notice_every)

    async def code_for(
        self, platform: str, user_id: str, username: str | None = None
    ) -> PairingRequest | None:
        """The user's code (the pending one again, or a new one) for an
        answer they get anyway, such as a slash command's: it does not count
        as the notice. None when they are blocked."""
        offer = await self._request(platform, user_id, username, None)
        return offer.request if offer is not None else None

    async def _request(
        self, platform: str, user_id: str, username: str | None, every: timedelta | None
    ) -> PairingOffer | None:
        now = self._clock.now()
        return await self.store.request(
            platform,
            user_id,
            username,
            code=new_code(),
            now=now,
            expires_at=now + self.ttl,
            max_pending=self.max_pending,
            notify_every=every,
        )

    async def approve(self, code: str) -> PairedUser | None:
        return await self.store.approve(normalize_code(code), now=self._clock.now())

    async def reject(self, code: str) -> PairingRequest | None:
        return await self.store.reject(normalize_code(code), now=self._clock.now())

    async def revoke(self, platform: str, user_id: str) -> bool:
        return await self.store.revoke(platform, user_id)

    async def block(self, platform: str, user_id: str, username: str | None = None) -> Blocking:
        return await self.store.block(platform, user_id, username, now=self._clock.now())

    async def unblock(self, platform: str, user_id: str) -> BlockedUser | None:
        return await self.store.unblock(platform, user_id)

    async def pending(self) -> list[PairingRequest]:
        return await self.store.pending(now=self._clock.now())

    async def paired(self) -> list[PairedUser]:
        return await self.store.paired()

    async def blocked(self) -> list[BlockedUser]:
        return await self.store.blocked()

    async def known_as(self, username: str, platform: str | None = None) -> set[tuple[str, str]]:
        """The (platform, user id) of every user kept knows by `username`
        (pending, approved or blocked; usernames as they were last seen)."""
        found: set[tuple[str, str]] = set()
        for user in [*await self.pending(), *await self.paired(), *await self.blocked()]:
            if (platform is None or user.platform == platform) and same_username(
                user.username, username
            ):
                found.add((user.platform, user.user_id))
        return found
