"""What `kept chat` prints: replies, command answers and notes, with rich.

A terminal gets the model's Markdown rendered (code blocks, lists, bold);
a pipe gets the reply's text exactly as stored, so scripts read what the
model wrote, and kept's own notes go to stderr there. Output written while
the prompt is on screen goes above it (prompt_toolkit's `in_terminal`), so
a check-in arriving while the user types does not garble the line.
"""

from __future__ import annotations

from typing import TextIO

from prompt_toolkit.application import in_terminal
from rich.console import Console, RenderableType
from rich.markdown import Markdown
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

    async def reply(self, text: str, note: str | None = None) -> None:
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
        async with in_terminal():
            self.console.print(renderable)
            self.flush()

    async def note(self, text: str) -> None:
        """A line of kept's own (a hint, a status), dimmed."""
        async with in_terminal():
            self._notes.print(Text(text, style="dim"))
            self.flush()

    async def error(self, text: str) -> None:
        async with in_terminal():
            self._notes.print(Text(text, style="bold red"))
            self.flush()

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
