from __future__ import annotations

import io
from collections.abc import Callable

from channels.console import ConsoleAdapter
from channels.router import AdapterRouter
from channels.split import split_plain
from core.clock import TestClock
from core.messages import Inbound, Outbound, Target
from tests.support.adapters import RecordingAdapter


class FakeAdapter(RecordingAdapter):
    platform = "fake"
    max_message_length = 50


def test_split_prefers_paragraphs_then_sentences():
    para = "First paragraph here.\n\nSecond one is a bit longer. It has two sentences, see?"
    assert split_plain(para, 50) == [
        "First paragraph here.",
        "Second one is a bit longer.",
        "It has two sentences, see?",
    ]


def test_split_never_exceeds_limit_and_loses_no_words():
    text = " ".join(f"word{i}" for i in range(2000))
    chunks = split_plain(text, 2000)
    assert all(len(c) <= 2000 for c in chunks)
    assert " ".join(chunks).split() == text.split()
    unbroken = "x" * 4500
    assert [len(c) for c in split_plain(unbroken, 2000)] == [2000, 2000, 500]


def test_split_empty_and_short():
    assert split_plain("   ", 10) == []
    assert split_plain("hi", 10) == ["hi"]


async def test_allow_list_by_id_or_username():
    # A channel without settings of its own (the console): an empty list
    # lets everyone in, a list only those it names.
    open_adapter = FakeAdapter()
    assert await open_adapter.admission("private", "1") == "yes"
    closed = FakeAdapter(allow_from=["42", "@Alice"])
    assert await closed.admission("private", "42") == "yes"
    assert await closed.admission("private", "7", "alice") == "yes"
    assert await closed.admission("private", "7", "bob") == "no"
    assert await closed.admission("private", "7") == "no"


async def test_send_chunks_and_returns_first_id():
    adapter = FakeAdapter()
    result = await adapter.send(Outbound(Target("fake", "1"), "a" * 120))
    assert result.ok and result.message_id == "1"
    assert [len(c) for c in adapter.texts] == [50, 50, 20]


async def test_failure_after_first_chunk_is_not_retryable():
    adapter = FakeAdapter(fail_at=2)
    result = await adapter.send(Outbound(Target("fake", "1"), "a" * 120))
    assert not result.ok and not result.retryable and result.unknown
    first_fails = await FakeAdapter(fail_at=1).send(Outbound(Target("fake", "1"), "hi"))
    assert not first_fails.ok and first_fails.retryable


async def test_router_sends_by_platform_only():
    router = AdapterRouter()
    adapter = FakeAdapter()
    router.add(adapter)
    assert (await router.send(Outbound(Target("fake", "1"), "hi"))).ok
    missing = await router.send(Outbound(Target("telegram", "1"), "hi"))
    assert not missing.ok and "no running adapter" in (missing.error or "")


async def test_console_reads_lines_until_quit():
    seen: list[Inbound] = []

    async def handler(
        inbound: Inbound, *, on_stored: Callable[[], object] | None = None, **_: object
    ) -> None:
        seen.append(inbound)

    out = io.StringIO()
    console = ConsoleAdapter(
        agent_id="main",
        handler=handler,
        clock=TestClock(),
        stdin=io.StringIO("hello\n\n  second  \n/quit\nnever\n"),
        stdout=out,
        user="ann",
    )
    await console.start()
    await console.run()
    assert [i.text for i in seen] == ["hello", "second"]
    assert seen[0].session_key == "agent:main:console:private:ann"
    await console.send(Outbound(console.target, "reply"))
    assert out.getvalue() == "reply\n"


def test_a_channel_that_cannot_start_raises_a_kept_error() -> None:
    from channels.base import ChannelStartError
    from core.errors import KeptError

    assert issubclass(ChannelStartError, KeptError)
