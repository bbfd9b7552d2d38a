"""In-process fakes of the external services kept talks to, bound to loopback only."""

from tests.fakes.openai_server import (
    Behaviour,
    FakeOpenAI,
    RecordedRequest,
    Responder,
    delay,
    error,
    garbage,
    hang,
    json_body,
    last_user_text,
    messages_of,
    offered_tools,
    reply,
    tool_call,
    tool_calls,
    tool_results,
)

__all__ = [
    "Behaviour",
    "FakeOpenAI",
    "RecordedRequest",
    "Responder",
    "delay",
    "error",
    "garbage",
    "hang",
    "json_body",
    "last_user_text",
    "messages_of",
    "offered_tools",
    "reply",
    "tool_call",
    "tool_calls",
    "tool_results",
]
