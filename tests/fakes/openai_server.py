"""A fake OpenAI-compatible HTTP server for tests, on 127.0.0.1 and a free port.

The real openai SDK talks to it over loopback, so tests exercise the same
request building, auth headers, timeouts and response parsing as production.

    async with FakeOpenAI() as fake:
        fake.push(error(429, headers={"retry-after": "1"}), reply("hi"))
        fake.default = lambda body: tool_call("clock", {}) if offered_tools(body) else "done"
        client = LLMClient(LlmConfig(base_url=fake.base_url))
        ...
        assert fake.completions[-1].last_user_text == "hello"

Scripted behaviours (`fake.push`) are consumed one per chat completion request,
in order; when the queue is empty `fake.default` answers (echo by default).
A responder is a Behaviour, a plain string (shorthand for `reply(text)`), or a
callable taking the request's JSON body and returning either, sync or async.

Output caps: each request's `max_tokens` / `max_completion_tokens` is on its
RecordedRequest; `reply(text, finish_reason="length", usage=(10, 512))` is an
answer cut at the cap; models named in `fake.refuse_max_tokens` answer any
request carrying `max_tokens` with OpenAI's own 400 (MAX_TOKENS_REFUSED), before
the scripted queue is consulted, as OpenAI's reasoning models do.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

# --- reading request bodies -------------------------------------------------


def _text_of(content: Any) -> str | None:
    """Message content as text; the API also allows a list of typed parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return None


def messages_of(body: Any) -> list[dict[str, Any]]:
    messages = body.get("messages") if isinstance(body, dict) else None
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def last_user_text(body: Any) -> str | None:
    for message in reversed(messages_of(body)):
        if message.get("role") == "user":
            return _text_of(message.get("content"))
    return None


def offered_tools(body: Any) -> list[dict[str, Any]]:
    tools = body.get("tools") if isinstance(body, dict) else None
    return tools if isinstance(tools, list) else []


def tool_results(body: Any) -> list[dict[str, Any]]:
    """The `role: tool` messages, i.e. the results the client sent back."""
    return [m for m in messages_of(body) if m.get("role") == "tool"]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: CIMultiDictProxy[str]
    json: Any  # the parsed body; None for GET or a body that is not JSON
    body_text: str
    received_at: float  # time.monotonic()

    @property
    def model(self) -> str | None:
        return self.json.get("model") if isinstance(self.json, dict) else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return messages_of(self.json)

    @property
    def last_user_text(self) -> str | None:
        return last_user_text(self.json)

    @property
    def system_text(self) -> str | None:
        for message in self.messages:
            if message.get("role") in ("system", "developer"):
                return _text_of(message.get("content"))
        return None

    @property
    def tools(self) -> list[dict[str, Any]]:
        return offered_tools(self.json)

    @property
    def tool_names(self) -> list[str]:
        return [str(t.get("function", {}).get("name")) for t in self.tools if isinstance(t, dict)]

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        return tool_results(self.json)

    @property
    def max_tokens(self) -> Any:
        """The `max_tokens` sent; None when absent."""
        return self.json.get("max_tokens") if isinstance(self.json, dict) else None

    @property
    def max_completion_tokens(self) -> Any:
        """The `max_completion_tokens` sent; None when absent."""
        return self.json.get("max_completion_tokens") if isinstance(self.json, dict) else None

    @property
    def bearer(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None


# --- behaviours ---------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """What a behaviour gets to answer one request with."""

    fake: FakeOpenAI
    recorded: RecordedRequest
    request: web.Request


class Behaviour:
    """How the fake answers one request; subclass it for anything the helpers lack."""

    async def respond(self, call: Call) -> web.StreamResponse:
        raise NotImplementedError


_Answer: TypeAlias = Behaviour | str
Responder: TypeAlias = _Answer | Callable[[Any], _Answer | Awaitable[_Answer]]

_ids = itertools.count(1)


@dataclass(frozen=True)
class _Completion(Behaviour):
    text: str | None
    tool_calls: tuple[dict[str, Any], ...] = ()
    finish_reason: str | None = None
    reasoning_content: str | None = None
    model: str | None = None
    usage: tuple[int, int] | None = None  # (prompt, completion); None: a rough count

    async def respond(self, call: Call) -> web.StreamResponse:
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = list(self.tool_calls)
        if self.reasoning_content is not None:
            message["reasoning_content"] = self.reasoning_content
        finish = self.finish_reason or ("tool_calls" if self.tool_calls else "stop")
        # rough token counts: tests only need the shape to be right
        ins, outs = len(call.recorded.body_text) // 4, len(json.dumps(message)) // 4
        if self.usage is not None:
            ins, outs = self.usage
        body = {
            "id": f"chatcmpl-fake-{next(_ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model or call.recorded.model or "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": ins, "completion_tokens": outs, "total_tokens": ins + outs},
        }
        return web.json_response(body)


@dataclass(frozen=True)
class _Canned(Behaviour):
    status: int
    body: str
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()

    async def respond(self, call: Call) -> web.StreamResponse:
        headers = CIMultiDict(self.headers)
        return web.Response(
            status=self.status, text=self.body, content_type=self.content_type, headers=headers
        )


@dataclass(frozen=True)
class _Delay(Behaviour):
    seconds: float | None  # None: until the server stops
    then: Responder | None

    async def respond(self, call: Call) -> web.StreamResponse:
        # Waiting on the stop event rather than sleeping lets stop() end a
        # delayed or hung request at once instead of waiting it out.
        try:
            await asyncio.wait_for(call.fake._stopping.wait(), self.seconds)
        except TimeoutError:
            then = self.then if self.then is not None else call.fake.default
            return await call.fake._render(then, call)
        # Cut the connection, as a server going away would.
        if call.request.transport is not None:
            call.request.transport.close()
        return web.Response(status=503)


def reply(
    text: str | None,
    *,
    finish_reason: str | None = None,
    reasoning_content: str | None = None,
    model: str | None = None,
    usage: tuple[int, int] | None = None,
) -> Behaviour:
    """An assistant message; `model` defaults to the model the request asked for,
    `usage` (prompt, completion tokens) to a rough count from the bytes."""
    return _Completion(text, (), finish_reason, reasoning_content, model, usage)


def tool_call(
    name: str, arguments: dict[str, Any] | str, id: str | None = None, *, text: str | None = None
) -> Behaviour:
    """An assistant message calling one function tool (finish_reason "tool_calls")."""
    return tool_calls((name, arguments, id), text=text)


def tool_calls(
    *calls: tuple[str, dict[str, Any] | str, str | None], text: str | None = None
) -> Behaviour:
    """Several parallel calls, each (name, arguments, id or None)."""
    rendered = []
    for name, args, call_id in calls:
        function = {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}
        rendered.append(
            {"id": call_id or f"call_fake_{next(_ids)}", "type": "function", "function": function}
        )
    return _Completion(text, tuple(rendered))


def error(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Behaviour:
    """An HTTP error; without `body`, an OpenAI-shaped error object."""
    if body is None:
        body = {"error": {"message": f"fake error {status}", "type": "fake_error", "code": None}}
    text = body if isinstance(body, str) else json.dumps(body)
    return _Canned(status, text, headers=tuple((headers or {}).items()))


# OpenAI's answer, word for word, to `max_tokens` sent to a reasoning model (o1, o3, gpt-5).
MAX_TOKENS_REFUSED: dict[str, Any] = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}


def refuse_max_tokens() -> Behaviour:
    """OpenAI's 400 for `max_tokens` on a reasoning model (see FakeOpenAI.refuse_max_tokens)."""
    return error(400, MAX_TOKENS_REFUSED)


def json_body(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Behaviour:
    """Any JSON document, verbatim."""
    return _Canned(status, json.dumps(body), headers=tuple((headers or {}).items()))


def garbage(
    body_text: str = "<html>oops</html>", content_type: str = "application/json"
) -> Behaviour:
    """A 200 whose body is not a completion: non-JSON text, or JSON of the wrong shape."""
    return _Canned(200, body_text, content_type)


def delay(seconds: float, then: Responder | None = None) -> Behaviour:
    """Answer after `seconds` with `then` (default: the default responder)."""
    return _Delay(seconds, then)


def hang() -> Behaviour:
    """Never answer; the connection is dropped when the server stops."""
    return _Delay(None, None)


def _echo(body: Any) -> Behaviour:
    return reply(f"echo: {last_user_text(body) or ''}")


# --- the server ---------------------------------------------------------------


class FakeOpenAI:
    def __init__(self, *, model_ids: list[str] | None = None) -> None:
        self.requests: list[RecordedRequest] = []
        self.responders: deque[Responder] = deque()
        self.default: Responder = _echo
        # what GET /v1/models lists; set models_responder to script that endpoint
        self.model_ids: list[str] = model_ids if model_ids is not None else ["gpt-4.1-mini"]
        self.models_responder: Responder | None = None
        # Models that refuse `max_tokens` as OpenAI's reasoning models do.
        self.refuse_max_tokens: set[str] = set()
        self.responder_errors: list[Exception] = []  # re-raised when the fake stops
        self._stopping = asyncio.Event()
        self._arrived = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    def push(self, *responders: Responder) -> None:
        """Queue one-shot behaviours, used in order by chat completion requests."""
        self.responders.extend(responders)

    def set_default(self, responder: Responder) -> None:
        """Answer chat completions with `responder` once the queue is empty (not /models)."""
        self.default = responder

    def reset(self) -> None:
        self.requests.clear()
        self.responders.clear()
        self.default = _echo
        self.refuse_max_tokens.clear()

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("FakeOpenAI is not started")
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def completions(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def last(self) -> RecordedRequest:
        """The latest chat completion request (IndexError if there was none)."""
        return self.completions[-1]

    async def wait_for_completions(self, count: int, within: float = 1.0) -> list[RecordedRequest]:
        """Wait until at least `count` chat completion requests have arrived."""
        async with asyncio.timeout(within), self._arrived:
            await self._arrived.wait_for(lambda: len(self.completions) >= count)
        return self.completions

    async def start(self) -> None:
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        # short shutdown_timeout: stop() must never wait on a scripted hang
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    async def stop(self) -> None:
        """Stop serving; raises the first exception a scripted responder raised, if any."""
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.responder_errors:
            raise RuntimeError("a FakeOpenAI responder failed") from self.responder_errors[0]

    async def __aenter__(self) -> FakeOpenAI:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is not None:
            self.responder_errors.clear()  # the test is already failing; don't mask why
        await self.stop()

    async def _record(self, request: web.Request) -> RecordedRequest:
        raw = await request.text()
        try:
            parsed: Any = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        headers = CIMultiDictProxy(CIMultiDict(request.headers))
        recorded = RecordedRequest(
            request.method, request.path, headers, parsed, raw, time.monotonic()
        )
        async with self._arrived:
            self.requests.append(recorded)
            self._arrived.notify_all()
        return recorded

    async def _render(self, responder: Responder, call: Call) -> web.StreamResponse:
        try:
            behaviour: Any = responder
            if callable(behaviour) and not isinstance(behaviour, Behaviour):
                behaviour = behaviour(call.recorded.json)
                if inspect.isawaitable(behaviour):
                    behaviour = await behaviour
            if isinstance(behaviour, str):
                behaviour = reply(behaviour)
            if not isinstance(behaviour, Behaviour):
                raise TypeError(f"responder returned {behaviour!r}, not a Behaviour or str")
            return await behaviour.respond(call)
        except Exception as exc:
            # A bug in a test's responder would otherwise look like a flaky 500.
            self.responder_errors.append(exc)
            raise

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        call = Call(self, await self._record(request), request)
        recorded = call.recorded
        if recorded.model in self.refuse_max_tokens and recorded.max_tokens is not None:
            # Refused before any script: the queue is for the calls that get through.
            return await self._render(refuse_max_tokens(), call)
        responder = self.responders.popleft() if self.responders else self.default
        return await self._render(responder, call)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        call = Call(self, await self._record(request), request)
        if self.models_responder is not None:
            return await self._render(self.models_responder, call)
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.model_ids
        ]
        return web.json_response({"object": "list", "data": data})

    async def _unknown(self, request: web.Request) -> web.StreamResponse:
        await self._record(request)
        body = {"error": {"message": f"no route {request.path}", "type": "invalid_request_error"}}
        return web.json_response(body, status=404)
