"""`kept chat`'s REPL through its plain (non-terminal) line reader, on real
core services over a temporary SQLite store and a scripted model: commands
answered by the command layer, Ctrl-C cancelling an answer in flight, Ctrl-C
twice and Ctrl-D leaving."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.services import Services, build_services
from channels.console import ConsoleAdapter
from channels.console.lines import PlainLineReader
from channels.context import ChannelContext
from channels.router import AdapterRouter
from core.clock import TestClock
from core.commands import wording
from core.commands.times import local_time
from core.commitments.model import Commitment, NewCommitment, Scope
from core.config.model import KeptConfig
from core.conversation.manager import WITHDRAWN
from core.llm import Completion, LLMError, ToolCall
from core.messages import Outbound, Target, followup_actions
from core.reminders import parse_schedule
from core.store.backends import sqlite_backend
from core.store.sqlite import SqliteStore
from tests.support.scripted_model import ScriptedModel, calls, text
from tests.support.store_faults import DiskFull
from tests.support.store_helpers import mark_sent, open_store

KEY = "agent:main:console:private:ann"
TARGET = Target("console", "ann")


class Pipe:
    """stdin as a real pipe the test writes lines into; closing it is Ctrl-D."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.reader = os.fdopen(read_fd, "r", encoding="utf-8")
        self._writer = os.fdopen(write_fd, "w", encoding="utf-8")

    def send(self, line: str) -> None:
        self._writer.write(line + "\n")
        self._writer.flush()

    def close(self) -> None:
        if not self._writer.closed:
            self._writer.close()


@dataclass
class Chat:
    console: ConsoleAdapter
    stdin: Pipe
    out: io.StringIO
    err: io.StringIO
    model: ScriptedModel
    services: Services
    store: SqliteStore
    clock: TestClock
    run: asyncio.Task[None] | None = None
    gates: list[asyncio.Event] = field(default_factory=list)

    def start(self) -> None:
        self.run = asyncio.create_task(self.console.run())

    async def until(self, check: Callable[[], bool], what: str) -> None:
        for _ in range(400):
            if check():
                return
            assert self.run is None or not self.run.done() or check(), self.run.result()
            await asyncio.sleep(0.005)
        raise AssertionError(f"timed out waiting for {what}; out={self.out.getvalue()!r}")

    async def finished(self) -> None:
        assert self.run is not None
        await asyncio.wait_for(self.run, 2)

    def gate(self) -> tuple[asyncio.Event, asyncio.Event]:
        """Queue a model answer that starts (first event) and then waits for
        the second event before answering."""
        started, release = asyncio.Event(), asyncio.Event()

        async def held(messages: list[dict[str, Any]], tools: Any) -> Completion:
            started.set()
            await release.wait()
            return text("the held answer")

        self.model.steps.append(held)
        return started, release

    async def transcript(self) -> list[tuple[str, str, str]]:
        rows = await self.store.history(KEY, before_turn_of=2**62, limit=1000)
        return [(r.role, r.kind, r.text) for r in rows]

    async def seed(self, text: str = "How did the interview go?") -> Commitment:
        now = self.clock.now()
        await self.store.ensure_session(
            KEY, agent_id="main", platform="console", chat_id="ann", chat_kind="private",
            thread_id=None, now=now,
        )  # fmt: skip
        scope = Scope("main", KEY, "console", "ann", None, "ann", chat_kind="private")
        new = NewCommitment(
            scope=scope, kind="event_check_in", sensitivity="routine",
            source="inferred_user_context", reason="an interview", suggested_text=text,
            dedupe_key=f"k-{text}", confidence=0.9, due_earliest=now,
            due_latest=now + timedelta(hours=36), due_timezone="UTC",
            source_message_id=None, created_at=now,
        )  # fmt: skip
        applied = await self.services.backend.commitments.apply_extraction(
            scope, [new], [], now=now
        )
        return applied.created[0]


@pytest.fixture
async def chat(tmp_path: Path) -> AsyncIterator[Chat]:
    store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
    await store.open()
    clock = TestClock()
    model = ScriptedModel()
    router = AdapterRouter()
    config = KeptConfig.model_validate({"agents": [{"id": "main", "timezone": "Europe/Paris"}]})
    services = build_services(
        backend=sqlite_backend(store),
        llm=model,  # type: ignore[arg-type]
        sender=router,
        config=lambda: config,
        clock=clock,
        platforms=lambda: router.platforms,
    )
    context = ChannelContext(
        conversation=services.manager,
        store=store,
        commitments=services.commitments,
        reminders=services.reminders,
        config=lambda: config,
        clock=clock,
        environ={},
        users=services.users,
        start_over=services.start_over,
        followup_prefs=services.followup_prefs,
    )
    stdin, out, err = Pipe(), io.StringIO(), io.StringIO()
    console = ConsoleAdapter(
        agent_id="main",
        context=context,
        withdraw=services.manager.withdraw,
        clock=clock,
        reader=PlainLineReader(stdin.reader),
        stdout=out,
        stderr=err,
        user="ann",
    )
    router.add(console)
    harness = Chat(console, stdin, out, err, model, services, store, clock)
    try:
        yield harness
    finally:
        stdin.close()  # the reading thread sees EOF and ends
        if harness.run is not None and not harness.run.done():
            harness.run.cancel()
            await asyncio.gather(harness.run, return_exceptions=True)
        await services.manager.drain()
        await store.close()
        stdin.reader.close()


async def test_commands_are_answered_by_the_command_layer_not_the_model(chat: Chat) -> None:
    first = await chat.seed("How did the interview go?")
    second = await chat.seed("Did the move go well?")
    schedule = parse_schedule(
        at=None, after="2h", cron=None, timezone="Europe/Paris", now=chat.clock.now()
    )
    reminder = await chat.services.reminders.schedule(
        agent_id="main", session_key=KEY, target=TARGET, created_by="ann",
        text="take the pills", schedule=schedule,
    )  # fmt: skip
    chat.start()
    chat.stdin.send("/commitments")
    await chat.until(lambda: "Did the move go well?" in chat.out.getvalue(), "the listing")
    listing = chat.out.getvalue()
    assert first.id in listing and second.id in listing
    assert "How did the interview go?" in listing
    assert "Mon 30 Nov 10:00 (Europe/Paris)" in listing  # due 09:00 UTC, the agent's zone

    chat.stdin.send(f"/snooze {first.id} 2h")
    chat.stdin.send(f"/dismiss {second.id}")
    chat.stdin.send("/snooze nope")
    chat.stdin.send("/reminders")
    chat.stdin.send(f"/cancel {reminder.id}")
    chat.stdin.close()
    await chat.finished()

    out = chat.out.getvalue()
    assert f"Snoozed {first.id} until Mon 30 Nov 12:00 (Europe/Paris)." in out
    assert f"Dismissed {second.id}: I won't follow up on it." in out
    assert "Usage: /snooze ID 2h" in out
    assert reminder.id in out and "take the pills" in out
    assert f"Cancelled {reminder.id}." in out
    stored = await chat.services.backend.commitments.get(second.id)
    assert stored is not None and stored.status == "dismissed"
    assert chat.model.requests == []  # commands never reach the model
    assert await chat.transcript() == []


async def test_help_lists_the_local_commands(chat: Chat) -> None:
    chat.start()
    chat.stdin.send("/help")
    chat.stdin.close()
    await chat.finished()
    out = chat.out.getvalue()
    names = ("/commitments", "/dismiss", "/snooze", "/reminders", "/timezone", "/followups")
    for name in (*names, "/quit"):
        assert name in out
    assert chat.model.requests == []


async def test_unknown_command_gets_a_one_line_hint(chat: Chat) -> None:
    chat.start()
    chat.stdin.send("/frobnicate now")
    chat.stdin.close()
    await chat.finished()
    assert chat.out.getvalue() == "Unknown command /frobnicate. /help lists what I understand.\n"
    assert chat.model.requests == []
    assert await chat.transcript() == []


async def test_timezone_sets_the_users_zone_and_lists_read_in_it(chat: Chat) -> None:
    await chat.seed()
    chat.start()
    chat.stdin.send("/timezone Asia/Tokyo")
    chat.stdin.send("/commitments")
    chat.stdin.close()
    await chat.finished()
    out = chat.out.getvalue()
    assert "Asia/Tokyo" in out
    zones = chat.services.users
    assert await zones.own("console", "ann") == "Asia/Tokyo"
    due = local_time(chat.clock.now(), "Asia/Tokyo")  # the follow-up is due now
    assert due in out
    assert chat.model.requests == []  # commands never reach the model


async def test_a_proposed_zone_is_asked_as_y_or_n_and_only_yes_sets_it(chat: Chat) -> None:
    def propose(zone: str) -> None:
        call = ToolCall(
            id=f"t-{zone}", name="set_timezone", arguments=json.dumps({"timezone": zone})
        )
        chat.model.steps += [calls(call), text(f"Shall I use {zone} for you?")]

    propose("Asia/Tokyo")
    chat.start()
    chat.stdin.send("I live in Tokyo now")
    # Asked beside the reply (on a pipe, kept's own words go to stderr).
    await chat.until(lambda: "y / n" in chat.err.getvalue(), "the question")
    assert "Use Asia/Tokyo as your time zone? y / n" in chat.err.getvalue()
    assert await chat.services.users.own("console", "ann") is None  # nothing yet
    chat.stdin.send("n")
    await chat.until(lambda: "left your time zone" in chat.out.getvalue(), "the no")
    assert await chat.services.users.own("console", "ann") is None

    propose("Europe/Lisbon")
    chat.stdin.send("actually Lisbon")
    await chat.until(lambda: "Europe/Lisbon as your" in chat.err.getvalue(), "the question")
    chat.stdin.send("yes")
    chat.stdin.close()
    await chat.finished()
    assert await chat.services.users.own("console", "ann") == "Europe/Lisbon"
    # y and n were answers, never messages: the model saw the two sentences only.
    said = [r for r in await chat.transcript() if r[0] == "user"]
    assert said == [("user", "text", "I live in Tokyo now"), ("user", "text", "actually Lisbon")]


async def test_any_other_line_lets_the_question_lapse(chat: Chat) -> None:
    call = ToolCall(id="t1", name="set_timezone", arguments=json.dumps({"timezone": "Asia/Tokyo"}))
    chat.model.steps += [calls(call), text("Tokyo?")]
    chat.start()
    chat.stdin.send("I moved to Tokyo")
    await chat.until(lambda: "y / n" in chat.err.getvalue(), "the question")
    chat.stdin.send("what's the weather")
    chat.stdin.send("y")  # no question open any more: a message like any other
    chat.stdin.close()
    await chat.finished()
    assert await chat.services.users.own("console", "ann") is None
    assert "echo: y" in chat.out.getvalue()


async def test_ctrl_c_cancels_the_answer_in_flight_and_keeps_the_message(chat: Chat) -> None:
    started, _release = chat.gate()
    chat.start()
    chat.stdin.send("what should I pack?")
    await asyncio.wait_for(started.wait(), 2)  # the model holds the answer

    chat.console.interrupt()  # Ctrl-C
    await chat.until(lambda: "answer cancelled" in chat.err.getvalue(), "the cancel note")
    assert chat.out.getvalue() == ""  # no half answer shown
    rows = await chat.transcript()
    assert ("user", "text", "what should I pack?") in rows
    assert [r for r in rows if r[0] == "assistant" and r[1] == "text"] == []

    # The next message is answered on its own: the cancelled one is never
    # answered after all (its withdrawal is in the database).
    chat.stdin.send("never mind")
    await chat.until(lambda: "echo: never mind" in chat.out.getvalue(), "the next answer")
    assert chat.out.getvalue() == "echo: never mind\n"
    assert len(chat.model.requests) == 2
    assert (
        await chat.services.manager.recover_unanswered(platforms={"console"}) == 0
    )  # nor by recovery at the next start
    assert await chat.transcript() == [
        ("user", "text", "what should I pack?"),
        ("assistant", "error", WITHDRAWN),
        ("user", "text", "never mind"),
        ("assistant", "text", "echo: never mind"),
    ]
    chat.stdin.close()
    await chat.finished()


async def test_a_real_sigint_cancels_the_answer_not_the_process(chat: Chat) -> None:
    before = signal.getsignal(signal.SIGINT)
    started, _release = chat.gate()
    chat.start()
    chat.stdin.send("a long question")
    await asyncio.wait_for(started.wait(), 2)
    os.kill(os.getpid(), signal.SIGINT)
    await chat.until(lambda: "answer cancelled" in chat.err.getvalue(), "the cancel note")
    assert chat.run is not None and not chat.run.done()
    chat.stdin.close()
    await chat.finished()
    # The adapter gave SIGINT back to its previous handler.
    assert signal.getsignal(signal.SIGINT) == before


async def test_a_second_ctrl_c_leaves(chat: Chat) -> None:
    started, _release = chat.gate()
    chat.start()
    chat.stdin.send("question")
    await asyncio.wait_for(started.wait(), 2)
    chat.console.interrupt()  # cancels the answer
    await chat.until(lambda: "answer cancelled" in chat.err.getvalue(), "the cancel note")
    chat.console.interrupt()  # Ctrl-C again: leave, with stdin still open
    await chat.finished()
    assert chat.run is not None and chat.run.exception() is None
    # It left at once: the held answer was never shown, the question kept.
    assert "the held answer" not in chat.out.getvalue()
    assert (await chat.transcript())[0] == ("user", "text", "question")


async def test_ctrl_c_twice_at_the_prompt_leaves_and_a_line_between_resets(chat: Chat) -> None:
    chat.start()
    await asyncio.sleep(0.02)
    chat.console.interrupt()
    await chat.until(lambda: "Ctrl-C again" in chat.err.getvalue(), "the hint")
    chat.stdin.send("hello")  # a line between: the count starts again
    await chat.until(lambda: "echo: hello" in chat.out.getvalue(), "the answer")
    await asyncio.sleep(0.02)
    chat.console.interrupt()
    await asyncio.sleep(0.05)
    assert chat.run is not None and not chat.run.done()
    chat.console.interrupt()
    await chat.finished()


async def test_ctrl_d_leaves_after_answering_everything(chat: Chat) -> None:
    chat.start()
    chat.stdin.send("one")
    chat.stdin.send("//usr is a folder")  # `//` says a line starting with `/`
    chat.stdin.send("/quit")
    chat.stdin.send("never read")
    await chat.finished()
    assert chat.out.getvalue() == "echo: one\necho: /usr is a folder\n"
    assert [r[2] for r in await chat.transcript() if r[0] == "user"] == ["one", "/usr is a folder"]


async def test_eof_ends_the_repl(chat: Chat) -> None:
    chat.start()
    chat.stdin.send("hello")
    await chat.until(lambda: "echo: hello" in chat.out.getvalue(), "the answer")
    assert chat.run is not None and not chat.run.done()  # the REPL was reading
    chat.stdin.close()  # Ctrl-D on a pipe
    await chat.finished()
    assert chat.run.exception() is None


async def test_a_check_in_shows_the_commands_that_act_on_it(chat: Chat) -> None:
    actions = followup_actions(["cm_0123456789ab"])
    await chat.console.send(Outbound(TARGET, "How did it go?", actions=actions))
    out = chat.out.getvalue()
    assert out.startswith("How did it go?\n")
    assert "/dismiss cm_0123456789ab" in chat.err.getvalue()


async def test_what_a_delivered_check_in_offers_works_once_it_was_sent(chat: Chat) -> None:
    """The check-in says "/dismiss cm_… to drop it, /snooze ID 1d to
    postpone it"; by then the heartbeat has marked its follow-ups `sent`,
    and the typed commands act on them as Telegram's buttons do."""
    first = await chat.seed("How did the interview go?")
    second = await chat.seed("Did the move go well?")
    for c in (first, second):
        await mark_sent(chat.services.backend.heartbeat, c.id, now=chat.clock.now(), message_id="1")
    await chat.console.send(
        Outbound(TARGET, "How did it go?", actions=followup_actions([first.id, second.id]))
    )
    offered = chat.err.getvalue()
    assert f"/dismiss {first.id} {second.id} to drop it" in offered
    assert "/snooze ID 1d to postpone it" in offered
    chat.start()
    chat.stdin.send(f"/dismiss {first.id}")
    chat.stdin.send(f"/snooze {second.id} 2")
    chat.stdin.send(f"/snooze {second.id} 1d")
    chat.stdin.close()
    await chat.finished()
    out = chat.out.getvalue()
    assert f"Dismissed {first.id}: I won't follow up on it." in out
    assert "'2' has no unit: say 2h, 30m or 3d." in out
    assert f"Snoozed {second.id} until Tue 01 Dec 10:00 (Europe/Paris)." in out
    assert "already sent" not in out
    commitments = chat.services.backend.commitments
    dismissed, snoozed = await commitments.get(first.id), await commitments.get(second.id)
    assert dismissed is not None and dismissed.status == "dismissed"
    assert snoozed is not None and snoozed.status == "snoozed"
    assert snoozed.due_earliest == chat.clock.now() + timedelta(days=1)


async def test_a_message_that_cannot_be_stored_gets_one_line_and_the_repl_goes_on(
    chat: Chat,
) -> None:
    full = DiskFull(chat.store)
    chat.start()
    chat.stdin.send("hello")
    await chat.until(lambda: "could not store" in chat.err.getvalue(), "the error line")
    assert chat.err.getvalue().count("\n") == 1 and "Traceback" not in chat.err.getvalue()
    assert chat.model.requests == []  # nothing unstored reaches the model
    full.active = False
    chat.stdin.send("hello again")
    await chat.until(lambda: "echo: hello again" in chat.out.getvalue(), "the answer")
    chat.stdin.close()
    await chat.finished()


async def test_the_console_knows_whether_its_last_message_was_answered(chat: Chat) -> None:
    """`kept chat` exits 1 on it (tests/e2e/test_cli_chat.py)."""
    chat.model.steps.append(LLMError("fake outage", kind="server", status=500))
    chat.start()
    chat.stdin.send("hello")
    await chat.until(lambda: "Sorry" in chat.out.getvalue(), "the apology")
    assert chat.console.last_turn_failed
    chat.stdin.send("/help")  # a command is not a message to answer
    await chat.until(lambda: "/dismiss" in chat.out.getvalue(), "the help")
    assert chat.console.last_turn_failed
    chat.stdin.send("hello again")
    chat.stdin.close()
    await chat.finished()
    assert "echo: hello again" in chat.out.getvalue()
    assert not chat.console.last_turn_failed


async def test_new_starts_the_conversation_over(chat: Chat) -> None:
    chat.start()
    chat.stdin.send("my code word is zebra")
    chat.stdin.send("remember it?")
    await chat.until(lambda: "echo: remember it?" in chat.out.getvalue(), "the second answer")
    _, before, _ = chat.model.requests[-1]
    assert "my code word is zebra" in [m["content"] for m in before]  # positive control
    chat.stdin.send("/new")
    chat.stdin.send("what was it?")
    chat.stdin.close()
    await chat.finished()

    assert wording.STARTED_OVER in " ".join(chat.out.getvalue().split())
    _, after, _ = chat.model.requests[-1]
    assert [m["content"] for m in after[1:]] == ["what was it?"]
    assert len(chat.model.requests) == 3  # /new itself is no turn


async def test_followups_shows_and_switches_the_users_own(chat: Chat) -> None:
    pending = await chat.seed("How did the interview go?")
    chat.start()
    chat.stdin.send("/followups")
    chat.stdin.send("/followups off")
    chat.stdin.send("/followups sometimes")
    chat.stdin.close()
    await chat.finished()
    out = " ".join(chat.out.getvalue().split())  # however the terminal wrapped it
    assert "Your follow-ups are on" in out
    assert "Your follow-ups are now off, in every chat with me" in out
    assert "I dismissed 1 pending follow-up." in out
    assert "Usage: /followups [on|off]" in out
    state = await chat.services.followup_prefs.state("main", "console", "ann")
    assert state.own is False
    stored = await chat.services.backend.commitments.get(pending.id)
    assert stored is not None and stored.status == "dismissed"
    assert chat.model.requests == []
