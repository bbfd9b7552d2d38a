"""Rates: how fast a user, and a group as a whole, may write.

Each rule is GCRA (the generic cell rate algorithm, as in ATM and most API
gateways): `messagesPerMinute` N lets a subject send N messages at once and
then one every 60/N seconds, so a short burst passes and a flood does not.
Its state is one time per subject in the database (core/store/sql/limits.py),
so several workers count one user's messages together.

A message over a rate is still stored (kind `limited`: searchable, erasable,
exported) but never answered, by this turn or by recovery; its sender is told
once a minute at most when they can write again (ConversationManager).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from core.config.model import KeptConfig
from core.limits.store import ALLOWED, RateRule, RateStore, RateVerdict, Subject
from core.messages import Inbound
from core.metrics import recorder


def rate_rules(config: KeptConfig, inbound: Inbound) -> list[RateRule]:
    """The rules a message counts against now: its sender's, and in a shared
    chat the chat's."""
    limits = config.limits
    platform = inbound.target.platform
    rules = []
    if (per_user := limits.per_user.messages_per_minute) is not None:
        rules.append(RateRule(Subject("user", platform, inbound.sender_id), per_user))
    per_chat = limits.per_chat.messages_per_minute
    if inbound.chat_kind != "private" and per_chat is not None:
        rules.append(RateRule(Subject("chat", platform, inbound.target.chat_id), per_chat))
    return rules


class RateLimiter:
    def __init__(self, store: RateStore, config: Callable[[], KeptConfig]) -> None:
        self._store = store
        self._config = config

    async def take(self, inbound: Inbound, now: datetime) -> RateVerdict:
        """Count `inbound` against its rules; refused when one is over."""
        rules = rate_rules(self._config(), inbound)
        if not rules:
            return ALLOWED
        verdict = await self._store.take(rules, now)
        if not verdict.allowed and verdict.limit is not None:
            recorder().over_limit(verdict.limit)
        return verdict
