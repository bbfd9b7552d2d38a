"""What keeps a scope with due follow-ups from a check-in turn now, judged
from the config alone (no database read): an agent the config no longer
has, a disabled heartbeat, `target: none`, no running adapter for its
platform, quiet hours (in the member's own zone, which the caller reads).
The interval and the daily cap are the turn's own checks, made under the
chat's lock (scheduler.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from core.commitments.model import Scope
from core.config.model import KeptConfig
from core.heartbeat.active_hours import is_active, next_window_start

# How long a scope waits when only a config change can unblock it (a change
# wakes the scheduler anyway), and when its platform has no adapter yet.
CONFIG_RETRY = timedelta(minutes=5)
NO_ADAPTER_RETRY = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class Blocked:
    until: datetime  # when to look at the scope again
    outcome: str  # for the decision log line
    fields: dict[str, object] = field(default_factory=dict)


def blocked(
    scope: Scope,
    config: KeptConfig,
    now: datetime,
    platforms: set[str],
    member_zone: str | None = None,
) -> Blocked | None:
    """Why the scope may not have a turn now, or None if it may.
    `member_zone`: the own zone of the member the follow-ups are about."""
    # Unlike a chat turn, no follow-up is sent for an agent the config no
    # longer has: its follow-ups wait until it is added back.
    agent = config.find_agent(scope.agent_id)
    later = now + CONFIG_RETRY
    if agent is None:
        return Blocked(later, "no-agent", {"action": "add the agent back to the config"})
    heartbeat = agent.heartbeat
    if not heartbeat.every_seconds:
        return Blocked(later, "disabled")
    if heartbeat.target == "none":
        return Blocked(later, "target-none")
    if scope.platform not in platforms:
        return Blocked(now + NO_ADAPTER_RETRY, "no-adapter", {"platform": scope.platform})
    if not is_active(now, heartbeat.active_hours, agent.timezone, member_zone):
        assert heartbeat.active_hours is not None
        opens = next_window_start(now, heartbeat.active_hours, agent.timezone, member_zone)
        return Blocked(opens, "quiet-hours", {"until": opens.isoformat()})
    return None


def interval(config: KeptConfig, agent_id: str) -> timedelta:
    """The agent's check-in interval (zero when it has none)."""
    agent = config.find_agent(agent_id)
    return timedelta(seconds=agent.heartbeat.every_seconds if agent is not None else 0)
