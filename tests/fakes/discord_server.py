"""A fake Discord (REST + gateway WebSocket) on 127.0.0.1 for end-to-end tests.

The real discord.py client talks to it through `channels.discord.apiBaseUrl`:
REST calls go to `/api/v10/...`, and `GET /gateway/bot` names the gateway
WebSocket served here. The gateway says HELLO, answers heartbeats, answers
IDENTIFY with READY and a GUILD_CREATE per server, turns a RESUME into an
invalid session (so every reconnect is a fresh READY), and dispatches what
tests push: MESSAGE_CREATE (`say`), INTERACTION_CREATE (`interact`).

Every message said is kept as channel history (`GET .../messages` honours
`after`, `before` and `limit`, newest first like Discord), also when no bot
is connected: that is what the bot missed while it was down. Tests read
every recorded call, script failures (status codes, 429 with `retry_after`)
and hold a response on an asyncio.Event (`Script(hold=...)`).

Message content follows the intents of the last IDENTIFY, as Discord's
does: without the Message Content intent (bit 15) a server message that
neither mentions the bot nor is the bot's own arrives with empty content,
embeds and attachments, on the gateway and in history. A reply mentions
the author it answers unless `ping=False` (the ping switched off).

A message or an interaction answer with files comes as Discord takes it:
multipart, `payload_json` plus a part per file (`files[n]`); the files are
recorded with the call (`Attachment`: its name and bytes) in `Sent.files`
and `callback_files`.

`PUT .../commands` (the bulk overwrite `tree.sync()` makes) is the route
"commands"; `commands_synced` keeps the last payload per scope.

Frames are plain-text JSON even though discord.py asks for zlib-stream: it
decompresses only binary frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

JSON = dict[str, Any]
TOKEN = "fake-discord-token"
DISCORD_EPOCH_MS = 1420070400000
MESSAGE_CONTENT = 1 << 15  # the privileged intent's bit
_API = "/api/v10/"
MAX_CONTENT = 2000  # characters in a message's content
MAX_UPLOAD = 10 * 1024 * 1024  # bytes of files a bot may attach to a message

# (method, path under /api/v10/, route name) -- the name is what tests script.
_ROUTES = [
    ("GET", r"gateway/bot", "gateway_bot"),
    ("GET", r"users/@me", "me"),
    ("POST", r"users/@me/channels", "open_dm"),
    ("GET", r"(?:oauth2/)?applications/@me", "application"),
    ("GET", r"channels/(\d+)", "channel"),
    ("GET", r"channels/(\d+)/messages", "history"),
    ("POST", r"channels/(\d+)/messages", "send"),
    ("PATCH", r"channels/(\d+)/messages/(\d+)", "edit"),
    ("POST", r"channels/(\d+)/typing", "typing"),
    ("PUT", r"applications/(\d+)/commands", "commands"),
    ("PUT", r"applications/(\d+)/guilds/(\d+)/commands", "commands"),
    ("POST", r"interactions/(\d+)/([^/]+)/callback", "callback"),
    ("POST", r"webhooks/(\d+)/([^/]+)", "followup"),
    ("PATCH", r"webhooks/(\d+)/([^/]+)/messages/([^/]+)", "followup"),
]
_UNAUTHENTICATED = {"callback", "followup"}


@dataclass
class Call:
    method: str
    route: str
    path: str
    query: dict[str, str]
    body: JSON
    at: float = field(default_factory=time.monotonic)


@dataclass
class Script:
    """How the next call of a route goes.

    `hold`: the answer waits until the event is set; with `apply`, the call
    takes effect first (a message is posted) and only the answer waits, or
    is the error `status` (Discord posted it, then its edge timed out)."""

    status: int = 200
    message: str = ""
    code: int = 0
    retry_after: float | None = None
    hold: asyncio.Event | None = None
    apply: bool = False


@dataclass(frozen=True)
class Attachment:
    """A file part of a multipart request (`files[n]`)."""

    field: str
    filename: str
    data: bytes


@dataclass
class Sent:
    channel_id: int
    message_id: int
    content: str
    reference: int | None = None
    components: list[JSON] = field(default_factory=list)
    allowed_mentions: JSON | None = None
    files: list[Attachment] = field(default_factory=list)


class FakeDiscord:
    def __init__(self, *, token: str = TOKEN, now: Callable[[], datetime] | None = None) -> None:
        self.token = token
        self._now = now or (lambda: datetime.now(UTC))
        self._last_id = 0
        self.calls: list[Call] = []
        self.sent: list[Sent] = []
        self.callbacks: list[tuple[int, JSON]] = []
        # The files of each callback or follow-up, in the order of `callbacks`.
        self.callback_files: list[list[Attachment]] = []
        self.identifies: list[JSON] = []
        # The last bulk overwrite per scope: "global" or the guild id.
        self.commands_synced: dict[str, list[JSON]] = {}
        self.ops: list[int] = []  # gateway opcodes received, in order
        self.connections = 0
        self._scripts: dict[str, deque[Script]] = {}
        self._history: dict[int, list[JSON]] = {}
        self._channels: dict[int, JSON] = {}
        self._ws: web.WebSocketResponse | None = None
        self._seq = 0
        self._tokens = itertools.count(1)
        self._runner: web.AppRunner | None = None
        # The files of the request being answered.
        self._files: list[Attachment] = []
        self.root = ""
        self.bot = self.user("kept", bot=True)
        self.ana = self.user("ana")
        self.ben = self.user("ben")
        self.guild_id = self.snowflake()
        self.general = self._channel({"type": 0, "name": "general", "guild_id": self.guild_id})
        self.random = self._channel({"type": 0, "name": "random", "guild_id": self.guild_id})

    # --- lifecycle ------------------------------------------------------------

    async def start(self) -> FakeDiscord:
        app = web.Application(client_max_size=MAX_UPLOAD + 1024 * 1024)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", _API + "{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.root = f"http://127.0.0.1:{port}"
        return self

    async def close(self) -> None:
        await self.drop()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeDiscord:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def connected(self) -> bool:
        return self._ws is not None and not self._ws.closed

    async def drop(self, code: int = 4000) -> None:
        """Close the gateway connection as Discord does before a reconnect."""
        ws, self._ws = self._ws, None
        if ws is not None and not ws.closed:
            await ws.close(code=code)

    # --- scripting and reading ----------------------------------------------------

    def script(self, route: str, *steps: Script) -> None:
        self._scripts.setdefault(route, deque()).extend(steps)

    def hold(self, route: str, *, apply: bool = False) -> asyncio.Event:
        """Hold the next answer of `route` until the returned event is set."""
        gate = asyncio.Event()
        self.script(route, Script(hold=gate, apply=apply))
        return gate

    @property
    def content_intent(self) -> bool:
        """Whether the last IDENTIFY asked for the Message Content intent."""
        return bool(
            self.identifies and int(self.identifies[-1].get("intents", 0)) & MESSAGE_CONTENT
        )

    def calls_to(self, route: str) -> list[Call]:
        return [c for c in self.calls if c.route == route]

    def texts(self, channel_id: int | None = None) -> list[str]:
        return [s.content for s in self.sent if channel_id is None or s.channel_id == channel_id]

    async def wait_for(self, check: Callable[[], Any], within: float = 5.0) -> Any:
        deadline = time.monotonic() + within
        while not (result := check()):
            if time.monotonic() > deadline:
                routes = [c.route for c in self.calls]
                raise AssertionError(f"timed out waiting; calls: {routes}; sent: {self.texts()}")
            await asyncio.sleep(0.005)
        return result

    # --- the world ------------------------------------------------------------------

    def snowflake(self) -> int:
        """An id that grows with the fake's clock, as Discord's do."""
        ms = int(self._now().timestamp() * 1000) - DISCORD_EPOCH_MS
        self._last_id = max(ms << 22, self._last_id + 1)
        return self._last_id

    def user(self, name: str, *, bot: bool = False) -> JSON:
        user: JSON = {
            "id": str(self.snowflake()),
            "username": name,
            "global_name": name.title(),
            "discriminator": "0",
            "avatar": None,
        }
        if bot:
            user["bot"] = True
        return user

    def dm(self, user: JSON) -> int:
        """The DM channel between `user` and the bot."""
        for channel in self._channels.values():
            if channel["type"] == 1 and channel["recipients"][0]["id"] == user["id"]:
                return int(channel["id"])
        return self._channel({"type": 1, "recipients": [user]})

    async def thread(self, parent: int, name: str = "interview prep") -> int:
        thread = self._channel(
            {
                "type": 11,
                "name": name,
                "guild_id": self.guild_id,
                "parent_id": str(parent),
                "owner_id": self.ana["id"],
                "message_count": 0,
                "member_count": 1,
                "rate_limit_per_user": 0,
                "thread_metadata": {
                    "archived": False,
                    "auto_archive_duration": 1440,
                    "archive_timestamp": self._now().isoformat(),
                    "locked": False,
                },
            }
        )
        await self.dispatch("THREAD_CREATE", {**self._channels[thread], "newly_created": True})
        return thread

    def history(self, channel_id: int) -> list[JSON]:
        return list(self._history.get(channel_id, []))

    async def say(
        self,
        content: str,
        *,
        channel: int | None = None,
        author: JSON | None = None,
        mention: bool = False,
        reply_to: JSON | None = None,
        ping: bool = True,
        live: bool = True,
    ) -> JSON:
        """A user's message: kept in the channel's history, and dispatched as
        MESSAGE_CREATE when `live` and a bot is connected. Default: Ana's DM.
        A reply (`reply_to`) mentions the replied-to author unless `ping` is
        False, as Discord's reply button does."""
        author = author or self.ana
        channel_id = channel if channel is not None else self.dm(author)
        if mention:
            content = f"<@{self.bot['id']}> {content}"
        message = self._message(channel_id, author, content, reply_to=reply_to)
        if mention:
            message["mentions"] = [self.bot]
        if reply_to is not None and ping:
            replied = reply_to["author"]
            if all(u["id"] != replied["id"] for u in message["mentions"]):
                message["mentions"] = [*message["mentions"], replied]
        if live:
            await self.dispatch("MESSAGE_CREATE", self._gateway_message(message))
        return message

    def ephemeral(self, channel: int, content: str, components: list[JSON]) -> JSON:
        """An ephemeral answer of the bot's as a component press carries it
        (Discord keeps no history of those)."""
        message = self._message(channel, self.bot, content)
        self._history[channel].remove(message)
        return {**message, "flags": 64, "components": components}

    async def interact(
        self,
        data: JSON,
        *,
        channel: int,
        user: JSON | None = None,
        kind: int = 2,
        message: JSON | None = None,
    ) -> JSON:
        """An INTERACTION_CREATE (2: a slash command, 3: a component on
        `message`)."""
        user = user or self.ana
        payload: JSON = {
            "id": str(self.snowflake()),
            "application_id": self.bot["id"],
            "type": kind,
            "token": f"interaction-token-{next(self._tokens)}",
            "version": 1,
            "data": data,
            "channel_id": str(channel),
            "channel": self._channels[channel],
            "locale": "en-US",
            "attachment_size_limit": 8 * 1024 * 1024,
            "entitlements": [],
            "authorizing_integration_owners": {},
            "app_permissions": "0",
        }
        guild = self._channels[channel].get("guild_id")
        if guild is not None:
            payload["guild_id"] = guild
            payload["context"] = 0
            payload["member"] = {**self._member(user), "permissions": "0"}
        else:
            payload["context"] = 1
            payload["user"] = user
        if message is not None:
            payload["message"] = message
        await self.dispatch("INTERACTION_CREATE", payload)
        return payload

    async def dispatch(self, name: str, data: JSON) -> None:
        """Send one event to the connected bot (nothing when none is)."""
        if self.connected:
            self._seq += 1
            await self._send({"op": 0, "t": name, "s": self._seq, "d": data})

    # --- the gateway ----------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await self.drop()
        self._ws, self._seq = ws, 0
        self.connections += 1
        await self._send({"op": 10, "d": {"heartbeat_interval": 45000}})
        async for frame in ws:
            if frame.type != WSMsgType.TEXT:
                continue
            payload = json.loads(frame.data)
            self.ops.append(payload["op"])
            if payload["op"] == 1:
                await self._send({"op": 11})
            elif payload["op"] == 2:
                self.identifies.append(payload["d"])
                if payload["d"].get("token") != self.token:
                    await ws.close(code=4004)  # authentication failed
                    break
                await self._ready(payload["d"].get("shard"))
            elif payload["op"] == 6:
                await self._send({"op": 9, "d": False})  # sessions are not kept
        if self._ws is ws:
            self._ws = None
        return ws

    async def _ready(self, shard: list[int] | None) -> None:
        # As Discord does, READY echoes the shard the client identified with.
        ready: JSON = {"shard": shard} if shard is not None else {}
        await self.dispatch(
            "READY",
            ready
            | {
                "v": 10,
                "user": self.bot,
                "guilds": [{"id": self.guild_id, "unavailable": True}],
                "session_id": f"session-{self.connections}",
                "resume_gateway_url": f"{self.root.replace('http', 'ws', 1)}/gateway",
                "application": {"id": self.bot["id"], "flags": 0},
                "private_channels": [],
                "relationships": [],
            },
        )
        await self.dispatch("GUILD_CREATE", self._guild())

    async def _send(self, payload: JSON) -> None:
        if self._ws is not None and not self._ws.closed:
            with contextlib.suppress(ConnectionError):
                await self._ws.send_str(json.dumps(payload))

    # --- REST -----------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["tail"]
        route, args = _match(request.method, path)
        body, files = await _body(request)
        self.calls.append(Call(request.method, route, path, dict(request.query), body))
        if route == "unknown":
            return _error(404, "404: Not Found")
        if route not in _UNAUTHENTICATED and request.headers.get("Authorization") != (
            f"Bot {self.token}"
        ):
            return _error(401, "401: Unauthorized")
        steps = self._scripts.get(route)
        step = steps.popleft() if steps else Script()
        if step.hold is not None and not step.apply:
            await step.hold.wait()
        if step.status == 429:
            return _rate_limited(step.retry_after or 0.0)
        if step.status != 200:
            if step.apply:
                self._files = files  # read by the handler before it awaits anything
                await getattr(self, f"_api_{route}")(args, request.query, body)
            return _error(step.status, step.message or f"{step.status}", step.code)
        self._files = files  # read by the handler before it awaits anything
        result = await getattr(self, f"_api_{route}")(args, request.query, body)
        if step.hold is not None and step.apply:
            await step.hold.wait()
        if isinstance(result, web.Response):
            return result
        if result is None:
            return web.Response(status=204)
        return _json(result)

    async def _api_gateway_bot(self, *_: Any) -> JSON:
        return {
            "url": f"{self.root.replace('http', 'ws', 1)}/gateway",
            "shards": 1,
            "session_start_limit": {
                "total": 1000,
                "remaining": 999,
                "reset_after": 0,
                "max_concurrency": 1,
            },
        }

    async def _api_me(self, *_: Any) -> JSON:
        return self.bot

    async def _api_application(self, *_: Any) -> JSON:
        return {
            "id": self.bot["id"],
            "name": "kept",
            "description": "",
            "icon": None,
            "bot_public": False,
            "bot_require_code_grant": False,
            "owner": self.ana,
            "verify_key": "x",
            "flags": 0,
        }

    async def _api_open_dm(self, _: list[str], __: Any, body: JSON) -> JSON | web.Response:
        known = [u for u in (self.ana, self.ben) if u["id"] == str(body.get("recipient_id"))]
        if not known:
            return _error(400, "Invalid Recipient(s)", 50033)
        return self._channels[self.dm(known[0])]

    async def _api_channel(self, args: list[str], *_: Any) -> JSON | web.Response:
        channel = self._channels.get(int(args[0]))
        return channel if channel is not None else _error(404, "Unknown Channel", 10003)

    async def _api_history(self, args: list[str], query: Any, _: JSON) -> list[JSON]:
        messages = sorted(self._history.get(int(args[0]), []), key=lambda m: int(m["id"]))
        limit = int(query.get("limit", 50))
        if "after" in query:
            picked = [m for m in messages if int(m["id"]) > int(query["after"])][:limit]
        elif "before" in query:
            picked = [m for m in messages if int(m["id"]) < int(query["before"])][-limit:]
        else:
            picked = messages[-limit:]
        # newest first, as Discord answers
        return [self._visible(m) for m in reversed(picked)]

    async def _api_send(self, args: list[str], _: Any, body: JSON) -> JSON | web.Response:
        content = body.get("content") or ""
        if len(content) > MAX_CONTENT:
            too_long = "Invalid Form Body: content: Must be 2000 or fewer in length."
            return _error(400, too_long, 50035)
        if sum(len(f.data) for f in self._files) > MAX_UPLOAD:
            return _error(413, "Request entity too large", 40005)
        empty = not (body.get("components") or body.get("embeds") or self._files)
        if not content.strip() and empty:
            return _error(400, "Cannot send an empty message", 50006)
        channel_id = int(args[0])
        reference = (body.get("message_reference") or {}).get("message_id")
        message = self._message(channel_id, self.bot, body.get("content") or "")
        message["components"] = body.get("components") or []
        self.sent.append(
            Sent(
                channel_id=channel_id,
                message_id=int(message["id"]),
                content=message["content"],
                reference=int(reference) if reference is not None else None,
                components=message["components"],
                allowed_mentions=body.get("allowed_mentions"),
                files=list(self._files),
            )
        )
        # Discord echoes the bot's own message on the gateway too.
        await self.dispatch("MESSAGE_CREATE", self._gateway_message(message))
        return message

    async def _api_edit(self, args: list[str], _: Any, body: JSON) -> JSON:
        channel_id, message_id = int(args[0]), int(args[1])
        message = next(m for m in self._history[channel_id] if int(m["id"]) == message_id)
        for key in ("content", "components"):
            if key in body:
                message[key] = body[key]
        return message

    async def _api_typing(self, *_: Any) -> None:
        return None

    async def _api_commands(self, args: list[str], __: Any, body: Any) -> list[JSON]:
        commands = body if isinstance(body, list) else []
        self.commands_synced[args[1] if len(args) > 1 else "global"] = commands
        return [
            {**c, "id": str(self.snowflake()), "application_id": self.bot["id"], "version": "1"}
            for c in commands
        ]

    async def _api_callback(self, args: list[str], _: Any, body: JSON) -> JSON | web.Response:
        interaction_id = int(args[0])
        if sum(len(f.data) for f in self._files) > MAX_UPLOAD:
            return _error(413, "Request entity too large", 40005)
        self.callbacks.append((interaction_id, body))
        self.callback_files.append(list(self._files))
        flags = (body.get("data") or {}).get("flags") or 0
        return {
            "interaction": {
                "id": str(interaction_id),
                "type": body.get("type", 0),
                "response_message_loading": body.get("type") == 5,
                "response_message_ephemeral": bool(flags & 64),
            }
        }

    async def _api_followup(self, args: list[str], _: Any, body: JSON) -> JSON:
        self.callbacks.append((0, body))
        self.callback_files.append(list(self._files))
        channel = self.general
        return self._message(channel, self.bot, body.get("content") or "")

    # --- JSON shapes ----------------------------------------------------------------

    def _channel(self, data: JSON) -> int:
        channel_id = self.snowflake()
        channel = {"id": str(channel_id), **data}
        if "guild_id" in channel:
            channel["guild_id"] = str(channel["guild_id"])
            channel.setdefault("position", len(self._channels))
            channel.setdefault("permission_overwrites", [])
        self._channels[channel_id] = channel
        return channel_id

    def _message(
        self, channel_id: int, author: JSON, content: str, *, reply_to: JSON | None = None
    ) -> JSON:
        message: JSON = {
            "id": str(self.snowflake()),
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": self._now().isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
            "components": [],
        }
        if reply_to is not None:
            message["type"] = 19
            message["message_reference"] = {
                "message_id": reply_to["id"],
                "channel_id": reply_to["channel_id"],
            }
            message["referenced_message"] = reply_to
        self._history.setdefault(channel_id, []).append(message)
        return message

    def _visible(self, message: JSON) -> JSON:
        """The message as the bot may read it: without the Message Content
        intent, a server message that does not mention the bot and is not
        its own comes without what the user wrote."""
        channel = self._channels.get(int(message["channel_id"]), {})
        if (
            self.content_intent
            or "guild_id" not in channel
            or message["author"]["id"] == self.bot["id"]
            or any(u["id"] == self.bot["id"] for u in message["mentions"])
        ):
            return message
        return {**message, "content": "", "embeds": [], "attachments": [], "components": []}

    def _gateway_message(self, message: JSON) -> JSON:
        """A message as MESSAGE_CREATE carries it: with its server and member."""
        message = self._visible(message)
        guild = self._channels[int(message["channel_id"])].get("guild_id")
        if guild is None:
            return message
        mentions = [{**u, "member": self._member(u, nested=True)} for u in message["mentions"]]
        return {
            **message,
            "guild_id": guild,
            "member": self._member(message["author"], nested=True),
            "mentions": mentions,
        }

    def _member(self, user: JSON, *, nested: bool = False) -> JSON:
        member: JSON = {
            "roles": [],
            "joined_at": "2026-01-01T00:00:00+00:00",
            "deaf": False,
            "mute": False,
            "flags": 0,
        }
        return member if nested else {**member, "user": user}

    def _guild(self) -> JSON:
        guild = str(self.guild_id)
        channels = [c for c in self._channels.values() if c.get("guild_id") == guild]
        return {
            "id": guild,
            "name": "Test Server",
            "owner_id": self.ana["id"],
            "unavailable": False,
            "member_count": 3,
            "roles": [
                {
                    "id": guild,
                    "name": "@everyone",
                    "permissions": "1071698660929",
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "channels": [c for c in channels if c["type"] != 11],
            "threads": [c for c in channels if c["type"] == 11],
            "members": [self._member(self.bot)],
            "emojis": [],
            "stickers": [],
            "features": [],
            "voice_states": [],
        }


def _match(method: str, path: str) -> tuple[str, list[str]]:
    for want, pattern, name in _ROUTES:
        found = re.fullmatch(pattern, path)
        if found is not None and want == method:
            return name, list(found.groups())
    return "unknown", []


async def _body(request: web.Request) -> tuple[Any, list[Attachment]]:
    """The request's JSON, and its files when multipart."""
    if request.content_type == "application/json":
        return await request.json(), []
    if request.content_type.startswith("multipart/"):
        form = await request.post()
        files = [
            Attachment(name, value.filename, value.file.read())
            for name, value in form.items()
            if isinstance(value, web.FileField)
        ]
        return json.loads(str(form.get("payload_json") or "{}")), files
    return {}, []


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # discord.py parses a body only when the type is exactly "application/json".
    return web.Response(
        body=json.dumps(body).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def _error(status: int, message: str, code: int = 0) -> web.Response:
    return _json({"message": message, "code": code}, status)


def _rate_limited(retry_after: float) -> web.Response:
    body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": False}
    # Without Via, discord.py takes a 429 for a Cloudflare ban and gives up.
    return _json(body, 429, {"Via": "1.1 google", "X-RateLimit-Scope": "user"})
