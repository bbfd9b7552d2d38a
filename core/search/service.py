"""Session search as the agent and the admin see it: visibility, caps, the
`indexing` flag. The store filters by scope inside its SQL; this layer decides
which scope a caller may have and keeps answers inside their size budget."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from core.clock import iso_utc
from core.config.model import KeptConfig
from core.errors import KeptError
from core.messages import parse_session_key
from core.search.redact import Redactor
from core.store.base import MessageRecord, SearchHit, SearchScope, Store

DEFAULT_LIMIT = 10
MAX_LIMIT = 25
HISTORY_DEFAULT = 20
HISTORY_MAX = 50
MAX_RESULT_BYTES = 32 * 1024
MAX_HISTORY_TEXT = 2000
# How long the `indexing` flag is reused before the store is asked again: a
# search then costs one trip to the store's thread, not two, and the flag is
# at most this stale (it only says results may be incomplete).
INDEXING_TTL = 1.0

Visibility = Literal["self", "agent", "all"]


class NotVisible(KeptError):
    """The caller asked for a session outside its visibility."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Who searches: a chat (the agent's tool) or the admin CLI (no session)."""

    agent_id: str | None
    session_key: str | None


@dataclass(slots=True)
class SearchAnswer:
    results: list[dict[str, Any]] = field(default_factory=list)
    indexing: bool = False
    # More matches exist than `results` holds: the limit was reached (one
    # more row was found), or the size budget cut the list.
    truncated: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"results": self.results, "indexing": self.indexing, "truncated": self.truncated}


def clamp_limit(limit: Any, default: int, maximum: int) -> int:
    try:
        value = int(limit) if limit is not None else default
    except (TypeError, ValueError):
        value = default
    return max(1, min(maximum, value))


class SessionSearch:
    def __init__(
        self,
        store: Store,
        config: Callable[[], KeptConfig],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._config = config
        self._clock = clock
        self._indexing: tuple[bool, float] | None = None
        self._redactor_key: tuple[str, ...] | None = None
        self._redactor = Redactor()

    @property
    def redactor(self) -> Redactor:
        patterns = tuple(self._config().sessions.search.redact_patterns)
        if patterns != self._redactor_key:
            self._redactor = Redactor(patterns)
            self._redactor_key = patterns
        return self._redactor

    def scope_for(
        self, caller: Caller, session_key: str | None, visibility: Visibility | None = None
    ) -> SearchScope:
        """The widest scope this caller may search, narrowed to `session_key`
        when given. `all` is honoured only for the admin (no calling session)."""
        level = visibility or self._config().sessions.search.visibility
        if caller.session_key is None:  # the admin CLI
            if session_key is not None:
                return SearchScope(session_key=session_key)
            return SearchScope(agent_id=caller.agent_id)
        if level == "self":
            if session_key is not None and session_key != caller.session_key:
                raise NotVisible(session_key)
            return SearchScope(session_key=caller.session_key)
        # "agent" (and "all", which a chat never gets): the caller's agent only.
        if session_key is not None:
            if _agent_of(session_key) != caller.agent_id:
                raise NotVisible(session_key)
            return SearchScope(session_key=session_key)
        return SearchScope(agent_id=caller.agent_id)

    async def search(self, query: str, scope: SearchScope, limit: int) -> SearchAnswer:
        """The best `limit` matches; `truncated` says more exist. One row past
        the limit is fetched to know that, and dropped."""
        hits = await self._store.search(query, scope=scope, limit=limit + 1, redactor=self.redactor)
        more = len(hits) > limit
        answer = SearchAnswer(indexing=await self.indexing())
        shown = hits[:limit]
        levels = relevance([h.score for h in shown])
        results = [_hit_json(h, level) for h, level in zip(shown, levels, strict=True)]
        answer.results, cut = _fit(results, answer.as_json())
        answer.truncated = more or cut
        return answer

    async def history(
        self, session_key: str, around_message_id: int | None, limit: int
    ) -> dict[str, Any]:
        rows = await self._store.messages_around(
            session_key, around_message_id=around_message_id, limit=limit
        )
        redactor = self.redactor
        messages = [_history_json(r, redactor) for r in rows]
        doc: dict[str, Any] = {"sessionKey": session_key, "messages": [], "truncated": False}
        doc["messages"], doc["truncated"] = _fit(messages, doc, key="messages")
        return doc

    async def indexing(self) -> bool:
        """Whether some session's index is behind (cached for INDEXING_TTL)."""
        now = self._clock()
        if self._indexing is not None and 0 <= now - self._indexing[1] < INDEXING_TTL:
            return self._indexing[0]
        value = bool(await self._store.sessions_behind(limit=1))
        self._indexing = (value, now)
        return value


def _agent_of(session_key: str) -> str | None:
    try:
        return parse_session_key(session_key).agent_id
    except ValueError:
        return None


def relevance(scores: Sequence[float]) -> list[float]:
    """Each score's relevance among `scores` (best first or not): 1.0 for
    the best, then evenly lower for each weaker distinct score, down to 1/k
    for the k-th; equal scores share one.

    Only the order of the backends' scores is comparable, not their size:
    SQLite's bm25 of a word found in most messages is about 1e-6 (FTS5
    floors its IDF there), PostgreSQL's ts_rank_cd is divided by the
    message's length, and phrase matches get a bonus that puts them first."""
    distinct: list[float] = []
    for score in sorted(scores, reverse=True):
        if not distinct or not math.isclose(score, distinct[-1], rel_tol=1e-9, abs_tol=0.0):
            distinct.append(score)
    k = len(distinct)

    def level(score: float) -> float:
        rank = next(i for i, d in enumerate(distinct) if math.isclose(score, d, rel_tol=1e-9))
        return round((k - rank) / k, 4)

    return [level(score) for score in scores]


def _hit_json(hit: SearchHit, relevance: float) -> dict[str, Any]:
    return {
        "sessionKey": hit.session_key,
        "messageId": hit.message_id,
        "timestamp": iso_utc(hit.ts),
        "role": hit.role,
        "snippet": hit.snippet,
        # The backend's own score (higher is better), to 6 significant
        # digits: rounding to places turned SQLite's tiny bm25 into 0.0.
        "score": float(f"{hit.score:.6g}"),
        "relevance": relevance,
    }


def _history_json(row: MessageRecord, redactor: Redactor) -> dict[str, Any]:
    text = redactor.redact(row.text)
    if len(text) > MAX_HISTORY_TEXT:
        text = text[: MAX_HISTORY_TEXT - 1] + "…"
    return {
        "messageId": row.id,
        "timestamp": iso_utc(row.ts),
        "role": row.role,
        "text": text,
    }


def _fit(
    items: list[dict[str, Any]], envelope: dict[str, Any], key: str = "results"
) -> tuple[list[dict[str, Any]], bool]:
    """Keep the longest prefix of `items` whose document fits MAX_RESULT_BYTES."""
    base = dict(envelope, **{key: [], "truncated": True})
    size = len(json.dumps(base, ensure_ascii=False).encode())
    kept: list[dict[str, Any]] = []
    for item in items:
        size += len(json.dumps(item, ensure_ascii=False).encode()) + 1
        if size > MAX_RESULT_BYTES:
            return kept, True
        kept.append(item)
    return kept, False
