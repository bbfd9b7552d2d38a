"""How PostgreSQL picks a page of chats' due follow-ups for one claim
statement (SqlHeartbeatStore's `pick_due`).

Each scope's rows walk the commitments_scope index, one statement for the
whole page of scopes. A scope is claimed by one claimer at a time: an
advisory lock per session, tried for this statement only (in its own
namespace: a chat's turn must never find its session taken by someone's
claim), so two workers claiming at once never split one chat's due rows
(each turn would carry a part of them, and the rest wait an interval).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.commitments.model import Scope
from core.store.postgres.locks import CLAIM_NAMESPACE, session_lock_id
from core.store.sql.commitments import ACTIVE, scope_params

_PICK = (
    "WITH s AS MATERIALIZED (SELECT * FROM unnest(?::text[], ?::text[], "
    "  ?::text[], ?::text[], ?::text[], ?::text[], ?::integer[]) "
    "  AS s(agent_id, session_key, platform, chat_id, thread_id, sender_id, lock_id) "
    "  WHERE pg_try_advisory_xact_lock(?, s.lock_id)), "
    "picked AS (SELECT p.id FROM s CROSS JOIN LATERAL ("
    "  SELECT c.id FROM commitments c WHERE c.agent_id = s.agent_id "
    "  AND c.session_key = s.session_key AND c.platform = s.platform "
    "  AND c.chat_id = s.chat_id AND c.thread_id IS NOT DISTINCT FROM s.thread_id "
    "  AND c.sender_id IS NOT DISTINCT FROM s.sender_id "
    f"  AND c.{ACTIVE} AND c.due_earliest <= ? AND c.due_latest >= ? "
    "  AND c.claimed_at IS NULL ORDER BY c.due_earliest, c.id LIMIT ? "
    "  FOR UPDATE SKIP LOCKED) p)"
)


def pick_due_per_chat(
    scopes: Sequence[Scope], *, per_scope: int, now: Any
) -> tuple[str, tuple[Any, ...]]:
    columns = zip(*(scope_params(s) for s in scopes), strict=True)
    locks = [session_lock_id(s.session_key) for s in scopes]
    params = (*(list(column) for column in columns), locks, CLAIM_NAMESPACE, now, now, per_scope)
    return _PICK, params
