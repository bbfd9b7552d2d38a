"""Where a Discord message or interaction belongs, whether a message is for
the bot, and who may talk to it.

Shared by the adapter (messages), the slash commands and the follow-up
buttons, so all three agree on the session a chat maps to:

- a DM is `private`, a group DM `group`, a server channel `channel`;
- a thread keeps its own session: chat id = the parent channel, thread id =
  the thread (DESIGN.md, "Identity and scope").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import discord

from core.clock import Clock
from core.commitments.visibility import Asker, ChatAccess
from core.config import DiscordConfig
from core.logs import event
from core.messages import ChatKind, Target, session_key
from core.store.base import SessionRecord

PLATFORM = "discord"

log = logging.getLogger("kept.discord")

_THREAD_TYPES = frozenset(
    {
        discord.ChannelType.public_thread,
        discord.ChannelType.private_thread,
        discord.ChannelType.news_thread,
    }
)
# How long a DM sender's membership of an allowed guild is remembered.
MEMBERSHIP_TTL = timedelta(minutes=10)


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


class Gate:
    """Who may talk to the bot where: the channel's allow-list (`allowFrom`,
    channels/base.py), then `allowGuilds`, both read from the live config on
    every check.

    allowGuilds lists server ids; empty allows every server. When it is set,
    a DM is allowed only from a member of one of those servers, so a bot
    that is also in other servers does not answer their members privately.
    """

    def __init__(
        self,
        user_allowed: Callable[[str, str | None], bool],
        settings: Callable[[], DiscordConfig],
        clock: Clock,
    ) -> None:
        self._user_allowed = user_allowed
        self._settings = settings
        self._clock = clock
        self._members: dict[int, tuple[bool, datetime]] = {}

    async def allowed(
        self, user: discord.abc.User, guild_id: int | None, client: discord.Client
    ) -> bool:
        server = str(guild_id) if guild_id is not None else None
        return await self.admits(str(user.id), user.name, server, client)

    async def admits(
        self, user_id: str, username: str | None, server_id: str | None, client: discord.Client
    ) -> bool:
        if not self._user_allowed(user_id, username):
            return False
        guilds = {g.strip() for g in self._settings().allow_guilds if g.strip()}
        if not guilds:
            return True
        if server_id is not None:
            return server_id in guilds
        return await self._member_of_any(int(user_id), guilds, client)

    async def _member_of_any(self, user_id: int, guilds: set[str], client: discord.Client) -> bool:
        now = self._clock.now()
        cached = self._members.get(user_id)
        if cached is not None and cached[1] > now:
            return cached[0]
        found = False
        for guild_id in sorted(guilds):
            guild = client.get_guild(int(guild_id)) if guild_id.isdigit() else None
            if guild is None:
                continue
            if guild.get_member(user_id) is not None:
                found = True
                break
            try:
                # Without the members intent the cache is sparse: ask once.
                await guild.fetch_member(user_id)
            except discord.NotFound:
                continue
            except discord.HTTPException as exc:
                event(
                    log,
                    logging.WARNING,
                    "discord_member_check_failed",
                    guild=guild_id,
                    status=exc.status,
                )
                continue
            found = True
            break
        if len(self._members) > 10_000:
            self._members.clear()  # a bound, not an LRU: the check is cheap to redo
        self._members[user_id] = (found, now + MEMBERSHIP_TTL)
        return found


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
