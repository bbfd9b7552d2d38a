"""LLMClient against a fake OpenAI-compatible server on loopback, through the real SDK."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from core import metrics as core_metrics
from core.clock import TestClock
from core.config.model import LlmConfig, ModelsConfig, OutputCapsConfig
from core.llm import (
    PLACEHOLDER_API_KEY,
    Completion,
    LLMClient,
    LLMError,
    ToolCall,
    Usage,
    strip_reasoning,
)
from tests.fakes.openai_server import (
    MAX_TOKENS_REFUSED,
    FakeOpenAI,
    delay,
    error,
    garbage,
    hang,
    json_body,
    offered_tools,
    refuse_max_tokens,
    reply,
    tool_call,
    tool_calls,
    tool_results,
)

HELLO = [{"role": "user", "content": "hello"}]
CLOCK_TOOL = {"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}


def completion_body(message: dict[str, Any] | None) -> dict[str, Any]:
    """A hand-built response, for shapes the fake's helpers would never produce."""
    choice = {"index": 0, "finish_reason": "stop", **({"message": message} if message else {})}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}


class RecordingClock:
    """A clock whose sleeps return at once, remembering how long they asked for."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        return datetime(2026, 11, 30, 9, 0, tzinfo=UTC)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await asyncio.sleep(0)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
def sleeps() -> RecordingClock:
    return RecordingClock()


MakeClient = Callable[..., LLMClient]


@pytest.fixture
async def make_client(fake: FakeOpenAI, sleeps: RecordingClock) -> AsyncIterator[MakeClient]:
    clients: list[LLMClient] = []

    def make(
        *, environ: dict[str, str] | None = None, clock: Any = None, **settings: Any
    ) -> LLMClient:
        settings.setdefault("base_url", fake.base_url)
        env = {} if environ is None else environ
        client = LLMClient(LlmConfig(**settings), environ=env, clock=clock or sleeps)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


async def test_plain_reply(fake: FakeOpenAI, make_client: MakeClient) -> None:
    result = await make_client().complete("chat", HELLO)
    request = fake.last
    # The fake counts a quarter token per byte of the request; the usage is the server's.
    usage = Usage(prompt_tokens=len(request.body_text) // 4, completion_tokens=11)
    assert result == Completion(
        text="echo: hello",
        tool_calls=[],
        finish_reason="stop",
        model="gpt-4.1-mini",
        usage=usage,
    )
    assert request.messages == HELLO
    # unset options are left to the server rather than sent as null
    assert "tools" not in request.json and "temperature" not in request.json


async def test_temperature_and_tools_are_sent(fake: FakeOpenAI, make_client: MakeClient) -> None:
    await make_client().complete("chat", HELLO, tools=[CLOCK_TOOL], temperature=0.2)
    assert fake.last.json["temperature"] == 0.2
    assert fake.last.tool_names == ["clock"]


@pytest.mark.parametrize(
    ("models", "expected"),
    [
        (ModelsConfig(chat="c"), {"chat": "c", "extraction": "c", "heartbeat": "c"}),
        (
            ModelsConfig(chat="c", extraction="x", heartbeat="h"),
            {"chat": "c", "extraction": "x", "heartbeat": "h"},
        ),
    ],
)
async def test_model_per_role(
    fake: FakeOpenAI, make_client: MakeClient, models: ModelsConfig, expected: dict[str, str]
) -> None:
    client = make_client(models=models)
    for role, model in expected.items():
        result = await client.complete(role, HELLO)  # type: ignore[arg-type]
        assert fake.last.model == model
        assert result.model == model


async def test_rate_limit_retried_after_retry_after_on_the_clock(
    fake: FakeOpenAI, make_client: MakeClient
) -> None:
    clock = TestClock()
    client = make_client(clock=clock, max_retries=2)
    fake.push(error(429, headers={"retry-after": "3"}), reply("made it"))
    started = time.monotonic()
    task = asyncio.create_task(client.complete("chat", HELLO))
    for _ in range(200):  # the backoff sleep starts once the 429 has arrived
        if clock.sleepers:
            break
        await asyncio.sleep(0.005)
    assert len(fake.completions) == 1  # waiting on the clock, not yet retried
    await clock.advance(3)
    result = await asyncio.wait_for(task, 1)
    assert result.text == "made it"
    assert len(fake.completions) == 2
    assert time.monotonic() - started < 1


async def test_backoff_without_retry_after_grows_and_uses_clock(
    fake: FakeOpenAI, make_client: MakeClient, sleeps: RecordingClock
) -> None:
    fake.push(error(503), error(502), reply("ok"))
    started = time.monotonic()
    result = await make_client(max_retries=2).complete("chat", HELLO)
    assert result.text == "ok"
    assert len(sleeps.sleeps) == 2
    first, second = sleeps.sleeps
    assert 0.4 <= first <= 0.6 and 0.8 <= second <= 1.2  # 0.5 s doubling, +-20% jitter
    assert time.monotonic() - started < 1


async def test_retry_after_is_capped(
    fake: FakeOpenAI, make_client: MakeClient, sleeps: RecordingClock
) -> None:
    fake.push(error(429, headers={"retry-after": "3600"}), reply("ok"))
    await make_client(max_retries=1).complete("chat", HELLO)
    assert sleeps.sleeps == [20.0]


async def test_server_errors_beyond_max_retries(
    fake: FakeOpenAI, make_client: MakeClient, sleeps: RecordingClock
) -> None:
    fake.push(error(500), error(500), error(500), reply("never seen"))
    with pytest.raises(LLMError) as caught:
        await make_client(max_retries=2).complete("chat", HELLO)
    assert caught.value.kind == "server" and caught.value.status == 500
    assert caught.value.retryable
    assert len(fake.completions) == 3
    assert len(sleeps.sleeps) == 2


async def test_timeout_is_not_retried(
    fake: FakeOpenAI, make_client: MakeClient, sleeps: RecordingClock
) -> None:
    fake.push(delay(0.8, reply("too late")))
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        await make_client(timeout_seconds=0.2, max_retries=3).complete("chat", HELLO)
    assert caught.value.kind == "timeout" and not caught.value.retryable
    assert len(fake.completions) == 1
    assert sleeps.sleeps == []
    assert time.monotonic() - started < 0.7


@pytest.mark.parametrize(
    ("status", "kind"), [(401, "auth"), (403, "auth"), (404, "not_found"), (400, "bad_request")]
)
async def test_client_errors_are_not_retried(
    fake: FakeOpenAI, make_client: MakeClient, status: int, kind: str
) -> None:
    fake.push(error(status))
    with pytest.raises(LLMError) as caught:
        await make_client(max_retries=3).complete("chat", HELLO)
    assert (caught.value.kind, caught.value.status) == (kind, status)
    assert not caught.value.retryable
    assert len(fake.completions) == 1


async def test_a_base_url_without_v1_is_told_to_try_v1(
    fake: FakeOpenAI, make_client: MakeClient
) -> None:
    """The fake serves the API under /v1; its root answers 404 for every
    path, as Ollama's or vLLM's does. That is not an unknown model."""
    root = fake.base_url.removesuffix("/v1")
    with pytest.raises(LLMError) as caught:
        await make_client(base_url=root, max_retries=3).complete("chat", HELLO)
    assert (caught.value.kind, caught.value.status) == ("no_api_path", 404)
    assert str(caught.value).startswith(
        f"{root} answered 404 (no such path): llm.baseUrl is the API root, "
        f"usually ending in /v1; try {root}/v1"
    )
    assert "does not know this model" not in str(caught.value)
    assert not caught.value.retryable and len(fake.requests) == 1
    # Under /v1 a 404 still means the model.
    fake.push(error(404))
    with pytest.raises(LLMError) as unknown:
        await make_client(max_retries=0).complete("chat", HELLO)
    assert unknown.value.kind == "not_found" and "no such path" not in str(unknown.value)


async def test_connection_refused_is_retried_then_reported(
    make_client: MakeClient, sleeps: RecordingClock
) -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = make_client(base_url=f"http://127.0.0.1:{port}/v1", max_retries=2)
    with pytest.raises(LLMError) as caught:
        await client.complete("chat", HELLO)
    assert caught.value.kind == "connection" and caught.value.status is None
    assert len(sleeps.sleeps) == 2


@pytest.mark.parametrize(
    "behaviour",
    [
        garbage("<html>bad gateway</html>"),  # claims JSON, is not
        garbage("just some text", content_type="text/plain"),
        garbage('{"hello": "world"}'),
        json_body({**completion_body(None), "choices": []}),
        json_body(completion_body(None)),  # a choice without a message
    ],
)
async def test_malformed_responses(
    fake: FakeOpenAI, make_client: MakeClient, sleeps: RecordingClock, behaviour: Any
) -> None:
    fake.push(behaviour)
    with pytest.raises(LLMError) as caught:
        await make_client(max_retries=2).complete("chat", HELLO)
    assert caught.value.kind == "malformed" and not caught.value.retryable
    assert len(fake.completions) == 1 and sleeps.sleeps == []


async def test_reasoning_is_stripped_and_reasoning_fields_ignored(
    fake: FakeOpenAI, make_client: MakeClient
) -> None:
    fake.push(
        reply(
            "<think>\nthe user is nervous\n</think>\n\nYou'll do great.",
            reasoning_content="secret chain of thought",
        )
    )
    result = await make_client().complete("chat", HELLO)
    assert result.text == "You'll do great."


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("plain answer", "plain answer"),
        ("<think>plan</think>Answer", "Answer"),
        ("<THINK>\nplan\n</Think>\n\n  Answer  ", "Answer"),
        ("<thinking>a</thinking>One. <reasoning>b</reasoning>Two.", "One. Two."),
        ("<reflection>hmm</reflection>\nDone", "Done"),
        ('<think type="x">plan</think>ok', "ok"),
        ("<think>a</think>one<think>b</think>two", "onetwo"),
        ("<think>still thinking when the tokens ran out", ""),
        ("Answer first <think>then rambling", "Answer first"),
        ("reasoning without an opening tag</think>\nThe answer.", "The answer."),
        ("<think>outer <reasoning>inner</reasoning> more</think>Hi", "Hi"),
        ("a\n\n\n\n<think>x</think>\n\nb", "a\n\nb"),
        ("<think></think>", ""),
        ("", ""),
        ("2 < 3 and <b>bold</b> stay", "2 < 3 and <b>bold</b> stay"),
    ],
)
def test_strip_reasoning(raw: str, clean: str) -> None:
    assert strip_reasoning(raw) == clean


async def test_stopping_the_fake_ends_a_hung_request(make_client: MakeClient) -> None:
    async with FakeOpenAI() as other:
        other.push(hang())
        task = asyncio.create_task(make_client(base_url=other.base_url).complete("chat", HELLO))
        await other.wait_for_completions(1)
    with pytest.raises(LLMError) as caught:  # dropped, then refused on every retry
        await asyncio.wait_for(task, 1)
    assert caught.value.kind == "connection"


async def test_tool_calls_parsed(fake: FakeOpenAI, make_client: MakeClient) -> None:
    fake.push(tool_call("schedule_reminder", {"in": "2h", "text": "stretch"}, id="call_1"))
    result = await make_client().complete("chat", HELLO)
    assert result.finish_reason == "tool_calls"
    assert result.text == ""
    assert result.tool_calls == [
        ToolCall(id="call_1", name="schedule_reminder", arguments='{"in": "2h", "text": "stretch"}')
    ]
    assert json.loads(result.tool_calls[0].arguments) == {"in": "2h", "text": "stretch"}


async def test_parallel_tool_calls_and_lenient_shapes(
    fake: FakeOpenAI, make_client: MakeClient
) -> None:
    fake.push(tool_calls(("a", {}, "c1"), ("b", '{"q": 1}', "c2"), text="<think>x</think>"))
    result = await make_client().complete("chat", HELLO)
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("c1", "a", "{}"),
        ("c2", "b", '{"q": 1}'),
    ]
    assert result.text == ""
    # Some local servers omit ids and types, or send arguments as an object.
    calls = [{"function": {"name": "a", "arguments": {"k": 1}}}]
    fake.push(json_body(completion_body({"role": "assistant", "tool_calls": calls})))
    result = await make_client().complete("chat", HELLO)
    assert result.tool_calls == [ToolCall(id="call_0", name="a", arguments='{"k": 1}')]


async def test_custom_default_responder_drives_a_tool_loop(
    fake: FakeOpenAI, make_client: MakeClient
) -> None:
    async def responder(body: dict[str, Any]) -> Any:
        if offered_tools(body) and not tool_results(body):
            return tool_call("clock", {}, id="t1")
        return f"it is {tool_results(body)[0]['content']}"

    fake.default = responder
    tools = [CLOCK_TOOL]
    client = make_client()
    first = await client.complete("chat", HELLO, tools=tools)
    assert first.tool_calls[0].name == "clock"
    call = {"id": "t1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}
    messages = [
        *HELLO,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "t1", "content": "09:00"},
    ]
    second = await client.complete("chat", messages, tools=tools)
    assert second.text == "it is 09:00"


async def test_api_key_from_the_configured_env_var(
    fake: FakeOpenAI, make_client: MakeClient
) -> None:
    environ = {"KEPT_TEST_KEY": "sk-kept-123\n", "OPENAI_API_KEY": "sk-wrong"}
    await make_client(api_key_env="KEPT_TEST_KEY", environ=environ).complete("chat", HELLO)
    assert fake.last.bearer == "sk-kept-123"


async def test_placeholder_key_when_unset(fake: FakeOpenAI, make_client: MakeClient) -> None:
    await make_client(api_key_env="KEPT_MISSING_KEY").complete("chat", HELLO)
    assert fake.last.bearer == PLACEHOLDER_API_KEY


async def test_key_never_appears_in_errors_or_logs(
    fake: FakeOpenAI, make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "sk-very-secret-value"
    fake.push(error(500, {"error": {"message": f"bad key {secret}"}}), error(401, f"no {secret}"))
    client = make_client(environ={"OPENAI_API_KEY": secret}, max_retries=1)
    with pytest.raises(LLMError) as caught:
        await client.complete("chat", HELLO)
    assert caught.value.kind == "auth"
    assert secret not in str(caught.value) and secret not in caplog.text
    assert fake.last.bearer == secret


async def test_ping_lists_models(fake: FakeOpenAI, make_client: MakeClient) -> None:
    fake.model_ids = ["gpt-4.1-mini", "other"]
    line = await make_client().ping()
    assert fake.base_url in line and "2 models" in line and "all configured models" in line
    line = await make_client(models=ModelsConfig(chat="gpt-4.1-mini", heartbeat="tiny")).ping()
    assert "not listed: tiny" in line
    assert "\n" not in line


async def test_ping_falls_back_to_a_completion(fake: FakeOpenAI, make_client: MakeClient) -> None:
    fake.models_responder = error(404)
    line = await make_client().ping()
    assert "answered" in line and fake.last.model == "gpt-4.1-mini"


async def test_ping_reports_auth_failure(fake: FakeOpenAI, make_client: MakeClient) -> None:
    fake.models_responder = error(401)
    with pytest.raises(LLMError) as caught:
        await make_client().ping()
    assert caught.value.kind == "auth"
    assert fake.completions == []  # no costly fallback when the key is wrong


async def test_update_config_switches_endpoint_and_model(
    fake: FakeOpenAI, make_client: MakeClient
) -> None:
    client = make_client()
    await client.complete("chat", HELLO)
    async with FakeOpenAI() as other:
        client.update_config(LlmConfig(base_url=other.base_url, models=ModelsConfig(chat="new")))
        result = await client.complete("chat", HELLO)
        assert result.model == "new"
        assert len(other.completions) == 1 and len(fake.completions) == 1


async def test_a_server_that_reports_no_usage_gives_none(
    fake: FakeOpenAI, make_client: MakeClient
) -> None:
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    }
    fake.push(json_body(body))
    result = await make_client().complete("chat", HELLO)
    assert result.text == "hi"
    assert result.usage is None


# --- output caps ---------------------------------------------------------------

ROLE_MODELS = ModelsConfig(chat="c", extraction="x", heartbeat="h")
SWITCHED = "llm_cap_param_switched"


async def test_every_call_carries_its_roles_output_cap(
    fake: FakeOpenAI, make_client: MakeClient
) -> None:
    caps = OutputCapsConfig(chat=700, extraction=300, heartbeat=100)
    client = make_client(models=ROLE_MODELS, max_output_tokens=caps)
    for role in ("chat", "extraction", "heartbeat"):
        await client.complete(role, HELLO)
    sent = [(r.model, r.max_tokens, r.max_completion_tokens) for r in fake.completions]
    assert sent == [("c", 700, None), ("x", 300, None), ("h", 100, None)]
    # Unconfigured, the defaults (1024 / 512 / 256) are sent all the same.
    default = make_client(models=ROLE_MODELS)
    for role in ("chat", "extraction", "heartbeat"):
        await default.complete(role, HELLO, tools=[CLOCK_TOOL] if role == "chat" else None)
    assert [r.max_tokens for r in fake.completions[3:]] == [1024, 512, 256]


async def test_a_model_refusing_max_tokens_is_asked_again_with_max_completion_tokens(
    fake: FakeOpenAI, make_client: MakeClient, sleeps: RecordingClock, caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger="core.llm")
    fake.refuse_max_tokens = {"o3-mini"}
    fake.push(reply("first"), reply("second"), reply("third"))
    client = make_client(models=ModelsConfig(chat="o3-mini", extraction="gpt-4.1-mini"))

    result = await client.complete("chat", HELLO)
    assert result.text == "first" and not result.truncated
    refused, again = fake.completions
    assert (refused.max_tokens, refused.max_completion_tokens) == (1024, None)
    assert (again.max_tokens, again.max_completion_tokens) == (None, 1024)
    assert again.messages == refused.messages == HELLO  # the same call, renamed
    assert sleeps.sleeps == []  # not a transient error: no backoff
    [switched] = [r for r in caplog.records if r.getMessage().startswith(SWITCHED)]
    assert "model=o3-mini" in switched.getMessage()
    assert "parameter=max_completion_tokens" in switched.getMessage()

    # Remembered for this model: the next call goes straight to the new name...
    assert (await client.complete("chat", HELLO)).text == "second"
    assert (fake.last.max_tokens, fake.last.max_completion_tokens) == (None, 1024)
    # ...and only for it: another model keeps max_tokens.
    assert (await client.complete("extraction", HELLO)).text == "third"
    assert (fake.last.model, fake.last.max_tokens) == ("gpt-4.1-mini", 512)
    assert len(fake.completions) == 4
    assert caplog.text.count(SWITCHED) == 1


class CallCounter(core_metrics.NoMetrics):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def model_call(self, role: str, error: str | None = None) -> None:
        self.calls.append((role, error))


async def test_a_switched_call_counts_as_one_call(
    fake: FakeOpenAI, make_client: MakeClient
) -> None:
    counter = CallCounter()
    core_metrics.install(counter)
    try:
        fake.refuse_max_tokens = {"gpt-4.1-mini"}
        await make_client().complete("chat", HELLO)
        assert len(fake.completions) == 2
        assert counter.calls == [("chat", None)]  # the refusal is not a failed call
        fake.refuse_max_tokens.clear()
        fake.push(refuse_max_tokens(), refuse_max_tokens())  # refuses both names
        with pytest.raises(LLMError):
            await make_client().complete("chat", HELLO)
        assert len(fake.completions) == 4 and not fake.responders
        assert counter.calls == [("chat", None), ("chat", "bad_request")]
    finally:
        core_metrics.uninstall(counter)


async def test_the_switch_is_tried_once_per_call(fake: FakeOpenAI, make_client: MakeClient) -> None:
    # A server that refuses both names: the second refusal is the caller's error.
    fake.push(refuse_max_tokens(), refuse_max_tokens())
    with pytest.raises(LLMError) as caught:
        await make_client().complete("chat", HELLO)
    assert (caught.value.kind, caught.value.status) == ("bad_request", 400)
    assert [r.max_completion_tokens for r in fake.completions] == [None, 1024]


async def test_the_memory_is_per_endpoint(fake: FakeOpenAI, make_client: MakeClient) -> None:
    fake.refuse_max_tokens = {"gpt-4.1-mini"}
    client = make_client()
    await client.complete("chat", HELLO)
    assert fake.last.max_completion_tokens == 1024
    async with FakeOpenAI() as other:  # a local server serving a model of the same name
        client.update_config(LlmConfig(base_url=other.base_url))
        await client.complete("chat", HELLO)
        [request] = other.completions
        assert (request.max_tokens, request.max_completion_tokens) == (1024, None)


PROXY_REFUSAL = {
    "error": {
        "message": MAX_TOKENS_REFUSED["error"]["message"],
        "code": "invalid_request_body",
    }
}
TOO_LARGE = {
    "error": {
        "message": "max_tokens is too large: 100000. This model supports at most 16384 "
        "completion tokens, whereas you provided 100000.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "invalid_value",
    }
}


@pytest.mark.parametrize(
    ("refusal", "switches"),
    [
        (error(400, MAX_TOKENS_REFUSED), True),
        (error(400, PROXY_REFUSAL), True),  # the sentence passed on by a proxy
        (error(400, "Error: " + MAX_TOKENS_REFUSED["error"]["message"]), True),  # as text
        (error(400, TOO_LARGE), False),  # names max_tokens, but it is the value
        (error(400), False),
        (error(422, MAX_TOKENS_REFUSED), False),  # not a 400
    ],
)
async def test_which_refusals_switch(
    fake: FakeOpenAI, make_client: MakeClient, refusal: Any, switches: bool
) -> None:
    fake.push(refusal, reply("ok"))
    client = make_client()
    if switches:
        assert (await client.complete("chat", HELLO)).text == "ok"
        assert [r.max_completion_tokens for r in fake.completions] == [None, 1024]
    else:
        with pytest.raises(LLMError):
            await client.complete("chat", HELLO)
        assert len(fake.completions) == 1


async def test_ping_carries_the_chat_cap(fake: FakeOpenAI, make_client: MakeClient) -> None:
    fake.models_responder = error(404)
    caps = OutputCapsConfig(chat=64)
    line = await make_client(max_output_tokens=caps).ping()
    assert "answered" in line and fake.last.max_tokens == 64
    # A reasoning model answers the ping too, under the name it wants.
    fake.refuse_max_tokens = {"o1"}
    line = await make_client(models=ModelsConfig(chat="o1"), max_output_tokens=caps).ping()
    assert "model 'o1' answered" in line
    assert [(r.max_tokens, r.max_completion_tokens) for r in fake.completions[1:]] == [
        (64, None),
        (None, 64),
    ]


async def test_an_answer_cut_at_the_cap_is_marked_truncated(
    fake: FakeOpenAI, make_client: MakeClient
) -> None:
    fake.push(reply("The long story is", finish_reason="length", usage=(40, 16)), reply("done"))
    client = make_client(max_output_tokens=OutputCapsConfig(chat=16))
    cut = await client.complete("chat", HELLO)
    assert (cut.text, cut.finish_reason, cut.truncated) == ("The long story is", "length", True)
    assert cut.usage == Usage(prompt_tokens=40, completion_tokens=16)
    whole = await client.complete("chat", HELLO)
    assert (whole.finish_reason, whole.truncated) == ("stop", False)
