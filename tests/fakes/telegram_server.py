"""A fake Telegram Bot API on 127.0.0.1 for end-to-end tests.

The real python-telegram-bot talks to it through `channels.telegram.baseUrl`:
requests go to `/bot<token>/<method>`. Tests push updates (they come out of
a long-polling `getUpdates` that honours `offset` like Telegram: an update is
forgotten once a later request's offset is past it), read every recorded
call, and script failures: status codes with Telegram's descriptions, 429
with `parameters.retry_after`, delays (a reply that outlives the client's
timeout after the message was already "sent") and 401 for a wrong token;
`unreachable` cuts every connection, as a network outage does.

Texts are checked as Telegram checks them: an empty text is refused (400
"message text is empty"), so is one over 4,096 UTF-16 code units, and
entities must lie within the text (UTF-16 offsets), nest rather than cross,
and hold nothing inside `code`/`pre`; `refuse_entities` makes it refuse
every message that carries entities (400 "can't parse entities"), as
Telegram does with ones it cannot read.

`sendDocument` takes a multipart upload as Telegram does (a bot may send
files up to 50 MB): the message is recorded with its caption as `text` and
the file's name and bytes (`Sent.filename`, `Sent.document`).

Flood control, as Telegram's: `flood_control(limit)` makes the fake answer
429 to a message beyond `limit` in any `window` seconds, and then refuse
every message (from any chat) until the `retry_after` it named has passed;
each new flood names a longer one (1, 2, then 3 s by default, times `unit`,
so tests can run on fractions of a second). `hold_sends()` gates messages:
each waits, not yet taken, until the test releases the gate.

Confirmation can be gated: `hold_confirmations()` makes a getUpdates whose
offset would confirm updates wait, before Telegram forgets them, until the
test releases it. The bot has made its decision by then (the request is
sent), so whatever the test checks meanwhile is the state at confirmation.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

JSON = dict[str, Any]
TOKEN = "123456:TEST-fake-token"
BOT_ID = 4242
BOT_USERNAME = "kept_bot"
MAX_UTF16 = 4096
MAX_UPLOAD = 50 * 1024 * 1024  # bytes a bot may send as a file
MAX_CAPTION = 1024
# Parameters PTB sends as plain strings; the rest arrive JSON-encoded.
_TEXT_PARAMS = {"text", "url", "secret_token", "callback_query_id", "action", "caption"}

_FILE = {"file_id": "AgAD-file", "file_unique_id": "AQAD-unique"}
# What Telegram puts in a message in place of `text`, one of each kind.
MEDIA: dict[str, Any] = {
    "photo": [{**_FILE, "width": 90, "height": 60}, {**_FILE, "width": 1280, "height": 853}],
    "voice": {**_FILE, "duration": 3, "mime_type": "audio/ogg"},
    "video": {**_FILE, "width": 640, "height": 360, "duration": 5},
    "video_note": {**_FILE, "length": 240, "duration": 5},
    "audio": {**_FILE, "duration": 180, "title": "Song"},
    "sticker": {
        **_FILE,
        "type": "regular",
        "width": 512,
        "height": 512,
        "is_animated": False,
        "is_video": False,
        "emoji": "👍",
    },
    "document": {**_FILE, "file_name": "report.pdf", "mime_type": "application/pdf"},
    "location": {"latitude": 48.8584, "longitude": 2.2945},
    "contact": {"phone_number": "+33100000000", "first_name": "Bea"},
}


@dataclass
class Call:
    method: str
    params: JSON
    at: float = field(default_factory=time.monotonic)
    returned: list[int] = field(default_factory=list)  # getUpdates: the update ids answered


@dataclass(frozen=True)
class Upload:
    """A file part of a multipart request."""

    filename: str
    data: bytes


@dataclass
class Gate:
    """Holds calls until `release()`; `waiting` lists what each held call would do."""

    waiting: list[list[int]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def release(self) -> None:
        self.released.set()


# What counts as a message for flood control ("typing…" and reads do not).
FLOODED = frozenset({"sendMessage", "sendDocument", "editMessageText", "editMessageReplyMarkup"})


@dataclass
class Flood:
    """Telegram's flood control: at most `limit` messages in any `window`
    seconds; beyond it a 429 naming `retry_after`, and every message refused
    until that time has passed. Each flood names the next of `steps` (the
    last one repeats), in units of `unit` seconds."""

    limit: int
    window: float = 1.0
    steps: tuple[float, ...] = (1, 2, 3)
    unit: float = 1.0
    clock: Callable[[], float] = time.monotonic
    floods: int = 0
    refused: int = 0
    until: float = 0.0
    _taken: deque[float] = field(default_factory=deque)

    def refusal(self) -> float | None:
        """None when a message may be taken now (and count it), else the
        retry_after to answer with."""
        now = self.clock()
        if now < self.until:
            self.refused += 1
            return _rounded(self.until - now)
        while self._taken and self._taken[0] <= now - self.window:
            self._taken.popleft()
        if len(self._taken) < self.limit:
            self._taken.append(now)
            return None
        wait = self.steps[min(self.floods, len(self.steps) - 1)] * self.unit
        self.floods += 1
        self.refused += 1
        self.until = now + wait
        return _rounded(wait)


def _rounded(seconds: float) -> float:
    # Telegram names whole seconds; a fake on fractions names them as they are.
    whole = round(seconds)
    return whole if abs(seconds - whole) < 1e-9 and whole >= 1 else round(seconds, 3)


@dataclass
class Script:
    """How the next call of a method goes wrong."""

    status: int = 200
    description: str = ""
    retry_after: float | None = None
    delay: float = 0.0  # seconds before answering
    # With a delay: perform the call first (the message is "sent") and only
    # answer late, like a timeout after Telegram accepted the message.
    apply: bool = False


@dataclass
class Sent:
    chat_id: int
    message_id: int
    text: str
    thread_id: int | None = None
    reply_markup: JSON | None = None
    reply_to: int | None = None
    edits: list[str] = field(default_factory=list)
    entities: list[JSON] = field(default_factory=list)
    at: float = field(default_factory=time.monotonic)  # when the fake took it
    # A sendDocument's file.
    filename: str | None = None
    document: bytes | None = None


class FakeTelegram:
    def __init__(self, *, token: str = TOKEN, username: str = BOT_USERNAME) -> None:
        self.token = token
        self.username = username
        self.calls: list[Call] = []
        self.sent: list[Sent] = []
        self.confirmed: list[int] = []
        self.members: dict[tuple[int, int], str] = {}
        self.on_confirm: Callable[[list[int]], Awaitable[None]] | None = None
        self.confirmation_gate: Gate | None = None
        # Refuse every message with entities, as Telegram refuses ones it
        # cannot parse.
        self.refuse_entities = False
        # A network outage: every request's connection is cut before any
        # answer (the client sees a network error, as with no route).
        self.unreachable = False
        self.flood: Flood | None = None
        self.send_gate: Gate | None = None
        self._pending: list[JSON] = []
        self._scripts: dict[str, deque[Script]] = {}
        self._chats: dict[int, JSON] = {}
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1000)
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._closed = False
        self.root = ""

    # --- lifecycle ------------------------------------------------------------

    async def start(self) -> FakeTelegram:
        # Bots upload files of up to 50 MB (sendDocument).
        app = web.Application(client_max_size=MAX_UPLOAD + 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.root = f"http://127.0.0.1:{port}"
        return self

    async def close(self) -> None:
        self._closed = True
        async with self._changed:
            self._changed.notify_all()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeTelegram:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- scripting --------------------------------------------------------------

    def script(self, method: str, *steps: Script) -> None:
        self._scripts.setdefault(method, deque()).extend(steps)

    def fail(
        self, method: str, status: int, description: str, *, retry_after: float | None = None
    ) -> None:
        self.script(method, Script(status, description, retry_after))

    def flood_control(
        self,
        limit: int,
        *,
        window: float = 1.0,
        steps: tuple[float, ...] = (1, 2, 3),
        unit: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> Flood:
        """From now on, refuse messages as Telegram's flood control does (see Flood)."""
        self.flood = Flood(limit, window, steps, unit, clock)
        return self.flood

    def hold_sends(self) -> Gate:
        """From now on every message waits, not yet taken, for the returned
        gate's release; `waiting` lists the chat of each held one."""
        self.send_gate = Gate()
        return self.send_gate

    def hold_confirmations(self) -> Gate:
        """From now on, a getUpdates that would confirm updates waits for the
        returned gate's release before it confirms them."""
        self.confirmation_gate = Gate()
        return self.confirmation_gate

    def offsets(self) -> list[int]:
        """The offset of every getUpdates so far (0 when none was given)."""
        return [int(c.params.get("offset") or 0) for c in self.calls_to("getUpdates")]

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def texts(self, chat_id: int | None = None) -> list[str]:
        return [s.text for s in self.sent if chat_id is None or s.chat_id == chat_id]

    async def wait_for(self, check: Callable[[], Any], within: float = 5.0) -> Any:
        """Wait until check() is truthy (it sees every recorded call)."""
        deadline = time.monotonic() + within
        while not (result := check()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting; calls: {[c.method for c in self.calls]}")
            await asyncio.sleep(0.01)
        return result

    # --- updates --------------------------------------------------------------------

    async def push(self, update: JSON) -> JSON:
        update.setdefault("update_id", next(self._update_ids))
        async with self._changed:
            self._pending.append(update)
            self._changed.notify_all()
        return update

    def message(
        self,
        text: str,
        *,
        chat_id: int = 42,
        user_id: int | None = None,
        chat_type: str = "private",
        thread_id: int | None = None,
        reply_to: JSON | None = None,
        message_id: int | None = None,
        username: str | None = "ana",
        first_name: str = "Ana",
    ) -> JSON:
        """A user's message as Telegram sends it, with the mention and command
        entities Telegram would add."""
        user_id = user_id if user_id is not None else chat_id
        chat = self._chat(chat_id, chat_type, first_name)
        msg: JSON = {
            "message_id": message_id if message_id is not None else next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
            "text": text,
        }
        if username:
            msg["from"]["username"] = username
        entities = _entities(text)
        if entities:
            msg["entities"] = entities
        if thread_id is not None:
            msg["message_thread_id"] = thread_id
            msg["is_topic_message"] = True
            # Telegram makes every topic message a reply to the topic's start.
            msg["reply_to_message"] = {
                "message_id": thread_id,
                "date": msg["date"],
                "chat": chat,
                "from": {"id": 1, "is_bot": False, "first_name": "Founder"},
                "forum_topic_created": {"name": "Topic", "icon_color": 7322096},
                "message_thread_id": thread_id,
                "is_topic_message": True,
            }
        if reply_to is not None:
            msg["reply_to_message"] = reply_to
        return msg

    async def push_message(self, text: str, **kwargs: Any) -> JSON:
        return await self.push({"message": self.message(text, **kwargs)})

    def media_message(self, kind: str, *, caption: str | None = None, **kwargs: Any) -> JSON:
        """A message carrying `kind` (a key of MEDIA: "photo", "voice", …)
        instead of text, with `caption` (and its entities) when given."""
        msg = self.message("", **kwargs)
        del msg["text"]
        msg.pop("entities", None)
        msg[kind] = MEDIA[kind]
        if caption is not None:
            msg["caption"] = caption
            if entities := _entities(caption):
                msg["caption_entities"] = entities
        return msg

    async def push_media(self, kind: str, **kwargs: Any) -> JSON:
        return await self.push({"message": self.media_message(kind, **kwargs)})

    async def push_edit(self, message: JSON, text: str) -> JSON:
        edited = {**message, "text": text, "edit_date": int(time.time())}
        return await self.push({"edited_message": edited})

    async def push_callback(
        self, sent: Sent, data: str, *, user_id: int, name: str = "Ana"
    ) -> JSON:
        """A press on a button of a message the bot sent."""
        message = self._message_json(sent)
        query = {
            "id": str(next(self._update_ids) * 7919),
            "from": {"id": user_id, "is_bot": False, "first_name": name},
            "chat_instance": "ci",
            "message": message,
            "data": data,
        }
        return await self.push({"callback_query": query})

    def bot_message(self, sent: Sent) -> JSON:
        """A message of ours, as it appears in `reply_to_message`."""
        return self._message_json(sent)

    # --- the API --------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _params(request)
        call = Call(method, params)
        self.calls.append(call)
        if self.unreachable and request.transport is not None:
            request.transport.abort()
            return web.Response(status=503)  # never reaches the client
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        if method in FLOODED:
            gate = self.send_gate
            if gate is not None:
                gate.waiting.append([int(params.get("chat_id") or 0)])
                gate.arrived.set()
                await gate.released.wait()
            if self.flood is not None and (wait := self.flood.refusal()) is not None:
                return _error(429, f"Too Many Requests: retry after {wait}", wait)
        steps = self._scripts.get(method)
        step = steps.popleft() if steps else Script()
        if step.delay and not step.apply:
            await asyncio.sleep(step.delay)
        if step.status != 200:
            return _error(step.status, step.description, step.retry_after)
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        result = await handler(params)
        if isinstance(result, web.Response):
            return result
        if method == "getUpdates":
            call.returned = [u["update_id"] for u in result]
        if step.delay and step.apply:
            await asyncio.sleep(step.delay)
        return web.json_response({"ok": True, "result": result})

    async def _api_getMe(self, params: JSON) -> JSON:
        return {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": "Kept",
            "username": self.username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    async def _api_getUpdates(self, params: JSON) -> list[JSON]:
        offset = int(params.get("offset") or 0)
        if offset:
            done = [u["update_id"] for u in self._pending if u["update_id"] < offset]
            gate = self.confirmation_gate
            if done and gate is not None:
                gate.waiting.append(done)
                gate.arrived.set()
                await gate.released.wait()
                done = [u["update_id"] for u in self._pending if u["update_id"] < offset]
            self._pending = [u for u in self._pending if u["update_id"] >= offset]
            self.confirmed.extend(done)
            if done and self.on_confirm is not None:
                await self.on_confirm(done)
        timeout = float(params.get("timeout") or 0)
        limit = int(params.get("limit") or 100)

        def ready() -> list[JSON]:
            return [u for u in self._pending if u["update_id"] >= offset][:limit]

        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: self._closed or ready()), timeout
                )
            return ready()

    async def _api_sendMessage(self, params: JSON) -> JSON | web.Response:
        refused = self._refuse_text(params)
        if refused is not None:
            return refused
        chat_id = int(params["chat_id"])
        reply = params.get("reply_parameters") or {}
        sent = Sent(
            chat_id=chat_id,
            message_id=next(self._message_ids),
            text=params["text"],
            thread_id=params.get("message_thread_id"),
            reply_markup=params.get("reply_markup"),
            reply_to=reply.get("message_id"),
            entities=list(params.get("entities") or []),
        )
        self.sent.append(sent)
        return self._message_json(sent)

    async def _api_sendDocument(self, params: JSON) -> JSON | web.Response:
        upload = params.get("document")
        if not isinstance(upload, Upload):
            return _error(400, "Bad Request: there is no document in the request")
        if len(upload.data) > MAX_UPLOAD:
            return _error(413, "Request Entity Too Large")
        caption = str(params.get("caption") or "")
        if utf16_len(caption) > MAX_CAPTION:
            return _error(400, "Bad Request: message caption is too long")
        reply = params.get("reply_parameters") or {}
        sent = Sent(
            chat_id=int(params["chat_id"]),
            message_id=next(self._message_ids),
            text=caption,
            thread_id=params.get("message_thread_id"),
            reply_markup=params.get("reply_markup"),
            reply_to=reply.get("message_id"),
            filename=upload.filename,
            document=upload.data,
        )
        self.sent.append(sent)
        return self._message_json(sent)

    async def _api_editMessageText(self, params: JSON) -> JSON | web.Response:
        refused = self._refuse_text(params)
        if refused is not None:
            return refused
        sent = self._find(params)
        sent.text = params["text"]
        sent.edits.append(params["text"])
        sent.reply_markup = params.get("reply_markup")
        return self._message_json(sent)

    async def _api_editMessageReplyMarkup(self, params: JSON) -> JSON:
        sent = self._find(params)
        sent.reply_markup = params.get("reply_markup")
        return self._message_json(sent)

    async def _api_getChatMember(self, params: JSON) -> JSON:
        chat_id, user_id = int(params["chat_id"]), int(params["user_id"])
        return _member(user_id, self.members.get((chat_id, user_id), "member"))

    async def _api_getChatAdministrators(self, params: JSON) -> list[JSON]:
        chat_id = int(params["chat_id"])
        return [
            _member(user, status)
            for (chat, user), status in self.members.items()
            if chat == chat_id and status in ("creator", "administrator")
        ]

    async def _api_answerCallbackQuery(self, params: JSON) -> bool:
        return True

    _api_setMyCommands = _api_answerCallbackQuery
    _api_sendChatAction = _api_answerCallbackQuery
    _api_deleteWebhook = _api_answerCallbackQuery
    _api_setWebhook = _api_answerCallbackQuery

    # --- helpers --------------------------------------------------------------------

    def _refuse_text(self, params: JSON) -> web.Response | None:
        """Telegram's 400 for a text it does not take; None when it does."""
        text = str(params.get("text") or "")
        entities = params.get("entities") or []
        if not text.strip():
            return _error(400, "Bad Request: message text is empty")
        if utf16_len(text) > MAX_UTF16:
            return _error(400, "Bad Request: message is too long")
        if entities and self.refuse_entities:
            return _error(400, "Bad Request: can't parse entities: refused by the test")
        problem = entity_problem(text, entities)
        if problem is not None:
            return _error(400, f"Bad Request: can't parse entities: {problem}")
        return None

    def _chat(self, chat_id: int, chat_type: str, first_name: str = "Ana") -> JSON:
        if chat_id not in self._chats:
            chat: JSON = {"id": chat_id, "type": chat_type}
            if chat_type == "private":
                chat["first_name"] = first_name
            else:
                chat["title"] = f"Group {chat_id}"
                if chat_type == "supergroup":
                    chat["is_forum"] = True
            self._chats[chat_id] = chat
        return self._chats[chat_id]

    def _find(self, params: JSON) -> Sent:
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        return next(s for s in self.sent if s.chat_id == chat_id and s.message_id == message_id)

    def _message_json(self, sent: Sent) -> JSON:
        kind = "private" if sent.chat_id > 0 else "supergroup"
        message: JSON = {
            "message_id": sent.message_id,
            "date": int(time.time()),
            "chat": self._chats.get(sent.chat_id) or self._chat(sent.chat_id, kind),
            "from": {"id": BOT_ID, "is_bot": True, "first_name": "Kept", "username": self.username},
            "text": sent.text,
        }
        if sent.document is not None:
            del message["text"]
            message["caption"] = sent.text
            message["document"] = {
                **_FILE,
                "file_name": sent.filename,
                "file_size": len(sent.document),
            }
        if sent.thread_id is not None:
            message["message_thread_id"] = sent.thread_id
            message["is_topic_message"] = True
        if sent.reply_markup:
            message["reply_markup"] = sent.reply_markup
        return message


async def _params(request: web.Request) -> JSON:
    if request.content_type == "application/json":
        body = await request.json()
        return dict(body) if isinstance(body, dict) else {}
    form = await request.post()
    params: JSON = {}
    for key, value in form.items():
        if isinstance(value, web.FileField):
            params[key] = Upload(value.filename, value.file.read())
            continue
        text = str(value)
        if key in _TEXT_PARAMS:
            params[key] = text
            continue
        try:
            params[key] = json.loads(text)
        except ValueError:
            params[key] = text
    return params


def _error(status: int, description: str, retry_after: float | None = None) -> web.Response:
    body: JSON = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return web.json_response(body, status=status)


def _member(user_id: int, status: str) -> JSON:
    user = {"id": user_id, "is_bot": False, "first_name": f"U{user_id}"}
    if status == "administrator":
        rights = (
            "can_be_edited",
            "is_anonymous",
            "can_manage_chat",
            "can_delete_messages",
            "can_manage_video_chats",
            "can_restrict_members",
            "can_promote_members",
            "can_change_info",
            "can_invite_users",
            "can_post_stories",
            "can_edit_stories",
            "can_delete_stories",
        )
        return {"status": status, "user": user, **dict.fromkeys(rights, False)}
    if status == "creator":
        return {"status": status, "user": user, "is_anonymous": False}
    return {"status": status, "user": user}


def _entities(text: str) -> list[JSON]:
    """bot_command at the start and every @mention (ASCII test texts, so
    UTF-16 offsets equal str offsets)."""
    entities: list[JSON] = []
    for index, word in _words(text):
        if index == 0 and word.startswith("/"):
            entities.append({"type": "bot_command", "offset": 0, "length": len(word)})
        elif word.startswith("@") and len(word) > 1:
            entities.append({"type": "mention", "offset": index, "length": len(word)})
    return entities


def _words(text: str) -> list[tuple[int, str]]:
    words, index = [], 0
    for part in text.split(" "):
        stripped = part.rstrip(",.!?:;")
        if stripped:
            words.append((index, stripped))
        index += len(part) + 1
    return words


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def entity_problem(text: str, entities: list[JSON]) -> str | None:
    """What Telegram would refuse in these entities (offsets and lengths in
    UTF-16 code units), or None."""
    size = utf16_len(text)
    spans: list[tuple[int, int, str]] = []
    for entity in entities:
        offset, length, kind = entity.get("offset"), entity.get("length"), entity.get("type")
        if not isinstance(offset, int) or not isinstance(length, int) or not kind:
            return f"entity {entity} lacks type, offset or length"
        if offset < 0 or length <= 0 or offset + length > size:
            return (
                f"entity beginning at UTF-16 offset {offset} with length {length} "
                f"does not fit a text of {size}"
            )
        spans.append((offset, offset + length, kind))
    for a_start, a_end, a_kind in spans:
        for b_start, b_end, b_kind in spans:
            if (a_start, a_end, a_kind) == (b_start, b_end, b_kind):
                continue
            if a_start < b_start < a_end < b_end:
                return f"entities {a_kind} and {b_kind} cross"
            if a_kind in ("code", "pre") and a_start <= b_start and b_end <= a_end:
                return f"a {b_kind} entity inside {a_kind}"
    return None
