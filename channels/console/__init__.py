"""The terminal chat (`kept chat`): a REPL on the shared channel base."""

from channels.console.adapter import PLATFORM, ConsoleAdapter

__all__ = ["PLATFORM", "ConsoleAdapter"]
