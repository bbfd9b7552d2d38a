"""The model client: one OpenAI-compatible endpoint, a model per role, reasoning stripped.

A thin layer over `openai.AsyncOpenAI` that owns the policies the SDK would
otherwise decide for us: which errors are worth retrying (and how long to wait,
on our Clock so tests never really sleep), what a broken response looks like,
and that a model's private reasoning never reaches a user.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import os
import random
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Literal, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

import openai
from openai.types.chat import ChatCompletion

from core.clock import Clock, SystemClock
from core.config.model import LlmConfig
from core.errors import KeptError
from core.logs import event
from core.messages import storable
from core.metrics import recorder

log = logging.getLogger(__name__)

Role = Literal["chat", "extraction", "heartbeat"]
ErrorKind = Literal[
    "timeout",
    "connection",
    "rate_limit",
    "server",
    "auth",
    "not_found",
    "no_api_path",
    "bad_request",
    "malformed",
]

# Local servers (Ollama, llama.cpp, vLLM) usually ignore auth, but the SDK
# refuses to build a client without some key.
PLACEHOLDER_API_KEY = "kept-no-key"

_BACKOFF_BASE_SECONDS = 0.5
_BACKOFF_CAP_SECONDS = 8.0
_JITTER = 0.2  # +-20%: enough to de-synchronise workers that failed together
# A server may ask for long waits; beyond this the user is better served by an error.
_RETRY_AFTER_CAP_SECONDS = 20.0
_ERROR_TEXT_LIMIT = 300
# An API root names its version: /v1, /v1beta/openai, /api/v2.
_VERSION_SEGMENT = re.compile(r"v\d+\w*")

_STATUS_KINDS: dict[int, ErrorKind] = {
    401: "auth",
    403: "auth",
    404: "not_found",  # usually an unknown model name (see _no_api_path)
    408: "timeout",
    429: "rate_limit",
}

_T = TypeVar("_T")

# The output cap's parameter: `max_tokens` is what most OpenAI-compatible
# servers read; OpenAI's reasoning models refuse it and want the newer name.
CapParam = Literal["max_tokens", "max_completion_tokens"]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text from the model, validated by the tool layer

    def __post_init__(self) -> None:
        # The model's words, made storable where they come in (core.messages):
        # a tool's arguments reach the transcript and the tools' own rows.
        object.__setattr__(self, "arguments", storable(self.arguments))


@dataclass(frozen=True)
class Usage:
    """Tokens the endpoint says a call used (not every server says)."""

    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class Completion:
    text: str  # reasoning stripped; "" when the model only called tools
    tool_calls: list[ToolCall]
    finish_reason: str | None
    model: str
    usage: Usage | None = None

    def __post_init__(self) -> None:
        # A chat reply, a check-in, a reminder's words: what is sent is what
        # is stored (core.messages.storable).
        object.__setattr__(self, "text", storable(self.text))

    @property
    def truncated(self) -> bool:
        """The model stopped at the output cap (llm.maxOutputTokens), mid-answer."""
        return self.finish_reason == "length"


class Model(Protocol):
    """What every caller needs from a model: one completion for a role.

    `LLMClient` is the real one; tests and benchmarks bring scripted ones.
    The conversation's turn passes tools; extraction and the heartbeat call
    without any.
    """

    async def complete(
        self,
        role: Role,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
    ) -> Completion: ...


class LLMError(KeptError):
    def __init__(
        self,
        message: str,
        *,
        kind: ErrorKind,
        status: int | None = None,
        retry_after: float | None = None,
        refused_cap_param: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status
        self.retry_after = retry_after  # seconds the server asked us to wait, if it did
        # A 400 saying the model wants `max_completion_tokens` instead of `max_tokens`.
        self.refused_cap_param = refused_cap_param
        # Timeouts are not retried: the request may still be running (and billed)
        # upstream, and the user has already waited a full timeout.
        self.retryable = kind in ("rate_limit", "server", "connection")

    def __repr__(self) -> str:
        return f"LLMError(kind={self.kind!r}, status={self.status!r}, message={str(self)!r})"


# --- reasoning ---------------------------------------------------------------

_REASONING_TAGS = r"think|thinking|thought|reasoning|reflection"
_CLOSED_BLOCK = re.compile(
    rf"<\s*({_REASONING_TAGS})\b[^>]*>.*?<\s*/\s*\1\s*>", re.IGNORECASE | re.DOTALL
)
# Some templates put the opening tag in the prompt, so the reply starts inside
# the reasoning and only the closing tag shows: drop everything up to it.
_STRAY_CLOSE = re.compile(rf"\A.*<\s*/\s*(?:{_REASONING_TAGS})\s*>", re.IGNORECASE | re.DOTALL)
# An opening tag never closed means the reply was cut off mid-reasoning.
_UNCLOSED_OPEN = re.compile(rf"<\s*(?:{_REASONING_TAGS})\b[^>]*>.*\Z", re.IGNORECASE | re.DOTALL)
_BLANK_RUN = re.compile(r"\n{3,}")


def strip_reasoning(text: str) -> str:
    """The reply without reasoning blocks, trimmed. May be "" if it was all reasoning."""
    text = _CLOSED_BLOCK.sub("", text)
    text = _STRAY_CLOSE.sub("", text)
    text = _UNCLOSED_OPEN.sub("", text)
    return _BLANK_RUN.sub("\n\n", text).strip()


# --- the client --------------------------------------------------------------


class LLMClient:
    def __init__(
        self,
        config: LlmConfig,
        *,
        environ: Mapping[str, str] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._config = config
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self._clock: Clock = clock or SystemClock()
        self._sdk: openai.AsyncOpenAI | None = None
        self._secrets: set[str] = set()  # every key used so far, scrubbed from error text
        # Clients replaced by a reload stay open until their in-flight calls end.
        self._retired: list[openai.AsyncOpenAI] = []
        self._leases: dict[int, int] = {}
        # (endpoint, model) -> the cap parameter it was seen to want. Learnt
        # from a refusal, so a lost cache (a restart) costs one refused call.
        self._cap_params: dict[tuple[str, str], CapParam] = {}

    def update_config(self, config: LlmConfig) -> None:
        """Hot reload: the next call builds a fresh SDK client from `config`."""
        self._config = config
        if self._sdk is not None:
            self._retired.append(self._sdk)
            self._sdk = None

    async def aclose(self) -> None:
        clients = [*self._retired, *([self._sdk] if self._sdk else [])]
        self._retired.clear()
        self._sdk = None
        for sdk in clients:
            await sdk.close()

    async def complete(
        self,
        role: Role,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
    ) -> Completion:
        config = self._config  # one snapshot per call, even if a reload lands mid-retry
        model = config.model_for(role)
        cap = config.output_cap(role)
        where = (self._endpoint(config), model)
        body = _wire_body(messages, tools)

        def create(param: CapParam) -> Callable[[openai.AsyncOpenAI], Awaitable[object]]:
            params: dict[str, Any] = {
                "model": model,
                "messages": [],
                "extra_body": body,
                # A named argument, not in extra_body: one int costs the SDK's
                # walk nothing, and the bytes stay the SDK's own, keys in its order.
                param: cap,
            }
            if temperature is not None:
                params["temperature"] = temperature
            return lambda sdk: sdk.chat.completions.create(**params)

        what = f"{role} completion"
        param = self._cap_params.get(where, "max_tokens")
        try:
            try:
                response = await self._call(config, create(param), what)
            except LLMError as exc:
                if param != "max_tokens" or not exc.refused_cap_param:
                    raise
                # The same call again, once, under the name the model asked for.
                param = "max_completion_tokens"
                if self._cap_params.get(where) != param:
                    self._cap_params[where] = param
                    event(
                        log,
                        logging.INFO,
                        "llm_cap_param_switched",
                        model=model,
                        role=role,
                        endpoint=_redact_url(where[0]),
                        parameter=param,
                        instead_of="max_tokens",
                        reason=str(exc),
                    )
                response = await self._call(config, create(param), what)
            completion = _parse_completion(response, model)
        except LLMError as exc:
            recorder().model_call(role, exc.kind)
            raise
        recorder().model_call(role)
        return completion

    async def ping(self) -> str:
        """One line for `kept doctor`; raises LLMError when the endpoint is unusable."""
        config = self._config
        where = _redact_url(self._endpoint(config))
        wanted = sorted({config.model_for(r) for r in ("chat", "extraction", "heartbeat")})
        listed: set[str] = set()
        reason = ""  # why the model list is unusable, if it is
        try:
            listed = await self.list_models()
        except LLMError as err:
            if err.kind in ("auth", "timeout", "connection"):
                raise  # a completion would fail the same way, only slower
            reason = err.kind
        except (AttributeError, TypeError):  # a body that is not a model list
            reason = "malformed"
        if reason:
            # Several OpenAI-compatible servers have no /models; a completion still proves it works.
            event(log, logging.INFO, "llm_model_list_failed", reason=reason, next="a completion")
            done = await self.complete("chat", [{"role": "user", "content": "Reply with OK."}])
            return f"{where}: reachable, model {done.model!r} answered (model list {reason})"
        missing = [m for m in wanted if m not in listed]
        note = f"not listed: {', '.join(missing)}" if missing else "all configured models listed"
        return f"{where}: reachable, {len(listed)} models, {note}"

    async def list_models(self) -> set[str]:
        """The ids the endpoint's /models lists; LLMError when it cannot be
        listed, AttributeError or TypeError for a body that is not a list."""
        page = await self._call(self._config, lambda sdk: sdk.models.list(), "model list")
        return {str(m.id) for m in page.data}

    # --- internals -----------------------------------------------------------

    def _endpoint(self, config: LlmConfig) -> str:
        """The base URL calls go to ("" for the SDK's default, the OpenAI API)."""
        return config.base_url or self._environ.get("OPENAI_BASE_URL") or ""

    def _build(self, config: LlmConfig) -> openai.AsyncOpenAI:
        key = (self._environ.get(config.api_key_env) or "").strip()
        if not key:
            event(
                log,
                logging.INFO,
                "llm_no_api_key",
                variable=config.api_key_env,
                note="sending a placeholder key (fine for a local endpoint)",
                action=f"set ${config.api_key_env} if the endpoint needs a key",
            )
        if key:
            self._secrets.add(key)
        return openai.AsyncOpenAI(
            api_key=key or PLACEHOLDER_API_KEY,
            # None lets the SDK apply its default (which reads $OPENAI_BASE_URL
            # from the process environment); an injected environ takes precedence.
            base_url=config.base_url or self._environ.get("OPENAI_BASE_URL") or None,
            timeout=config.timeout_seconds,
            max_retries=0,  # retries are ours: the SDK would also retry timeouts
        )

    async def _call(
        self,
        config: LlmConfig,
        request: Callable[[openai.AsyncOpenAI], Awaitable[_T]],
        what: str,
    ) -> _T:
        attempt = 0
        while True:
            try:
                return await self._attempt(config, request)
            except LLMError as err:
                if not err.retryable or attempt >= config.max_retries:
                    raise
                wait = self._backoff(attempt, err.retry_after)
                retry = f"retry {attempt + 1}/{config.max_retries}"
                event(
                    log,
                    logging.WARNING,
                    "llm_retry",
                    call=what,
                    kind=err.kind,
                    status=err.status,
                    retry=retry,
                    retry_in_s=round(wait, 2),
                )
                await self._clock.sleep(wait)
                attempt += 1

    async def _attempt(
        self, config: LlmConfig, request: Callable[[openai.AsyncOpenAI], Awaitable[_T]]
    ) -> _T:
        if self._sdk is None:
            # Built from the live config, not this call's snapshot, so a reload
            # that lands mid-retry is not undone for every later call.
            self._sdk = self._build(self._config)
        sdk = self._sdk
        self._leases[id(sdk)] = self._leases.get(id(sdk), 0) + 1
        try:
            await self._close_idle_retired()  # after leasing, so never our own client
            # httpx's timeout applies per read, so a server trickling bytes could
            # hold a call far longer; this bounds the whole request.
            async with asyncio.timeout(config.timeout_seconds * 2 + 1):
                return await request(sdk)
        except TimeoutError as exc:
            raise LLMError("request exceeded its overall deadline", kind="timeout") from exc
        except openai.OpenAIError as exc:
            raise self._translate(exc) from exc
        except ValueError as exc:  # a 200 whose JSON body did not decode
            raise _malformed(f"body was not valid JSON: {exc}") from exc
        finally:
            await self._release(sdk)

    async def _release(self, sdk: openai.AsyncOpenAI) -> None:
        left = self._leases.get(id(sdk), 1) - 1
        if left:
            self._leases[id(sdk)] = left
            return
        self._leases.pop(id(sdk), None)
        if sdk in self._retired:
            self._retired.remove(sdk)
            await sdk.close()

    async def _close_idle_retired(self) -> None:
        idle = [sdk for sdk in self._retired if not self._leases.get(id(sdk))]
        for sdk in idle:
            self._retired.remove(sdk)
            await sdk.close()

    def _translate(self, exc: openai.OpenAIError) -> LLMError:
        if isinstance(exc, openai.APITimeoutError):  # before APIConnectionError: a subclass
            return LLMError("request timed out", kind="timeout")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            detail = f"{type(cause).__name__}: {cause}" if cause else str(exc)
            return LLMError(
                self._scrub(f"could not reach the endpoint: {detail}"), kind="connection"
            )
        if isinstance(exc, openai.APIResponseValidationError):
            return LLMError(self._scrub(str(exc)), kind="malformed", status=exc.status_code)
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = str(exc)
            if isinstance(exc.body, str) and exc.body:  # e.g. a proxy's HTML error page
                detail = f"{detail}: {exc.body}"
            kind = _STATUS_KINDS.get(status) or ("server" if status >= 500 else "bad_request")
            retry_after = _retry_after(exc.response.headers, self._clock) if status == 429 else None
            if status == 404 and (hint := self._no_api_path()) is not None:
                return LLMError(self._scrub(f"{hint} ({detail})"), kind="no_api_path", status=404)
            return LLMError(
                self._scrub(detail),
                kind=kind,
                status=status,
                retry_after=retry_after,
                refused_cap_param=status == 400 and _refuses_max_tokens(exc),
            )
        return LLMError(self._scrub(str(exc)), kind="bad_request")

    def _no_api_path(self) -> str | None:
        """For a 404 from a base URL with no version segment: the likelier
        cause is the path (`http://host:11434` for `.../v1`), not the model."""
        base = self._config.base_url or self._environ.get("OPENAI_BASE_URL")
        if not base:
            return None
        path = urlsplit(base).path
        if any(_VERSION_SEGMENT.fullmatch(part) for part in path.split("/")):
            return None
        shown = _redact_url(base).rstrip("/")
        return (
            f"{shown} answered 404 (no such path): llm.baseUrl is the API root, "
            f"usually ending in /v1; try {shown}/v1"
        )

    def _scrub(self, text: str) -> str:
        """Error text for logs: bounded, one line, and never the API key."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        text = " ".join(text.split())
        return text if len(text) <= _ERROR_TEXT_LIMIT else text[: _ERROR_TEXT_LIMIT - 1] + "…"

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), _RETRY_AFTER_CAP_SECONDS)
        base = min(_BACKOFF_BASE_SECONDS * 2**attempt, _BACKOFF_CAP_SECONDS)
        return base * random.uniform(1 - _JITTER, 1 + _JITTER)


def _wire_body(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """The messages (and tools) as sent, past the SDK's request transform.

    `create` walks every message and tool against its TypedDict annotations
    to rename aliased keys and encode files; kept's messages are plain JSON
    dicts already in wire shape, so the walk changes nothing and its cost
    would grow with every history row. `extra_body` is merged over the body
    as it is, so the bytes on the wire are the same."""
    body: dict[str, Any] = {"messages": messages}
    if tools:
        body["tools"] = tools
    return body


def _refuses_max_tokens(exc: openai.APIStatusError) -> bool:
    """OpenAI's reasoning models answer `max_tokens` with a 400: "Unsupported
    parameter: 'max_tokens' is not supported with this model. Use
    'max_completion_tokens' instead." (param "max_tokens", code
    "unsupported_parameter"). Proxies and Azure pass the sentence on under
    other codes, so the sentence counts too. A cap the model finds too large
    also names param "max_tokens", but not the other name: that one is the
    operator's to fix, not ours to retry."""
    if exc.param == "max_tokens" and exc.code == "unsupported_parameter":
        return True
    # The SDK's message carries a JSON body's message; a text body stays in `body`.
    text = f"{exc.message} {exc.body if isinstance(exc.body, str) else ''}"
    return "max_completion_tokens" in text and "max_tokens" in text.replace(
        "max_completion_tokens", ""
    )


def _retry_after(headers: Mapping[str, str], clock: Clock) -> float | None:
    """Seconds from `retry-after-ms` / `retry-after` (number or HTTP date), if usable."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                continue
            if when.tzinfo is None:  # "-0000" dates parse naive; they mean UTC
                when = when.replace(tzinfo=UTC)
            seconds = (when - clock.now()).total_seconds()
        if math.isfinite(seconds):
            return max(seconds, 0.0)
    return None


def _redact_url(url: str) -> str:
    """The endpoint for display, without any user:password@ part or query."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=netloc, query="", fragment="")) or "the OpenAI API"


def _malformed(why: str) -> LLMError:
    return LLMError(f"malformed response: {why}", kind="malformed")


def _get(obj: Any, name: str) -> Any:
    # Lenient parsing leaves unknown shapes as dicts or partial models.
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _parse_completion(response: object, requested_model: str) -> Completion:
    # The SDK does not validate strictly (strict mode rejects harmless quirks of
    # local servers), so a wrong-shaped body arrives here half-built or as text.
    if not isinstance(response, ChatCompletion):
        raise _malformed(f"expected a chat completion, got {type(response).__name__}")
    choices = _get(response, "choices")
    if not isinstance(choices, list) or not choices:
        raise _malformed("completion has no choices")
    message = _get(choices[0], "message")
    if message is None:
        raise _malformed("completion choice has no message")

    content = _get(message, "content")
    if isinstance(content, list):  # some servers send typed parts even here
        content = "".join(str(_get(p, "text") or "") for p in content)
    if content is not None and not isinstance(content, str):
        raise _malformed(f"message content is a {type(content).__name__}")
    # reasoning_content / reasoning fields are deliberately never read.

    raw_calls = _get(message, "tool_calls") or []
    if not isinstance(raw_calls, list):
        raise _malformed(f"tool_calls is a {type(raw_calls).__name__}")
    calls: list[ToolCall] = []
    for index, raw in enumerate(raw_calls):
        kind = _get(raw, "type") or "function"
        function = _get(raw, "function")
        if kind != "function" or function is None:
            continue
        name = _get(function, "name")
        if not isinstance(name, str) or not name:
            raise _malformed("tool call without a function name")
        arguments = _get(function, "arguments")
        if not isinstance(arguments, str):  # some servers send an object, or nothing
            arguments = json.dumps(arguments if arguments is not None else {})
        # Without an id the tool result could not be tied back to its call.
        call_id = _get(raw, "id") or f"call_{index}"
        calls.append(ToolCall(id=str(call_id), name=name, arguments=arguments))

    finish = _get(choices[0], "finish_reason")
    model = _get(response, "model")
    return Completion(
        text=strip_reasoning(content or ""),
        tool_calls=calls,
        finish_reason=str(finish) if finish is not None else None,
        model=model if isinstance(model, str) and model else requested_model,
        usage=_usage(_get(response, "usage")),
    )


def _usage(raw: object) -> Usage | None:
    prompt, completion = _get(raw, "prompt_tokens"), _get(raw, "completion_tokens")
    if isinstance(prompt, int) and isinstance(completion, int) and prompt >= 0 <= completion:
        return Usage(prompt, completion)
    return None
