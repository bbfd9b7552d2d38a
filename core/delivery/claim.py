"""A delivery claim and its one owner in this process, from take to settle.

A claim is taken in the database (this worker's id, the attempt it counted,
a lease) and goes `claimed -> sending -> settled`: `claimed` while the work
before the send runs (a model call, access checks), `sending` from its own
fenced transaction just before the platform call, `settled` once the store
has the outcome. The phase decides what an interruption means: a claim that
never reached `sending` is released (nothing was sent, it is due again); one
in `sending` may have been sent, so it ends as a send of unknown outcome and
is never repeated. The database enforces both (every step is fenced on the
claimant); this object only makes sure each claim is settled exactly once.

Use it as `async with claim:` around everything done with it: leaving the
block unsettled (stopped, broken, or a path that forgot) settles it by its
phase. Settling is idempotent, so nested owners (the scheduler around the
turn) never settle twice.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import ClassVar, Literal, Self, TypeVar

from core.clock import Clock
from core.delivery.send import settle_despite_cancel
from core.logs import event

Phase = Literal["claimed", "sending", "settled"]
T = TypeVar("T")
C = TypeVar("C", bound="DeliveryClaim")

LEASE_ENDS_IT = "none needed: the claim's lease ends it"


class DeliveryClaim(abc.ABC):
    """One claim's phase and its moves; subclasses say how their store
    records each move (every call fenced on worker and attempt)."""

    # Names the claim's log events (`<kind>_claim_release_failed`, ...).
    kind: ClassVar[str]

    def __init__(self, *, clock: Clock, lease: timedelta, log: logging.Logger) -> None:
        self._clock = clock
        # How long `sending` is vouched for: renewed when the claim moves there.
        self._lease = lease
        self._log = log
        self._phase: Phase = "claimed"

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def settled(self) -> bool:
        return self._phase == "settled"

    async def begin_sending(self) -> bool:
        """`claimed -> sending` in its own fenced transaction, the lease
        renewed. False when the claim was lost meanwhile (dismissed,
        cancelled, taken over): it is then released and nothing may be sent."""
        if self._phase != "claimed":
            raise RuntimeError(f"a {self._phase} claim cannot begin sending")
        now = self._clock.now()
        if await self._to_sending(now, now + self._lease):
            self._phase = "sending"
            return True
        await self.release("claim lost before sending")
        return False

    async def release(self, why: str) -> None:
        """Give back a claim that never reached the platform; it is due again.
        Should the store fail, the lease ends the claim the same way later.
        A settled claim is left as it is; a `sending` one is never released."""
        if self._phase == "settled":
            return
        if self._phase == "sending":
            raise RuntimeError("a claim in `sending` may have been sent; it is never released")
        try:
            await settle_despite_cancel(self._release(self._clock.now(), why))
        except Exception as exc:
            event(
                self._log,
                logging.WARNING,
                f"{self.kind}_claim_release_failed",
                **self._fields(),
                error=repr(exc),
                action=LEASE_ENDS_IT,
            )
        finally:
            self._phase = "settled"

    async def settle(self, record: Callable[[datetime], Awaitable[T]]) -> T | None:
        """Record the claim's outcome with `record(now)` (sent, failed,
        dismissed, not served), once: a settled claim records nothing and
        gives None. Should recording fail, the claim keeps its phase and the
        owner's exit settles it by that phase."""
        if self._phase == "settled":
            return None
        result = await record(self._clock.now())
        self._phase = "settled"
        return result

    async def abandon(self, cause: BaseException | None) -> None:
        """Settle by phase a claim its work left unsettled: `claimed` is
        released, `sending` ends as a send of unknown outcome, never resent.
        Runs to its end even when cancelled again meanwhile."""
        phase = self._phase
        if phase == "settled":
            return
        why = _why(cause)
        now = self._clock.now()
        if phase == "claimed":
            work = self._release(now, f"{why} before sending; released")
        else:
            work = self._fail_unknown(now, f"{why} while sending")
        try:
            await settle_despite_cancel(work)
            self._abandoned(phase, why)
        except Exception as err:
            event(
                self._log,
                logging.ERROR,
                f"{self.kind}_claim_settle_failed",
                phase=phase,
                **self._fields(),
                error=repr(err),
                action=LEASE_ENDS_IT,
            )
        finally:
            self._phase = "settled"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.abandon(exc)

    # --- what a kind of claim writes -------------------------------------------------

    @abc.abstractmethod
    async def _to_sending(self, now: datetime, lease_until: datetime) -> bool:
        """Move the claim to `sending` if it is still ours and live."""

    @abc.abstractmethod
    async def _release(self, now: datetime, error: str) -> None:
        """Drop the `claimed` claim, recording why."""

    @abc.abstractmethod
    async def _fail_unknown(self, now: datetime, cause: str) -> None:
        """End the `sending` claim as a send of unknown outcome (never resent)."""

    @abc.abstractmethod
    def _abandoned(self, phase: Phase, why: str) -> None:
        """Told once an abandoned claim was settled (for its log)."""

    @abc.abstractmethod
    def _fields(self) -> dict[str, object]:
        """What names the claim in a log event."""


def _why(cause: BaseException | None) -> str:
    if cause is None:
        return "left unsettled"
    if isinstance(cause, asyncio.CancelledError):
        return "stopped"
    return repr(cause)


async def take_despite_cancel(take: Awaitable[Sequence[C]]) -> list[C]:
    """The claims `take` makes, run to its end even when the caller is
    cancelled meanwhile; on that cancellation each claim it made is released
    before the cancellation goes on. The claim statement may have committed
    when the stop lands: its rows never reached the platform, and must be
    due again now rather than when their lease ends."""
    task = asyncio.ensure_future(take)
    try:
        return list(await asyncio.shield(task))
    except asyncio.CancelledError:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            for claim in await task:
                await claim.release("stopped while being claimed")
        raise
