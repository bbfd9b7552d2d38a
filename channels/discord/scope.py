"""Where a Discord message or interaction belongs, whether a message is for
the bot, and who may talk to it.

Shared by the adapter (messages), the slash commands and the follow-up
buttons, so all three agree on the session a chat maps to:

- a DM is `private`, a group DM `group`, a server channel `channel`;
- a thread keeps its own session: chat id = the parent channel, thread id =
  the thread.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import discord

from channels.media import MediaKind
from core.commitments.visibility import Asker, ChatAccess
from core.messages import ChatKind, Target, session_key
from core.store.base import SessionRecord

PLATFORM = "discord"

_THREAD_TYPES = frozenset(
    {
        discord.ChannelType.public_thread,
        discord.ChannelType.private_thread,
        discord.ChannelType.news_thread,
    }
)
# channels/base.py ChannelAdapter.admission: (chat kind, user id, username,
# server id) -> "yes" | "pair" | "no".
Admit = Callable[[ChatKind, str, str | None, str | None], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class ChatRef:
    """One Discord chat as core sees it."""

    target: Target
    chat_kind: ChatKind

    def session_key(self, agent_id: str) -> str:
        return session_key(agent_id, self.target, self.chat_kind)

    @property
    def channel_id(self) -> int:
        """The channel a message to this chat is posted in (the thread, if any)."""
        return int(self.target.thread_id or self.target.chat_id)


def chat_of(channel: object) -> ChatRef | None:
    """The chat a channel object belongs to; None when it cannot be told
    (a thread known only by id has no parent to name its chat)."""
    if isinstance(channel, discord.Thread):
        return _ref(str(channel.parent_id), "channel", thread=str(channel.id))
    if isinstance(channel, discord.DMChannel):
        return _ref(str(channel.id), "private")
    if isinstance(channel, discord.GroupChannel):
        return _ref(str(channel.id), "group")
    if isinstance(channel, discord.abc.GuildChannel):
        return _ref(str(channel.id), "channel")
    if isinstance(channel, discord.PartialMessageable):
        if channel.type in _THREAD_TYPES:
            return None
        if channel.guild_id is None:
            kind: ChatKind = "group" if channel.type == discord.ChannelType.group else "private"
            return _ref(str(channel.id), kind)
        return _ref(str(channel.id), "channel")
    return None


def ref_of_session(session: SessionRecord) -> ChatRef | None:
    """The chat a stored Discord session is about; None for one whose ids
    are not Discord's (an import, a typo in a hand-made key)."""
    ids = [session.chat_id, session.thread_id or "0"]
    if session.platform != PLATFORM or not all(i.isdigit() for i in ids):
        return None
    return _ref(session.chat_id, session.chat_kind, thread=session.thread_id)


def interaction_chat(interaction: discord.Interaction) -> ChatRef | None:
    ref = chat_of(interaction.channel) if interaction.channel is not None else None
    if ref is None and interaction.guild_id is None and interaction.channel_id is not None:
        # A DM the cache has not seen yet: the interaction still names it.
        ref = _ref(str(interaction.channel_id), "private")
    return ref


def _ref(chat_id: str, kind: ChatKind, thread: str | None = None) -> ChatRef:
    return ChatRef(Target(PLATFORM, chat_id, thread), kind)


def chat_access(interaction: discord.Interaction, ref: ChatRef, agent_id: str) -> ChatAccess:
    """What the user of an interaction may see and change in this chat
    (core/commitments/visibility.py): in a DM everything, elsewhere their own,
    and every member's with Manage Messages in this channel
    (`interaction.permissions` are their resolved permissions there,
    overwrites included)."""
    asker = Asker(agent_id, ref.session_key(agent_id), ref.chat_kind, str(interaction.user.id))

    async def is_admin() -> bool:
        return interaction.guild_id is not None and interaction.permissions.manage_messages

    return ChatAccess(asker, is_admin)


NOT_ALLOWED = "Sorry, you can't use this bot here."

# The pairing notice for an unknown user (platform user id, name), None when
# no code can be offered now (channels/base.py `pairing_text`).
PairingText = Callable[[str, str | None], Awaitable[str | None]]


class Gate:
    """Whether a user may use the bot where an interaction happens (slash
    commands, buttons): the channel pipeline's admission (channels/base.py,
    read from the live config on every check). A DM is decided by dmPolicy,
    a server by `groups` / `groupPolicy`."""

    def __init__(self, admission: Admit, pairing_text: PairingText | None = None) -> None:
        self._admission = admission
        self._pairing_text = pairing_text

    async def allowed(
        self, user: discord.abc.User, guild_id: int | None, client: discord.Client | None = None
    ) -> bool:
        """`client` is unused (membership is no longer asked); kept so the
        callers' calls read as before."""
        server = str(guild_id) if guild_id is not None else None
        kind: ChatKind = "private" if server is None else "channel"
        return await self._admission(kind, str(user.id), user.name, server) == "yes"

    async def refusal(self, user: discord.abc.User, guild_id: int | None) -> str:
        """What a refused user is told: under dmPolicy `pairing`, in a DM,
        their pairing code (as a message there would get); else that they
        can't use the bot here."""
        if (
            guild_id is None
            and self._pairing_text is not None
            and await self._admission("private", str(user.id), user.name, None) == "pair"
        ):
            text = await self._pairing_text(str(user.id), user.name)
            if text is not None:
                return text
        return NOT_ALLOWED


def addressed(message: discord.Message, me: discord.ClientUser) -> bool:
    """Mentioned (by user or by the bot's own role) or replied to. An
    @everyone / @here does not count: it is not addressed to the bot."""
    if any(user.id == me.id for user in message.mentions):
        return True
    if any(is_own_role(role, me) for role in message.role_mentions):
        return True
    ref = message.reference
    if ref is None:
        return False
    replied = ref.resolved if isinstance(ref.resolved, discord.Message) else ref.cached_message
    return replied is not None and replied.author.id == me.id


def is_own_role(role: discord.Role, me: discord.ClientUser) -> bool:
    # Discord's autocomplete sometimes inserts the bot's managed role when a
    # user types @bot.
    return role.tags is not None and role.tags.bot_id == me.id


def clean_text(message: discord.Message, me: discord.ClientUser) -> str:
    """The message text as the model should read it: the bot's own mention
    removed, other user mentions as @names."""
    text = message.content
    for token in (f"<@{me.id}>", f"<@!{me.id}>"):
        text = text.replace(token, "")
    for role in message.role_mentions:
        if is_own_role(role, me):
            text = text.replace(f"<@&{role.id}>", "")
    for user in message.mentions:
        if user.id != me.id:
            name = f"@{user.display_name}"
            text = text.replace(f"<@{user.id}>", name).replace(f"<@!{user.id}>", name)
    # Only the ends are trimmed: inner spacing (code, lists) is the user's.
    return text.strip()


# An attachment's kind by its MIME type, the first matching prefix; else a file.
_BY_MIME: tuple[tuple[str, MediaKind], ...] = (
    ("image/gif", "animation"),
    ("image/", "photo"),
    ("video/", "video"),
    ("audio/", "audio"),
)


def media_kind(message: discord.Message) -> MediaKind | None:
    """What a message carries that kept cannot read, or None. An attachment's
    kind comes from its content type, else from its file name."""
    if message.stickers:
        return "sticker"
    if not message.attachments:
        return None
    if message.flags.voice:
        return "voice"
    attachment = message.attachments[0]
    mime = attachment.content_type or mimetypes.guess_type(attachment.filename)[0] or ""
    return next((kind for prefix, kind in _BY_MIME if mime.startswith(prefix)), "file")
