"""The meter around every model call: a cap is checked before the call in
the database, so two workers cannot both spend the last of a budget."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.clock import TestClock
from core.config.model import KeptConfig
from core.limits import BudgetSpent, Meter, Payer
from core.llm import Completion, LLMError, Usage
from core.store.backends import Backend
from tests.support.pg_helpers import opened_backends
from tests.support.scripted_model import ScriptedModel

NOON = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
ALICE = Payer("main", "telegram", "alice", "alice")
ASK = [{"role": "user", "content": "hello"}]
CONFIG = KeptConfig.model_validate({"limits": {"perUser": {"tokensPerDay": 1000}}})


def meter(backend: Backend, model: ScriptedModel, clock: TestClock) -> Meter:
    return Meter(model, config=lambda: CONFIG, clock=clock, budgets=backend.budgets)


def used(tokens_in: int, tokens_out: int) -> Completion:
    return Completion("ok", [], "stop", "m", usage=Usage(tokens_in, tokens_out))


async def test_two_workers_cannot_both_spend_the_last_of_a_budget(postgres_url: str) -> None:
    clock = TestClock(NOON)
    entered, gate = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[dict[str, Any]], tools: Any) -> Completion:
        entered.set()
        await gate.wait()
        return used(250, 50)

    async with opened_backends(postgres_url, 2) as (one, two):
        first_model, second_model = ScriptedModel(), ScriptedModel()
        first_model.steps.append(slow)
        first = asyncio.create_task(meter(one, first_model, clock).complete(ALICE, "chat", ASK))
        await asyncio.wait_for(entered.wait(), 1)
        # Worker one's call holds the most it may use (its prompt and the
        # 1024-token output cap): worker two may not start one meanwhile.
        with pytest.raises(BudgetSpent) as refused:
            await meter(two, second_model, clock).complete(ALICE, "chat", ASK)
        assert second_model.requests == []
        assert refused.value.subject.kind == "user"
        assert refused.value.resets_at == NOON.replace(hour=0) + timedelta(days=1)
        gate.set()
        await asyncio.wait_for(first, 1)
        # What it used (300) replaced the hold: worker two may call now.
        second_model.steps.append(used(100, 10))
        await meter(two, second_model, clock).complete(ALICE, "chat", ASK)
        assert len(second_model.requests) == 1
        spent = await two.budgets.spent([refused.value.subject], "2026-12-04")
        assert spent == {refused.value.subject: 410}


async def test_a_failed_call_gives_its_hold_back(storage_url: str) -> None:
    clock = TestClock(NOON)
    async with opened_backends(storage_url, 1) as (backend,):
        model = ScriptedModel()
        model.steps.append(LLMError("down", kind="server"))
        metered = meter(backend, model, clock)
        with pytest.raises(LLMError):
            await metered.complete(ALICE, "chat", ASK)
        # Nothing spent, nothing held: a whole call's hold fits again.
        model.steps.append(used(900, 100))
        await metered.complete(ALICE, "chat", ASK)
        with pytest.raises(BudgetSpent):
            await metered.complete(ALICE, "chat", ASK)  # 1000 of 1000 spent


async def test_a_group_call_is_charged_to_the_member_the_group_and_the_bot(
    storage_url: str,
) -> None:
    clock = TestClock(NOON)
    config = KeptConfig.model_validate({"limits": {"perChat": {"tokensPerDay": 100}}})
    async with opened_backends(storage_url, 1) as (backend,):
        model = ScriptedModel()
        metered = Meter(model, config=lambda: config, clock=clock, budgets=backend.budgets)
        member = Payer("main", "telegram", "alice", "-100", shared=True)
        model.steps.append(used(80, 30))
        await metered.complete(member, "chat", ASK)
        # Another member of the same group: the group's budget is spent.
        with pytest.raises(BudgetSpent) as refused:
            await metered.complete(
                Payer("main", "telegram", "bob", "-100", shared=True), "chat", ASK
            )
        assert refused.value.subject.kind == "chat"
        # Bob's own private chat is not the group's.
        await metered.complete(Payer("main", "telegram", "bob", "bob"), "chat", ASK)
        subjects = member.subjects()
        spent = await backend.budgets.spent(subjects, "2026-12-04")
        # Bob's call had no usage: estimated from characters ("hello" in,
        # "echo: hello" out: 2 + 3 tokens), and counted by the bot too.
        assert [spent[s] for s in subjects] == [110, 110, 110 + 2 + 3]
