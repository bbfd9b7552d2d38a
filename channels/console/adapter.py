"""The terminal chat: `kept chat`, one private session per local user.

It behaves like a REPL. A terminal gets line editing and history
(prompt_toolkit, lines.py) and replies rendered as Markdown (render.py); a
pipe is answered line by line, in order, with the replies' text as stored,
and the process exits at EOF. Lines starting with `/` are commands, answered
by the platform-neutral command layer (commands.py), never by the model.

Ctrl-C while kept answers cancels that answer: the turn is cancelled, the
user's message stays in the transcript and is marked withdrawn (so neither
the next turn nor a restart answers it after all), and nothing half-made is
stored as a reply. A second Ctrl-C, or Ctrl-D, leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import itertools
import logging
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from channels.base import AddressedMessage, ChannelAdapter
from channels.console.commands import (
    PLATFORM,
    QUIT_WORDS,
    ConsoleCommands,
    Parsed,
    parse,
)
from channels.console.lines import (
    LineReader,
    PlainLineReader,
    PromptLineReader,
    history_path,
    open_history,
)
from channels.console.render import ConsoleOutput
from channels.context import ChannelContext, InboundHandler
from core.clock import Clock
from core.commitments.visibility import Asker
from core.errors import MessageNotStored
from core.logs import event
from core.messages import (
    Action,
    ButtonAction,
    Inbound,
    SendResult,
    Target,
    ZoneChoice,
    session_key,
)

PROMPT = "you> "
LEAVE_HINT = "Ctrl-C again or Ctrl-D to leave"

# ConversationManager.withdraw: mark a cancelled answer's message as needing none.
Withdraw = Callable[[Inbound], Awaitable[bool]]


YES = frozenset({"y", "yes"})
NO = frozenset({"n", "no"})


class ConsoleAdapter(ChannelAdapter[str]):
    platform = PLATFORM
    max_message_length = 1_000_000

    def __init__(
        self,
        *,
        agent_id: str,
        clock: Clock,
        context: ChannelContext | None = None,
        handler: InboundHandler | None = None,
        withdraw: Withdraw | None = None,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        reader: LineReader | None = None,
        history: Path | None = None,
        markdown: bool | None = None,
        force_terminal: bool | None = None,
        user: str | None = None,
        allow_from: Iterable[str] = (),
        export_dir: Path | None = None,
    ) -> None:
        """`context` backs the commands (without it they are unavailable);
        `handler` defaults to its conversation. `reader` defaults to
        prompt_toolkit with `history` (default: history_path()) when stdin
        and stdout are a terminal, else to a plain line reader. `markdown`
        (default: interactive) renders replies."""
        if handler is None:
            if context is None:
                raise TypeError("ConsoleAdapter needs a handler or a context")
            handler = context.conversation.handle
        self._answer_with = handler
        super().__init__(
            agent_id=agent_id, allow_from=allow_from, handler=self._answered, clock=clock
        )
        stdin = stdin or sys.stdin
        stdout = stdout or sys.stdout
        self._reader = reader or _default_reader(stdin, stdout, history)
        interactive = self._reader.interactive
        self._out = ConsoleOutput(
            stdout,
            stderr or sys.stderr,
            markdown=interactive if markdown is None else markdown,
            interactive=interactive,
            force_terminal=force_terminal,
        )
        self._prompt_to = (
            stdout if interactive and isinstance(self._reader, PlainLineReader) else None
        )
        self.user = user or _local_user()
        self._ids = itertools.count(1)
        self._withdraw = withdraw
        self._commands = (
            ConsoleCommands(context, self._asker, export_dir=export_dir)
            if context is not None
            else None
        )
        self._turn: asyncio.Task[None] | None = None
        # The turn's reply is on screen: Ctrl-C no longer cancels it.
        self._replied = False
        self._held_interrupt = False
        # A zone the chat model proposed (set_timezone), asked as y / n: the
        # next line answers it, or, being anything else, lets it lapse.
        self._question: ZoneChoice | None = None
        # Whether the latest message went unanswered (the model failed and
        # an apology was sent, the turn failed, or it could not be stored):
        # `kept chat` fed by a pipe exits non-zero then.
        self.last_turn_failed = False
        self._model_answered = False

    async def _answered(
        self,
        inbound: Inbound,
        *,
        on_stored: Callable[[], object] | None = None,
        **turn: Any,
    ) -> object:
        """The conversation's answer, noting whether it was an apology; the
        rest of the turn's hooks (`during_model`) go on to the manager."""
        reply = await self._answer_with(inbound, on_stored=on_stored, **turn)
        self._model_answered = getattr(reply, "kind", None) != "error"
        return reply

    @property
    def target(self) -> Target:
        return Target(platform=PLATFORM, chat_id=self.user)

    def _asker(self) -> Asker:
        """The local user in their private session with the current agent."""
        key = session_key(self.agent_id, self.target, "private")
        return Asker(self.agent_id, key, "private", self.user)

    @property
    def interactive(self) -> bool:
        return self._reader.interactive

    async def start(self) -> None:
        if self.interactive:
            await self._out.note(
                f"kept: talking to agent '{self.agent_id}'. /help lists the commands; "
                "Ctrl-C stops an answer; /quit or Ctrl-D leaves."
            )

    async def stop(self) -> None:
        self._out.flush()

    async def run(self) -> None:
        """Read lines until EOF, /quit or a second Ctrl-C, answering each
        before the next. Ctrl-C arriving as a signal (a terminal outside the
        prompt, or `kept chat` fed by a pipe) goes to `interrupt`."""
        with self._sigint_to_interrupt():
            await self._repl()

    def interrupt(self) -> None:
        """Ctrl-C: cancel the answer in flight, else end the waiting read as
        if Ctrl-C was pressed at the prompt. Between the two (a reply already
        shown, a command running) it counts at the next prompt."""
        turn = self._turn
        if turn is not None and not turn.done() and not self._replied:
            turn.cancel()
        elif not self._reader.interrupt():
            self._held_interrupt = True

    async def _repl(self) -> None:
        strikes = 0  # Ctrl-Cs in a row, with no line entered between them
        while True:
            try:
                line = await self._read()
            except EOFError:
                break
            except KeyboardInterrupt:
                strikes += 1
                if strikes >= 2:
                    break
                await self._out.note(f"({LEAVE_HINT})")
                continue
            text = line.strip()
            if not text:
                continue
            strikes = 0
            if await self._answered_question(text):
                continue
            command = parse(text)
            if command is not None and command.name in QUIT_WORDS:
                break
            if command is not None:
                await self._command(command)
            elif await self._answer(text.removeprefix("/")):  # `//x` says `/x`
                strikes = 1  # the Ctrl-C that cancelled counts as the first

    async def _answered_question(self, text: str) -> bool:
        """A y / n to the proposed zone, if one is open; any other line lets
        the question lapse and is read as usual. After /forget's question,
        `yes` erases and any other line cancels (and, unless it was a no, is
        then read as usual)."""
        word = text.lower()
        if self._commands is not None and self._commands.forget_asked:
            await self._out.show(await self._commands.answer_forget(word in YES))
            return word in YES | NO
        question, self._question = self._question, None
        if question is None or word not in YES | NO:
            return False
        if self._commands is None:
            await self._out.note("Commands are not available in this session.")
            return True
        answer = await self._commands.confirm_zone(replace(question, accept=word in YES))
        await self._out.show(answer)
        return True

    async def _read(self) -> str:
        if self._held_interrupt:
            self._held_interrupt = False
            raise KeyboardInterrupt
        if self._prompt_to is not None:
            self._prompt_to.write(PROMPT)
            self._prompt_to.flush()
        return await self._reader.read_line(PROMPT)

    async def _command(self, command: Parsed) -> None:
        if self._commands is None:
            await self._out.note("Commands are not available in this session.")
            return
        try:
            answer = await self._commands.run(command)
        except Exception as exc:  # storage trouble: one line, the REPL goes on
            event(
                self._log,
                logging.ERROR,
                "console_command_failed",
                agent=self.agent_id,
                command=command.name,
                error=repr(exc),
                action="check the database (kept doctor); the command can be repeated",
            )
            await self._out.error(f"/{command.name} failed: {exc}. Try again in a moment.")
            return
        await self._out.show(answer)

    async def _answer(self, text: str) -> bool:
        """One turn; True when Ctrl-C cancelled it."""
        addressed = AddressedMessage(
            target=self.target,
            chat_kind="private",
            sender_id=self.user,
            text=text,
            # Names the message, so a cancelled answer's message can be found.
            platform_message_id=f"in-{uuid.uuid4().hex}",
        )
        if not await self.admit(addressed):
            return False
        inbound = self.inbound(addressed)
        stored = False

        def on_stored() -> None:
            nonlocal stored
            stored = True

        self._replied = False
        # Until the handler returns an answer, the turn counts as failed
        # (run_turn logs and swallows what else goes wrong).
        self._model_answered = False
        self.last_turn_failed = True
        turn = asyncio.create_task(self.run_turn(inbound, on_stored=on_stored))
        self._turn = turn
        try:
            await asyncio.wait({turn})
        except asyncio.CancelledError:
            turn.cancel()
            raise
        finally:
            self._turn = None
            self._out.stop_thinking()
        if turn.cancelled():
            # Cancelled on request: nothing failed.
            self.last_turn_failed = False
            await self._cancelled(inbound, stored)
            return True
        self.last_turn_failed = not self._model_answered
        error = turn.exception()
        if isinstance(error, MessageNotStored):
            event(
                self._log,
                logging.ERROR,
                "console_message_not_stored",
                agent=inbound.agent_id,
                session=inbound.session_key,
                error=repr(error.__cause__ or error),
                action=error.action,
            )
            await self._out.error(
                "kept could not store your message, so it was not answered; try again in a moment."
            )
        elif error is not None:
            raise error
        return False

    async def _cancelled(self, inbound: Inbound, stored: bool) -> None:
        withdrawn = False
        if self._withdraw is not None:
            try:
                withdrawn = await self._withdraw(inbound)
            except Exception as exc:
                event(
                    self._log,
                    logging.ERROR,
                    "console_withdraw_failed",
                    agent=inbound.agent_id,
                    session=inbound.session_key,
                    error=repr(exc),
                    action="check the database; the message may be answered at the next start",
                )
        if withdrawn:
            note = "answer cancelled; your message stays in the chat"
        elif self._replied:
            note = "too late to cancel: the answer was already shown"
        elif stored:
            note = "too late to cancel: the answer was stored"
        else:
            note = "cancelled before your message was stored"
        await self._out.note(f"({note}. {LEAVE_HINT})")

    @contextlib.contextmanager
    def _sigint_to_interrupt(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        previous = signal.getsignal(signal.SIGINT)
        try:
            loop.add_signal_handler(signal.SIGINT, self.interrupt)
        except (ValueError, RuntimeError, NotImplementedError):
            yield  # not the main thread, or no signals here: Ctrl-C at the prompt only
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            # Back to whoever handled it before (asyncio.run's own handler).
            signal.signal(signal.SIGINT, previous)

    async def keep_typing(self, target: Target) -> None:
        await self._out.thinking()

    def render_actions(self, actions: Sequence[ButtonAction]) -> str | None:
        """A check-in's buttons, as the commands that do the same; a proposed
        zone's Yes / No, as a y / n question the next line answers."""
        follow_ups = (a for a in actions if isinstance(a, Action))
        ids = " ".join(dict.fromkeys(i for a in follow_ups for i in a.commitment_ids))
        if ids:
            return f"(/dismiss {ids} to drop it, /snooze ID 1d to postpone it)"
        zone = next((a for a in actions if isinstance(a, ZoneChoice) and a.accept), None)
        if zone is not None and zone.user_id == self.user:
            self._question = zone
            return f"(Use {zone.timezone} as your time zone? y / n)"
        return None

    async def send_text(
        self,
        target: Target,
        text: str,
        reply_to: str | None,
        buttons: str | None = None,
        *,
        ping: bool = False,
    ) -> SendResult:
        await self._out.reply(text, buttons)
        self._replied = True
        return SendResult(message_id=f"console-{next(self._ids)}")


def _default_reader(stdin: TextIO, stdout: TextIO, history: Path | None) -> LineReader:
    if _isatty(stdin) and _isatty(stdout):
        return PromptLineReader(open_history(history or history_path()))
    return PlainLineReader(stdin, interactive=False)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "local"


__all__ = ["PLATFORM", "ConsoleAdapter"]
