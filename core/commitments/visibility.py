"""Who sees and manages which follow-ups of a chat.

A follow-up belongs to the member whose message it was inferred from (its
`sender_id`); a reminder to the member who asked for it (`created_by`).

- In a private chat the session is the user's own: they see everything in it.
- In group and channel chats a member sees and manages only their own; chat
  admins (Telegram administrators and creators, Discord Manage Messages) see
  and manage every member's.
- Anything the asker may not see is answered exactly like an id that never
  existed ("not found"), so a refusal never confirms that it exists.

core/commands applies this one rule to every command and button of both chat
platforms; each platform only says how to ask whether the user is an admin
there. (It lives beside CommitmentService, whose `find` / `visible` take it:
in core/commands it would make commitments and commands import each other.)
The admin check may cost a platform call (Telegram's getChatMember), so it is
made at most once per ChatAccess and only when the answer matters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from core.commitments.model import Commitment, Status
from core.commitments.store import Filter
from core.messages import ChatKind

IsAdmin = Callable[[], Awaitable[bool]]


def shared_chat(chat_kind: ChatKind) -> bool:
    """Group and channel chats: several people read what is said there."""
    return chat_kind != "private"


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asks (a command, a button press), from which chat."""

    agent_id: str
    session_key: str
    chat_kind: ChatKind
    user_id: str


class ChatAccess:
    """One asker's view of one chat's follow-ups and reminders."""

    def __init__(self, asker: Asker, is_admin: IsAdmin) -> None:
        self.asker = asker
        self._is_admin = is_admin
        self._admin: bool | None = None

    @property
    def shared(self) -> bool:
        return shared_chat(self.asker.chat_kind)

    async def admin(self) -> bool:
        """Whether the asker administers this shared chat, and so sees every
        member's follow-ups (a listing then says whose each one is). Asked
        once; False in a private chat, where there is nobody else's."""
        if not self.shared:
            return False
        if self._admin is None:
            self._admin = await self._is_admin()
        return self._admin

    def chat(self, statuses: Collection[Status] | None = None) -> Filter:
        """Every follow-up of this chat, whoever it belongs to: for lookups
        that are checked with `may_manage` before anything is shown."""
        a = self.asker
        return Filter(agent_id=a.agent_id, session_key=a.session_key, statuses=statuses)

    def own(self, statuses: Collection[Status] | None = None) -> Filter:
        """The asker's own follow-ups of this chat (all of it in a private chat)."""
        if not self.shared:
            return self.chat(statuses)
        a = self.asker
        return Filter(
            agent_id=a.agent_id, session_key=a.session_key, sender_id=a.user_id, statuses=statuses
        )

    async def visible(self, statuses: Collection[Status] | None = None) -> Filter:
        """What the asker may list here: their own, or the whole chat for an admin."""
        own = self.own(statuses)
        if own.sender_id is None or not await self.admin():
            return own
        return self.chat(statuses)

    async def may_manage(self, owner_id: str | None) -> bool:
        """Whether the asker may see and change something owned by `owner_id`
        in this chat. The admin is asked only about somebody else's."""
        if not self.shared:
            return True
        if owner_id is not None and owner_id == self.asker.user_id:
            return True
        return await self.admin()

    async def owner(self) -> str | None:
        """The member whose reminders and follow-ups the asker may see and
        change here, for the store to match in the same statement as the
        read or change; None: every member's (a private chat, an admin)."""
        if not self.shared or await self.admin():
            return None
        return self.asker.user_id

    async def filter_for(self, commitment: Commitment) -> Filter | None:
        """The filter to change `commitment` through, or None when the asker
        may not see it. The owner acts through their own filter, so the
        store checks the owner again in the same statement as the change."""
        if commitment.session_key != self.asker.session_key:
            return None
        if commitment.agent_id != self.asker.agent_id:
            return None
        if not self.shared or commitment.sender_id == self.asker.user_id:
            return self.own()
        return self.chat() if await self.admin() else None
