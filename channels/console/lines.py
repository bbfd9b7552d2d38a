"""Where `kept chat` reads its lines from.

A terminal gets prompt_toolkit (line editing, history kept in a file); a pipe
or a file gets a plain reader, which answers line by line and ends at EOF.
Both speak the same way: `read_line` returns one line without its newline,
raises EOFError at the end of input (Ctrl-D) and KeyboardInterrupt when the
user pressed Ctrl-C at the prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output

HISTORY_FILE = "chat-history"


def history_path(environ: Mapping[str, str] | None = None) -> Path:
    """$XDG_STATE_HOME/kept/chat-history (~/.local/state/kept/chat-history):
    the user's own state, never the repository or the bot's data dir, which
    other operators may share."""
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "kept" / HISTORY_FILE


def open_history(path: Path | None) -> History:
    """The history in `path`, readable by its owner only (it holds what was
    typed); in memory when the file cannot be made."""
    if path is None:
        return InMemoryHistory()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))
    except OSError:
        return InMemoryHistory()
    return FileHistory(str(path))


class LineReader(Protocol):
    @property
    def interactive(self) -> bool:
        """A person at a terminal: prompts, hints and rendered Markdown."""
        ...

    async def read_line(self, prompt: str) -> str:
        """One line; EOFError at the end, KeyboardInterrupt on Ctrl-C."""
        ...

    def interrupt(self) -> bool:
        """Ctrl-C arrived as a signal while reading: end the current read
        with KeyboardInterrupt. False when no read is waiting."""
        ...


class PromptLineReader:
    """A terminal: prompt_toolkit's line editing and a history file. In its
    raw mode Ctrl-C and Ctrl-D arrive as keys, not as signals."""

    interactive = True

    def __init__(
        self,
        history: History | None = None,
        *,
        input: Input | None = None,
        output: Output | None = None,
    ) -> None:
        self._session: PromptSession[str] = PromptSession(
            history=history or InMemoryHistory(), input=input, output=output
        )

    async def read_line(self, prompt: str) -> str:
        # handle_sigint=False: prompt_toolkit's own SIGINT handler would
        # replace the adapter's (which cancels an answer) and remove it after.
        return await self._session.prompt_async(prompt, handle_sigint=False)

    def interrupt(self) -> bool:
        return False  # the prompt sees Ctrl-C as a key


class PlainLineReader:
    """A pipe or a file, read by a daemon thread one line at a time.

    A daemon thread, not the loop's executor: a read blocked on a terminal
    that is never answered must not keep the process from exiting. A read
    survives an interrupted `read_line`, so no line is lost between two."""

    def __init__(self, stream: TextIO, *, interactive: bool | None = None) -> None:
        self._stream = stream
        self.interactive = stream.isatty() if interactive is None else interactive
        self._pending: asyncio.Future[str] | None = None
        self._waiting: asyncio.Future[str] | None = None
        self._interrupted = False

    async def read_line(self, prompt: str) -> str:
        if self._pending is None:
            self._pending = self._start_read()
        self._waiting = asyncio.get_running_loop().create_future()
        self._pending.add_done_callback(self._relay)
        try:
            line = await self._waiting
        except asyncio.CancelledError:
            if self._interrupted:
                self._interrupted = False
                raise KeyboardInterrupt from None
            raise
        finally:
            self._pending.remove_done_callback(self._relay)
            self._waiting = None
        self._pending = None
        if not line:
            raise EOFError
        return line.rstrip("\r\n")

    def interrupt(self) -> bool:
        if self._waiting is None or self._waiting.done():
            return False
        self._interrupted = True
        self._waiting.cancel()
        return True

    def _relay(self, pending: asyncio.Future[str]) -> None:
        waiting = self._waiting
        if waiting is None or waiting.done():
            return
        error = pending.exception()
        if error is not None:
            waiting.set_exception(error)
        else:
            waiting.set_result(pending.result())

    def _start_read(self) -> asyncio.Future[str]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()

        def deliver(line: str | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(line or "")

        def read() -> None:
            try:
                line: str | None = self._stream.readline()
                error: BaseException | None = None
            except (OSError, ValueError) as exc:  # closed or unreadable: the end
                line, error = None, EOFError(str(exc))
            # RuntimeError: the loop closed while the line was read.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(deliver, line, error)

        threading.Thread(target=read, name="kept-chat-stdin", daemon=True).start()
        return future
