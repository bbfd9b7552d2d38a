"""The terminal chat: `kept chat`, one private session per local user.

Lines come from stdin (a terminal or a pipe); replies go to stdout. Piped
input is answered line by line, in order, and the process exits at EOF.
"""

from __future__ import annotations

import asyncio
import getpass
import itertools
import sys
from collections.abc import Iterable
from typing import TextIO

from channels.base import ChannelAdapter, InboundHandler, Said
from core.clock import Clock
from core.messages import SendResult, Target

PLATFORM = "console"
QUIT_WORDS = frozenset({"/quit", "/exit"})


class ConsoleAdapter(ChannelAdapter[None]):
    platform = PLATFORM
    max_message_length = 1_000_000

    def __init__(
        self,
        *,
        agent_id: str,
        handler: InboundHandler,
        clock: Clock,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        user: str | None = None,
        allow_from: Iterable[str] = (),
    ) -> None:
        super().__init__(agent_id=agent_id, allow_from=allow_from, handler=handler, clock=clock)
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        self.user = user or _local_user()
        self._ids = itertools.count(1)
        self._interactive = self._stdin.isatty()

    @property
    def target(self) -> Target:
        return Target(platform=PLATFORM, chat_id=self.user)

    async def start(self) -> None:
        if self._interactive:
            self._write(f"kept: talking to agent '{self.agent_id}'. /quit or Ctrl-D to leave.\n")

    async def stop(self) -> None:
        self._stdout.flush()

    async def run(self) -> None:
        """Read lines until EOF or /quit, answering each before the next."""
        loop = asyncio.get_running_loop()
        while True:
            if self._interactive:
                self._write("you> ")
            line = await loop.run_in_executor(None, self._stdin.readline)
            if not line:
                break
            text = line.strip()
            if text in QUIT_WORDS:
                break
            if not text:
                continue
            said = Said(
                target=self.target,
                chat_kind="private",
                sender_id=self.user,
                text=text,
            )
            if await self.admit(said):
                await self.take_turn(self.inbound(said))

    async def send_text(
        self, target: Target, text: str, reply_to: str | None, buttons: None = None
    ) -> SendResult:
        prefix = "kept> " if self._interactive else ""
        self._write(f"{prefix}{text}\n")
        return SendResult(message_id=f"console-{next(self._ids)}")

    def _write(self, text: str) -> None:
        self._stdout.write(text)
        self._stdout.flush()


def _local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "local"
