"""The moment a message leaves the process: the one place a message's
`on_leaving` (core's record that a reply is on its way) is called, once,
just before its first request. A platform that waits for its pace calls it
after the waiting (Telegram hands the Departure to its rate limiter)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from core.errors import KeptError


class SendFenced(KeptError):
    """A message's `on_leaving` declined (it is already being sent) or
    failed (its `sending` mark could not be stored): nothing was sent."""


class Departure:
    """The moment a message leaves the process: `leave()` calls the
    message's `on_leaving` once, before its first request, and raises
    SendFenced when that says no or fails, so the request is not made."""

    __slots__ = ("_hook", "_left")

    def __init__(self, hook: Callable[[], Awaitable[bool]] | None) -> None:
        self._hook = hook
        self._left = hook is None

    @property
    def left(self) -> bool:
        return self._left

    async def leave(self) -> None:
        if self._left:
            return
        self._left = True
        assert self._hook is not None
        try:
            going = await self._hook()
        except Exception as exc:
            raise SendFenced(f"its sending mark could not be stored: {exc!r}") from exc
        if not going:
            raise SendFenced("it is being sent already")
