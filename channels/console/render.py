"""What `kept chat` prints: replies, command answers and notes, with rich.

A terminal gets the model's Markdown rendered (code blocks, lists, bold);
a pipe gets the reply's text exactly as stored, so scripts read what the
model wrote, and kept's own notes go to stderr there. Output written while
the prompt is on screen goes above it (prompt_toolkit's `in_terminal`), so
a check-in arriving while the user types does not garble the line.
"""

from __future__ import annotations

import asyncio
from typing import TextIO

from prompt_toolkit.application import in_terminal
from rich.console import Console, RenderableType
from rich.markdown import Markdown
from rich.status import Status
from rich.text import Text


class ConsoleOutput:
    def __init__(
        self,
        stdout: TextIO,
        stderr: TextIO,
        *,
        markdown: bool,
        interactive: bool,
        force_terminal: bool | None = None,
    ) -> None:
        """`markdown`: render replies; `interactive`: a person at a terminal
        (who speaks is marked, notes share the screen); `force_terminal`:
        styles even on a pipe (tests)."""
        self.markdown = markdown
        self._interactive = interactive
        self.console = _console(stdout, force_terminal)
        self._notes = self.console if interactive else _console(stderr, force_terminal)
        self._status: Status | None = None

    async def reply(self, text: str, note: str | None = None) -> None:
        self.stop_thinking()
        async with in_terminal():
            if self._interactive:
                self.console.print(Text("kept", style="bold cyan"))
            if self.markdown:
                self.console.print(Markdown(text))
            else:
                self.console.out(text, highlight=False)
            if note:
                self._notes.print(Text(note, style="dim"))
            self.flush()

    async def show(self, renderable: RenderableType) -> None:
        """A command's answer (a table, a line)."""
        self.stop_thinking()
        async with in_terminal():
            self.console.print(renderable)
            self.flush()

    async def note(self, text: str) -> None:
        """A line of kept's own (a hint, a status), dimmed."""
        self.stop_thinking()
        async with in_terminal():
            self._notes.print(Text(text, style="dim"))
            self.flush()

    async def error(self, text: str) -> None:
        self.stop_thinking()
        async with in_terminal():
            self._notes.print(Text(text, style="bold red"))
            self.flush()

    async def thinking(self) -> None:
        """A spinner until cancelled or anything is printed (a person at a
        terminal only): the console's "typing…"."""
        if not self._interactive:
            return
        self.stop_thinking()
        self._status = self.console.status("thinking… (Ctrl-C stops the answer)")
        self._status.start()
        try:
            await asyncio.Event().wait()
        finally:
            self.stop_thinking()

    def stop_thinking(self) -> None:
        """Synchronously, so the spinner is gone before the next line or
        prompt is drawn (its task may be cancelled only later)."""
        if self._status is not None:
            self._status.stop()
            self._status = None

    def flush(self) -> None:
        self.console.file.flush()
        self._notes.file.flush()


def _console(stream: TextIO, force_terminal: bool | None) -> Console:
    # A terminal has its width; a pipe or file gets room for whole rows.
    # markup=False: a reply's "[brackets]" are text, not rich styles.
    width = None if _isatty(stream) else 200
    return Console(
        file=stream,
        force_terminal=force_terminal,
        width=width,
        highlight=False,
        emoji=False,
        markup=False,
    )


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
