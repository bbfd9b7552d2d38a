"""A real store with one method's answer held until the test opens it: the
method's statement has run (and committed), its answer is not yet back in
the caller. A stop can then be made to land exactly mid-round-trip."""

from __future__ import annotations

import asyncio
from typing import Any


class HeldAnswer:
    def __init__(self, inner: Any, method: str) -> None:
        self._inner = inner
        self._method = method
        self.entered = asyncio.Event()  # the statement has run
        self.open = asyncio.Event()  # the test lets its answer through

    def __getattr__(self, name: str) -> Any:
        if name == self._method:
            return self._held
        return getattr(self._inner, name)

    async def _held(self, *args: Any, **kwargs: Any) -> Any:
        answer = await getattr(self._inner, self._method)(*args, **kwargs)
        self.entered.set()
        await self.open.wait()
        return answer
