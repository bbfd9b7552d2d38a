"""`kept chat` at a terminal: prompt_toolkit's reader (fed through its pipe
input, keys as a terminal sends them), its history file, and replies
rendered as Markdown with rich."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from channels.console import ConsoleAdapter
from channels.console.lines import PromptLineReader, history_path, open_history
from core.clock import TestClock
from core.messages import Inbound, Outbound, Target

CTRL_C, CTRL_D, ENTER = "\x03", "\x04", "\r"


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe:
        yield pipe


def terminal_chat(
    keys: PipeInput, history: Path, seen: list[str], out: io.StringIO
) -> ConsoleAdapter:
    async def handler(inbound: Inbound, *, on_stored: object = None, **_: object) -> None:
        seen.append(inbound.text)

    reader = PromptLineReader(open_history(history), input=keys, output=DummyOutput())
    return ConsoleAdapter(
        agent_id="main",
        handler=handler,
        clock=TestClock(),
        reader=reader,
        stdout=out,
        stderr=out,
        force_terminal=True,
        user="ann",
    )


async def test_lines_are_read_and_kept_in_the_history_file(keys: PipeInput, tmp_path: Path) -> None:
    seen: list[str] = []
    history = tmp_path / "state" / "kept" / "chat-history"
    console = terminal_chat(keys, history, seen, io.StringIO())
    run = asyncio.create_task(console.run())
    keys.send_text("first line" + ENTER)
    keys.send_text("second" + ENTER)
    keys.send_text(CTRL_D)
    await asyncio.wait_for(run, 2)
    assert seen == ["first line", "second"]
    assert "first line" in history.read_text() and "second" in history.read_text()
    assert history.stat().st_mode & 0o077 == 0  # the owner's alone


async def test_ctrl_c_at_the_prompt_hints_then_a_second_one_leaves(
    keys: PipeInput, tmp_path: Path
) -> None:
    seen: list[str] = []
    out = io.StringIO()
    console = terminal_chat(keys, tmp_path / "history", seen, out)
    run = asyncio.create_task(console.run())
    keys.send_text("half a li" + CTRL_C)
    for _ in range(200):
        if "Ctrl-C again" in out.getvalue():
            break
        await asyncio.sleep(0.005)
    assert "Ctrl-C again or Ctrl-D to leave" in out.getvalue()
    assert not run.done()
    keys.send_text(CTRL_C)
    await asyncio.wait_for(run, 2)
    assert seen == []  # the abandoned line was never sent


def test_the_history_lives_in_the_users_state_dir_not_the_repository() -> None:
    assert history_path({"XDG_STATE_HOME": "/x/state"}) == Path("/x/state/kept/chat-history")
    assert history_path({}) == Path.home() / ".local" / "state" / "kept" / "chat-history"


async def test_replies_are_rendered_as_markdown_at_a_terminal(
    keys: PipeInput, tmp_path: Path
) -> None:
    out = io.StringIO()
    console = terminal_chat(keys, tmp_path / "history", [], out)
    reply = (
        "Here is **the plan**:\n\n"
        "- pack the *charger*\n"
        "- book a taxi\n\n"
        "```python\nprint('hi')\n```\n"
    )
    await console.send(Outbound(Target("console", "ann"), reply))
    shown = out.getvalue()
    assert "\x1b[1m" in shown  # bold, as ANSI
    assert "**" not in shown and "```" not in shown
    assert "the plan" in shown
    assert "•" in shown and "pack the" in shown  # a list
    plain = re.sub(r"\x1b\[[0-9;]*m", "", shown)
    assert "print('hi')" in plain  # the code block, its fences gone


async def test_a_pipe_gets_the_reply_text_as_stored() -> None:
    out = io.StringIO()

    async def handler(inbound: Inbound, *, on_stored: object = None, **_: object) -> None: ...

    console = ConsoleAdapter(
        agent_id="main",
        handler=handler,
        clock=TestClock(),
        stdin=io.StringIO(""),
        stdout=out,
        user="ann",
    )
    await console.send(Outbound(Target("console", "ann"), "Here is **the plan**"))
    assert out.getvalue() == "Here is **the plan**\n"
