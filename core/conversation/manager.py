"""ConversationManager: one user turn, from the stored message to the sent reply.

A user message is stored before anything else, so a crash at any later point
loses nothing: on start-up `recover_unanswered` answers what was stored but
never replied to. Turns of one session run one at a time in arrival order
(see core/locks.py, shared with the heartbeat; across workers the lock is
the database's); sessions run concurrently. Whoever holds a session answers
its messages in stored order and never one that is answered already, so
several workers, a restart or a recovery never reorder or repeat a reply.

A reply is stored `stored`, marked `sending` just before its request leaves
for the platform (after any wait for the platform's pace: the channel calls
`Outbound.on_leaving`), and `sent` once taken. Only a reply that reached
`sending` can be in doubt after a crash; recovery sends the ones that did not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any

from core.clock import Clock
from core.config.model import AgentConfig, KeptConfig
from core.conversation.events import ReplyEvent, ReplyHook
from core.conversation.limited import ConversationLimits, FirstHold
from core.conversation.prompt import TurnPlace, chat_messages
from core.conversation.session_cache import SESSION_CACHE_SIZE, SessionCache
from core.errors import MessageNotStored
from core.limits import Admissions, BudgetSpent, Meter, Payer
from core.limits.notices import CUT_SHORT
from core.llm import Completion, LLMError, Model
from core.locks import SessionLocks
from core.logs import event
from core.messages import ButtonAction, Inbound, Outbound, Sender, SendResult, Target, storable
from core.metrics import recorder
from core.store.base import (
    DuplicateMessage,
    MessageRecord,
    NewMessage,
    SessionRecord,
    Store,
    UnknownSession,
)
from core.tools import ChatAdmins, ToolContext, ToolRegistry
from core.users import UserZones

log = logging.getLogger("kept.conversation")

APOLOGY = "Sorry, I couldn't come up with an answer just now. Please try again in a moment."
# The text of a withdrawn message's marker row (see `withdraw`).
WITHDRAWN = "(the user cancelled this answer)"
RECOVERY_WINDOW = timedelta(minutes=10)
HISTORY_ROWS = 200


# Entered around each turn's model call (a channel's "typing…").
DuringModel = Callable[[], AbstractAsyncContextManager[object]]


class ConversationManager:
    def __init__(
        self,
        *,
        store: Store,
        llm: Model,
        sender: Sender,
        config: Callable[[], KeptConfig],
        clock: Clock,
        tools: ToolRegistry | None = None,
        session_locks: SessionLocks | None = None,
        reply_hooks: Sequence[ReplyHook] = (),
        session_cache_size: int = SESSION_CACHE_SIZE,
        zones: UserZones | None = None,
        admins: ChatAdmins | None = None,
        meter: Meter | None = None,
        admissions: Admissions | None = None,
    ) -> None:
        self._store = store
        # Every call goes through the meter (core/limits/meter.py): without
        # one given, calls are counted in the metrics only.
        self._meter = meter or Meter(llm, config=config, clock=clock)
        self._sender = sender
        self._config = config
        self._clock = clock
        self._tools = tools or ToolRegistry()
        # Rates and the first call's hold, decided as each message is stored.
        self._limits = ConversationLimits(
            store=store,
            sender=sender,
            meter=self._meter,
            clock=clock,
            config=config,
            tools=self._tools,
            admissions=admissions,
        )
        self._locks = session_locks if session_locks is not None else SessionLocks()
        self._sessions = SessionCache(session_cache_size)
        self._reply_hooks: list[ReplyHook] = list(reply_hooks)
        self._background: set[asyncio.Task[None]] = set()
        # Each user's own time zone for the prompt; None: the agent's for all.
        self._zones = zones
        # Whether a sender administers their group, for the tools; None:
        # nobody does (members see only their own there).
        self._admins = admins

    @property
    def tools(self) -> ToolRegistry:
        return self._tools

    @property
    def sessions(self) -> SessionCache:
        """The cached session records (read by tests and the soak bench)."""
        return self._sessions

    async def handle(
        self,
        inbound: Inbound,
        *,
        on_stored: Callable[[], object] | None = None,
        during_model: DuringModel | None = None,
    ) -> MessageRecord | None:
        """Store, answer and send one inbound message. Returns the stored reply,
        or None when the message was a duplicate or had nothing to answer.

        `on_stored` is called once the message is in the transcript (also when
        it already was), before the answer: from then on a crash loses no
        message, so a channel may confirm it to the platform. When the message
        cannot be stored, MessageNotStored is raised and `on_stored` is not
        called. `during_model` is entered around the model call of each turn
        this takes (a channel's "typing…"), not while the turn waits."""
        with self._limits.first_hold_slot(inbound.session_key) as hold_first:
            return await self._handle(inbound, on_stored, during_model, hold_first=hold_first)

    async def _handle(
        self,
        inbound: Inbound,
        on_stored: Callable[[], object] | None,
        during_model: DuringModel | None,
        *,
        hold_first: bool,
    ) -> MessageRecord | None:
        if not inbound.text.strip():
            return None
        key = inbound.session_key
        message = NewMessage(
            session_key=key,
            role="user",
            text=inbound.text,
            ts=inbound.ts,
            sender_id=inbound.sender_id,
            platform_message_id=inbound.platform_message_id,
        )
        try:
            session = await self._ensure_session(inbound)
            try:
                user, admitted = await self._limits.store_message(
                    inbound, message, hold_first=hold_first
                )
            except UnknownSession:
                # Deleted since we last saw it: this message starts it anew.
                session = await self._ensure_session(inbound, fresh=True)
                user, admitted = await self._limits.store_message(
                    inbound, message, hold_first=hold_first
                )
        except DuplicateMessage:
            if on_stored is not None:
                on_stored()
            event(
                log,
                logging.INFO,
                "inbound_duplicate",
                agent=inbound.agent_id,
                session=key,
                platform_message=inbound.platform_message_id,
            )
            return None
        except Exception as exc:
            raise MessageNotStored(
                f"message {inbound.platform_message_id} of {key} was not stored: {exc!r}"
            ) from exc
        if on_stored is not None:
            on_stored()
        recorder().message_in(inbound.target.platform)
        if not admitted.verdict.allowed:
            await self._limits.tell_limited(inbound, user, admitted.verdict)
            return None
        if user.session_id != session.id:
            # The cached record is of a session deleted and started again
            # elsewhere (another worker, an import): the store has the live one.
            # (Were the old id reused, only the times would differ: no turn reads them.)
            session = await self._ensure_session(inbound, fresh=True)
        first = FirstHold(admitted.hold)
        try:
            async with self._locks.hold(key):
                return await self._answer_in_order(session, user, during_model, first)
        finally:
            await self._limits.give_back(first)

    async def _answer_in_order(
        self,
        session: SessionRecord,
        user: MessageRecord,
        during_model: DuringModel | None = None,
        first: FirstHold | None = None,
    ) -> MessageRecord | None:
        """Answer `user`, first answering what its session still owes from
        before it, and nothing twice. With several workers, an earlier message
        of the chat may have been stored by a worker that has not got the
        session yet (or died): whoever holds the session answers the chat's
        messages in stored order, and a message found answered is skipped.
        Returns the reply to `user`, None when someone else answered it."""
        since = self._clock.now() - RECOVERY_WINDOW
        owed = await self._store.unanswered_up_to(user, since=since)
        reply: MessageRecord | None = None
        for message in owed:
            mine = first if first is not None and message.id == user.id else None
            reply = await self._turn(session, message, during_model, mine)
        if owed and owed[-1].id == user.id:
            return reply
        return None

    async def withdraw(self, inbound: Inbound) -> bool:
        """The sender cancelled the answer to `inbound` (the console's Ctrl-C):
        under the session's lock, mark the stored message answered by an
        `error` row (as a failed turn's apology is; never in the model's
        history), so neither the next turn nor recovery answers it. False
        when it is not stored or was answered meanwhile."""
        key, wanted = inbound.session_key, inbound.platform_message_id
        async with self._locks.hold(key):
            pending = await self._store.unanswered(since=inbound.ts)
            found = [m for m in pending if m.session_key == key and m.platform_message_id == wanted]
            if wanted is None or not found:
                return False
            now, user_id = self._clock.now(), found[0].id
            marker = NewMessage(key, "assistant", WITHDRAWN, now, "error", in_reply_to=user_id)
            await self._store.add_message(marker)
        event(log, logging.INFO, "answer_withdrawn", agent=inbound.agent_id, session=key)
        return True

    async def edit(
        self, *, platform: str, chat_id: str, platform_message_id: str, text: str
    ) -> MessageRecord | None:
        """Apply a user's edit of a message they sent: the transcript and its
        search index change together. None when no such message is stored
        (it was never a turn). An edit is something the user said too: when it
        cannot be stored, MessageNotStored is raised so the channel can hold
        it and offer it again."""
        try:
            record = await self._store.edit_message(
                platform=platform,
                chat_id=chat_id,
                platform_message_id=platform_message_id,
                text=storable(text),
            )
        except Exception as exc:
            raise MessageNotStored(
                f"edit of message {platform_message_id} in {platform}:{chat_id}: {exc!r}"
            ) from exc
        if record is not None:
            event(
                log,
                logging.INFO,
                "message_edited",
                platform=platform,
                session=record.session_key,
                message=record.id,
            )
        return record

    async def delete(self, *, platform: str, chat_id: str, platform_message_id: str) -> bool:
        """Forget a message its sender deleted (transcript and search index);
        False when no such message is stored. A store failure raises
        MessageNotStored: the deletion did not happen."""
        try:
            deleted = await self._store.delete_message(
                platform=platform, chat_id=chat_id, platform_message_id=platform_message_id
            )
        except Exception as exc:
            raise MessageNotStored(
                f"deletion of message {platform_message_id} in {platform}:{chat_id}: {exc!r}"
            ) from exc
        if deleted:
            event(
                log,
                logging.INFO,
                "message_deleted",
                platform=platform,
                chat=chat_id,
                message=platform_message_id,
            )
        return deleted

    async def _ensure_session(self, inbound: Inbound, *, fresh: bool = False) -> SessionRecord:
        # A session's identity never changes and every message insert bumps
        # its updated_at, so the upsert (a write transaction) is needed only
        # the first time this process sees a key, not on every turn.
        key = inbound.session_key
        if not fresh and (known := self._sessions.get(key)) is not None:
            return known
        record = await self._store.ensure_session(
            key,
            agent_id=inbound.agent_id,
            platform=inbound.target.platform,
            chat_id=inbound.target.chat_id,
            chat_kind=inbound.chat_kind,
            thread_id=inbound.target.thread_id,
            now=self._clock.now(),
        )
        self._sessions.put(record)
        return record

    async def recover_unanswered(
        self,
        *,
        platforms: set[str] | None = None,
        window: timedelta = RECOVERY_WINDOW,
        quiet_for: timedelta = timedelta(0),
    ) -> int:
        """Answer user messages stored recently (within `window`, at least
        `quiet_for` ago) that never got a reply, once, in order. Messages of
        platforms without a live adapter, and chats another worker holds (it
        answers what its chat owes), are left alone."""
        now = self._clock.now()
        answered = await self._send_unsent(platforms, now - window, now - quiet_for)
        pending = await self._store.unanswered(since=now - window)
        for message in pending:
            if message.ts > now - quiet_for:
                continue
            session = await self._store.get_session(message.session_key)
            if session is None or (platforms is not None and session.platform not in platforms):
                continue
            async with self._locks.hold_unless_elsewhere(session.key) as held:
                # Answered meanwhile (by a live worker) or not: asked under the lock.
                if held and await self._answer_in_order(session, message) is not None:
                    event(
                        log,
                        logging.INFO,
                        "recovered_unanswered",
                        agent=session.agent_id,
                        session=session.key,
                        message=message.id,
                    )
                    answered += 1
        return answered

    async def _send_unsent(
        self, platforms: set[str] | None, since: datetime, before: datetime
    ) -> int:
        """Send the replies stored but never on their way (a stop or crash
        while they waited for the platform's pace), once each: a reply that
        reached `sending` is not among them, and `on_leaving` fences the
        rest against whoever sends one meanwhile."""
        sent = 0
        for reply in await self._store.unsent_replies(since=since):
            if reply.ts > before:
                continue
            session = await self._store.get_session(reply.session_key)
            if session is None or (platforms is not None and session.platform not in platforms):
                continue
            user = await self._store.get_message(reply.in_reply_to) if reply.in_reply_to else None
            async with self._locks.hold_unless_elsewhere(session.key) as held:
                if not held:
                    continue
                result = await self._send_reply(session, user, reply, ())
            if result.ok:
                event(
                    log,
                    logging.INFO,
                    "recovered_unsent_reply",
                    agent=session.agent_id,
                    session=session.key,
                    message=reply.id,
                )
                sent += 1
        return sent

    async def _send_reply(
        self,
        session: SessionRecord,
        user: MessageRecord | None,
        reply: MessageRecord,
        actions: tuple[ButtonAction, ...],
    ) -> SendResult:
        """Send a stored reply: `sending` just before it leaves, `sent` with
        its platform id once taken."""
        target = Target(session.platform, session.chat_id, session.thread_id)
        # In a group or channel the reply quotes the message it answers, so a
        # busy chat sees what it answers; a private chat needs no quote.
        quote = None
        if user is not None and session.chat_kind != "private":
            quote = user.platform_message_id
        result = await self._sender.send(
            Outbound(
                target=target,
                text=reply.text,
                reply_to_platform_id=quote,
                actions=actions,
                on_leaving=lambda: self._store.begin_reply_send(reply.id),
            )
        )
        if result.ok:
            await self._store.reply_sent(reply.id, result.message_id)
        else:
            event(
                log,
                logging.WARNING,
                "reply_not_sent",
                agent=session.agent_id,
                session=session.key,
                message=reply.id,
                error=result.error,
                action="check the channel's token and permissions",
            )
        return result

    async def drain(self) -> None:
        """Wait for background reply hooks (used at shutdown and in tests)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def _admin_check(self, target: Target, sender_id: str | None) -> Callable[[], Awaitable[bool]]:
        """The tools' "is the sender an admin here?": asked of the platform
        only when a tool needs it, for the stored sender, never for anyone
        the model names."""
        admins = self._admins

        async def is_admin() -> bool:
            if admins is None or sender_id is None:
                return False
            return await admins.is_admin(target, sender_id)

        return is_admin

    async def _turn(
        self,
        session: SessionRecord,
        user: MessageRecord,
        during_model: DuringModel | None = None,
        first: FirstHold | None = None,
    ) -> MessageRecord:
        # Latency is measured, not scheduled: wall time, not the injected clock.
        started = time.perf_counter()
        # The turn's one read of the config: everything below uses `agent`.
        agent = self._config().agent_or_default(session.agent_id)
        target = Target(session.platform, session.chat_id, session.thread_id)
        ctx = ToolContext(
            agent_id=session.agent_id,
            session_key=session.key,
            target=target,
            chat_kind=session.chat_kind,
            sender_id=user.sender_id,
            now=self._clock.now(),
            is_admin=self._admin_check(target, user.sender_id),
        )
        payer = Payer(
            agent_id=session.agent_id,
            platform=session.platform,
            user_id=user.sender_id,
            chat_id=session.chat_id,
            shared=session.chat_kind != "private",
        )
        try:
            async with during_model() if during_model else contextlib.nullcontext():
                text = await self._agent_turn(agent, session, user, ctx, payer, first)
            kind = "text"
        except BudgetSpent as spent:
            reply, tell = await self._limits.over_budget(session, user, spent)
            if tell:
                await self._send_reply(session, user, reply, ())
            return reply
        except LLMError as exc:
            event(
                log,
                logging.WARNING,
                "model_failed",
                agent=session.agent_id,
                session=session.key,
                message=user.id,
                kind=exc.kind,
                error=str(exc),
                action=_operator_hint(exc),
            )
            text, kind = APOLOGY, "error"
        reply = await self._store.add_message(
            NewMessage(
                session_key=session.key,
                role="assistant",
                text=text,
                ts=self._clock.now(),
                kind=kind,  # type: ignore[arg-type]
                in_reply_to=user.id,
                send_state="stored",
            )
        )
        # Buttons a tool offered (set_timezone's Yes / No) go under the reply;
        # an apology offers nothing.
        actions = tuple(ctx.offers) if kind == "text" else ()
        result = await self._send_reply(session, user, reply, actions)
        if result.ok and kind == "text":
            self._fire_hooks(ReplyEvent(session, user, reply, user.sender_id))
        recorder().turn_seconds(session.platform, time.perf_counter() - started)
        return reply

    async def _agent_turn(
        self,
        agent: AgentConfig,
        session: SessionRecord,
        user: MessageRecord,
        ctx: ToolContext,
        payer: Payer,
        first: FirstHold | None = None,
    ) -> str:
        messages = await self._prompt(agent, session, user)
        specs = self._tools.specs() or None
        for _ in range(agent.max_tool_rounds):
            held = first.take() if first is not None else None
            completion = await self._meter.complete(payer, "chat", messages, tools=specs, held=held)
            if not completion.tool_calls:
                return _require_text(completion)
            messages.append(_assistant_tool_message(completion))
            await self._store_tool_row(session, user, "assistant", "tool_call", messages[-1])
            for call in completion.tool_calls:
                result = await self._tools.call(call.name, call.arguments, ctx)
                tool_message = {"role": "tool", "tool_call_id": call.id, "content": result}
                messages.append(tool_message)
                await self._store_tool_row(session, user, "tool", "tool_result", tool_message)
        # Out of tool rounds: one last call without tools forces a text answer.
        held = first.take() if first is not None else None
        last = await self._meter.complete(payer, "chat", messages, tools=None, held=held)
        return _require_text(last)

    async def _prompt(
        self, agent: AgentConfig, session: SessionRecord, user: MessageRecord
    ) -> list[dict[str, Any]]:
        rows = await self._store.history(session.key, before_turn_of=user.id, limit=HISTORY_ROWS)
        own = None
        if self._zones is not None:
            own = await self._zones.own(session.platform, user.sender_id)
        place = TurnPlace(
            platform=session.platform,
            chat_kind=session.chat_kind,
            now=self._clock.now(),
            timezone=own or agent.timezone,
            own_zone=own is not None,
        )
        return chat_messages(agent, place, rows, user.text)

    async def _store_tool_row(
        self,
        session: SessionRecord,
        user: MessageRecord,
        role: str,
        kind: str,
        payload: dict[str, Any],
    ) -> None:
        await self._store.add_message(
            NewMessage(
                session_key=session.key,
                role=role,  # type: ignore[arg-type]
                kind=kind,  # type: ignore[arg-type]
                text="",
                ts=self._clock.now(),
                in_reply_to=user.id,
                payload=json.dumps(payload, ensure_ascii=False),
            )
        )

    def _fire_hooks(self, reply_event: ReplyEvent) -> None:
        for hook in self._reply_hooks:
            task = asyncio.create_task(self._run_hook(hook, reply_event))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _run_hook(self, hook: ReplyHook, reply_event: ReplyEvent) -> None:
        try:
            await hook(reply_event)
        except Exception as exc:
            event(
                log,
                logging.ERROR,
                "reply_hook_failed",
                agent=reply_event.session.agent_id,
                session=reply_event.session.key,
                message=reply_event.reply.id,
                error=repr(exc),
            )


def _require_text(completion: Completion) -> str:
    if not completion.text.strip():
        raise LLMError("the model answered with no text", kind="malformed")
    if completion.finish_reason == "length":
        # Cut at the output cap (llm.maxOutputTokens.chat): say so rather
        # than let a half sentence pass for the whole answer.
        return f"{completion.text.rstrip()}\n\n{CUT_SHORT}"
    return completion.text


def _assistant_tool_message(completion: Completion) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": completion.text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in completion.tool_calls
        ],
    }


def _operator_hint(exc: LLMError) -> str:
    return {
        "auth": "check the API key in the environment variable named by llm.apiKeyEnv",
        "not_found": "check llm.models in the config: the endpoint does not know this model",
        "no_api_path": "set llm.baseUrl to the API root, usually ending in /v1",
        "timeout": "the model endpoint is slow; raise llm.timeoutSeconds or check the endpoint",
        "connection": "check llm.baseUrl and that the endpoint is up",
    }.get(exc.kind, "check the model endpoint's health")
