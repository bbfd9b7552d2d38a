"""The AppStateStore port: small named values the bot keeps about itself
across restarts (not about any chat), e.g. the hash of the Discord slash
command tree last synced, so a start whose commands did not change skips
the sync.

A value is a short string under a key its owner names (`discord.commands:
<application>:<scope>`); a key is written whole and read whole. Nothing here
is a guarantee about messages: losing a value costs one redundant call to a
platform at the next start, never a message.
"""

from __future__ import annotations

import abc


class AppStateStore(abc.ABC):
    @abc.abstractmethod
    async def get(self, key: str) -> str | None:
        """The value stored under `key`, None when there is none."""

    @abc.abstractmethod
    async def put(self, key: str, value: str) -> None:
        """Store `value` under `key`, replacing any earlier value."""
