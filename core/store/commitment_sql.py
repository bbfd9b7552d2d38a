"""SQL for the commitments table that both backends build the same way,
each with its own placeholder ("?" for SQLite, "%s" for PostgreSQL)."""

from __future__ import annotations

from typing import Any

from core.commitments.model import ACTIVE_STATUSES, Scope
from core.commitments.store import Filter

# Active, spelled the same in every query that should use a partial index
# (SQLite only uses one when the query repeats its WHERE term).
ACTIVE = "status IN ('pending', 'snoozed')"


def scope_params(scope: Scope) -> tuple[Any, ...]:
    """The parameters of a scope match, in its column order."""
    return (
        scope.agent_id,
        scope.session_key,
        scope.platform,
        scope.chat_id,
        scope.thread_id,
        scope.sender_id,
    )


def filter_sql(where: Filter | None, mark: str) -> tuple[str, list[Any]]:
    """SQL conditions (joined with AND, never empty) and their parameters."""
    clauses: list[str] = ["1 = 1"]
    params: list[Any] = []
    if where is None:
        return clauses[0], params
    for column, value in (
        ("agent_id", where.agent_id),
        ("session_key", where.session_key),
        ("sender_id", where.sender_id),
    ):
        if value is not None:
            clauses.append(f"{column} = {mark}")
            params.append(value)
    if where.statuses is not None:
        statuses = sorted(set(where.statuses))
        if not statuses:
            clauses.append("1 = 0")
        elif statuses == sorted(ACTIVE_STATUSES):
            clauses.append(ACTIVE)  # the literal term, so partial indexes apply
        else:
            clauses.append(f"status IN ({', '.join([mark] * len(statuses))})")
            params.extend(statuses)
    return " AND ".join(clauses), params
