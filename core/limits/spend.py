"""What model calls cost, from `llm.prices` (USD per 1 M tokens in and
out, per model), and a user's own day of them (`/usage`).

A group's cost is given only when every model in it has a price: a sum
that silently left a model out would read as the whole cost. The model a
call records is the one the endpoint says answered, often a dated snapshot
(`gpt-4.1-mini-2025-04-14` for `gpt-4.1-mini`): without a price of its own
it takes its undated name's. Nothing looser (a prefix would price
`gpt-4.1-mini` as `gpt-4.1`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time

from core.config.model import KeptConfig, PriceConfig
from core.limits.meter import budget_day, next_reset
from core.limits.store import BudgetStore, Subject, UsageLine, UsageStore

PER_TOKENS = 1_000_000
# A snapshot's date at the end of a model's name: -2025-04-14 or -20241022.
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


def price_for(model: str, prices: Mapping[str, PriceConfig]) -> PriceConfig | None:
    """The model's own price, else its undated name's; None: no price."""
    found = prices.get(model)
    if found is None:
        found = prices.get(_SNAPSHOT.sub("", model))
    return found


def model_cost(price: PriceConfig, tokens_in: int, tokens_out: int) -> float:
    return (tokens_in * price.input + tokens_out * price.output) / PER_TOKENS


def line_cost(line: UsageLine, prices: Mapping[str, PriceConfig]) -> float | None:
    """The group's cost in USD; None when a model in it has no price."""
    cost = 0.0
    for model, tokens_in, tokens_out in line.by_model:
        price = price_for(model, prices)
        if price is None:
            return None
        cost += model_cost(price, tokens_in, tokens_out)
    return cost


def unpriced(lines: Sequence[UsageLine], prices: Mapping[str, PriceConfig]) -> list[str]:
    """The models used in `lines` that `llm.prices` does not price."""
    used = {m for line in lines for m, _, _ in line.by_model}
    return sorted(m for m in used if price_for(m, prices) is None)


def total(lines: Sequence[UsageLine], key: str = "total") -> UsageLine:
    """Every group of `lines` as one (its models summed across groups)."""
    models: dict[str, list[int]] = {}
    for line in lines:
        for model, tin, tout in line.by_model:
            sums = models.setdefault(model, [0, 0])
            sums[0] += tin
            sums[1] += tout
    return UsageLine(
        key,
        calls=sum(x.calls for x in lines),
        tokens_in=sum(x.tokens_in for x in lines),
        tokens_out=sum(x.tokens_out for x in lines),
        estimated_calls=sum(x.estimated_calls for x in lines),
        by_model=tuple(sorted((m, s[0], s[1]) for m, s in models.items())),
    )


@dataclass(frozen=True, slots=True)
class UsageShown:
    """`/usage`: the asker's own UTC day of model calls, and their daily
    allowance (`limits.perUser.tokensPerDay`) when one is set."""

    day: str  # the UTC day, ISO
    line: UsageLine
    # The cap and what counts against it (the budget's own counter, which an
    # erasure of the usage records does not reset); None: no cap.
    cap: int | None
    spent: int
    resets_at: datetime
    now: datetime
    # Asked in a shared chat: the answer says it is the asker's own.
    shared: bool = False

    @property
    def left(self) -> int | None:
        return None if self.cap is None else max(0, self.cap - self.spent)


@dataclass(frozen=True, slots=True)
class SpendStores:
    """What `/usage` reads: the calls' records and the budgets' counters."""

    usage: UsageStore
    budgets: BudgetStore

    async def today(
        self,
        config: KeptConfig,
        platform: str,
        user_id: str,
        now: datetime,
        *,
        shared: bool = False,
    ) -> UsageShown:
        day = budget_day(now)
        midnight = datetime.combine(now.astimezone(UTC).date(), time(0), tzinfo=UTC)
        line = await self.usage.user_usage(platform, user_id, midnight)
        subject = Subject("user", platform, user_id)
        spent = (await self.budgets.spent([subject], day)).get(subject, 0)
        cap = config.limits.per_user.tokens_per_day
        return UsageShown(day, line, cap, spent, next_reset(now), now, shared)
