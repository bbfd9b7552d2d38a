"""A user's message at the door: its rates, and its turn's first hold, both
decided in the transaction that stores it (Store.admit_message).

Each rate is GCRA (the generic cell rate algorithm, as in ATM and most API
gateways): `messagesPerMinute` N lets a subject send N messages at once and
then one every 60/N seconds, so a short burst passes and a flood does not.
Its state is one time per subject in the database (core/store/sql/limits.py),
so several workers count one user's messages together.

A message over a rate is still stored (kind `limited`: searchable, erasable,
exported) but never answered, by its turn or by recovery; its sender is told
at most once a minute when they can write again (ConversationManager).

When a token budget caps the turn's payer, its first call's hold is taken
here too, before the prompt is built: it holds the most such a prompt can
be (the agent's prompt, its history budget, the tools) plus the output cap,
so deciding costs the turn no transaction of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from core.config.model import AgentConfig, KeptConfig
from core.limits.meter import Payer, budget_day, caps_for
from core.limits.store import Admission, RateRule, Subject
from core.messages import Inbound

# The most characters the prompt adds around the agent's own: where the turn
# is, how the platform renders, the user's time (core/conversation/prompt.py).
PLACE_CHARS = 1000


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


def inbound_payer(inbound: Inbound) -> Payer:
    return Payer(
        agent_id=inbound.agent_id,
        platform=inbound.target.platform,
        user_id=inbound.sender_id,
        chat_id=inbound.target.chat_id,
        shared=inbound.chat_kind != "private",
    )


class Admissions:
    """What a message's insert decides, from the live config."""

    def __init__(self, config: Callable[[], KeptConfig]) -> None:
        self._config = config

    def admission(
        self,
        inbound: Inbound,
        agent: AgentConfig,
        tools_chars: int,
        now: datetime,
        *,
        hold_first: bool = True,
    ) -> Admission | None:
        """None when nothing limits the message (no rule, no cap).
        `hold_first=False`: rates only; the turn's calls hold their own
        (its chat already has a message holding one, queued ahead)."""
        config = self._config()
        rules = tuple(rate_rules(config, inbound))
        caps = ()
        if hold_first:
            caps = tuple(caps_for(config, inbound_payer(inbound).subjects()))
        if not rules and not caps:
            return None
        if not caps:
            return Admission(rules, now)
        prompt = len(agent.system_prompt) + PLACE_CHARS + tools_chars
        prompt += max(agent.history_chars, len(inbound.text))
        tokens = prompt + config.llm.output_cap("chat")
        return Admission(rules, now, caps, budget_day(now), tokens)
