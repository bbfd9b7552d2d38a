"""Prices for `kept usage`: a group's cost only when every model in it is
priced, a dated snapshot taking its undated name's price, never a
prefix's."""

from __future__ import annotations

import pytest

from core.config.model import PriceConfig
from core.limits.spend import line_cost, price_for, total, unpriced
from core.limits.store import UsageLine

MINI = PriceConfig(input=0.4, output=1.6)
BIG = PriceConfig(input=2.0, output=8.0)
PRICES = {"gpt-4.1-mini": MINI, "gpt-4.1": BIG}


@pytest.mark.parametrize(
    ("model", "price"),
    [
        ("gpt-4.1-mini", MINI),
        ("gpt-4.1-mini-2025-04-14", MINI),  # what the endpoint says answered
        ("gpt-4.1-2025-04-14", BIG),
        ("gpt-4.1-nano", None),  # not gpt-4.1's price: no prefix matching
        ("gpt-4.1-mini-high", None),
    ],
)
def test_a_snapshot_takes_its_undated_names_price(model: str, price: PriceConfig | None) -> None:
    assert price_for(model, PRICES) == price
    assert price_for("claude-x-20241022", {"claude-x": BIG}) == BIG


def test_a_cost_only_when_every_model_is_priced() -> None:
    priced = UsageLine(
        "a", 2, 2_000_000, 500_000, 0, (("gpt-4.1-mini-2025-04-14", 2_000_000, 500_000),)
    )
    assert line_cost(priced, PRICES) == pytest.approx(0.8 + 0.8)
    mixed = UsageLine("b", 2, 2, 2, 0, (("gpt-4.1", 1, 1), ("local", 1, 1)))
    assert line_cost(mixed, PRICES) is None
    assert unpriced([priced, mixed], PRICES) == ["local"]
    both = total([priced, mixed])
    assert (both.calls, both.tokens_in, both.tokens_out) == (4, 2_000_002, 500_002)
    assert dict((m, (i, o)) for m, i, o in both.by_model)["gpt-4.1"] == (1, 1)
