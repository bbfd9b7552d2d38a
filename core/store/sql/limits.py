"""The limits' stores in SQL written once: rates (`rate_windows`), token
budgets (`token_budgets`) and the record of each call (`model_usage`).

Every decision is one write transaction whose first statement on a
subject's row is an upsert: on PostgreSQL it locks the row, so two workers
deciding about one user take turns and the second sees the first's count;
SQLite's writers exclude each other anyway. A decision that refuses
changes nothing (the transaction is rolled back), so a refused message or
call counts against no rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from core.limits.store import (
    ALLOWED,
    BudgetStore,
    CallUsage,
    Cap,
    Hold,
    RateRule,
    RateVerdict,
    Spent,
    Subject,
    UsageGrouping,
    UsageLine,
    UsageStore,
)
from core.store.dialect import Dialect
from core.store.sql.database import Database, Transaction

# A sender told they are over a rate is not told again for this long,
# however the window moves: a flood gets about one notice a minute.
NOTICE_GAP = timedelta(minutes=1)

_SUBJECT = "kind = ? AND platform = ? AND subject_id = ?"
_CONFLICT = "ON CONFLICT (kind, platform, subject_id)"


def _key(subject: Subject) -> tuple[str, str, str]:
    return subject.kind, subject.platform, subject.subject_id


def _rate_upsert(d: Dialect) -> str:
    # One statement a rule: a new subject's first message passes; a known
    # one's passes while its theoretical arrival time is at most the burst
    # ahead, which then moves on by one interval (SET reads the old row).
    # On PostgreSQL the conflicting row is locked until the transaction
    # ends: another worker's decision about the subject waits for this one.
    passes = "rate_windows.tat <= ?"
    moved = f"{d.greatest('rate_windows.tat', '?')} + ? * {d.millisecond}"
    return (
        "INSERT INTO rate_windows (kind, platform, subject_id, tat, allowed) "
        f"VALUES (?, ?, ?, ?, 1) {_CONFLICT} DO UPDATE SET "
        f"allowed = CASE WHEN {passes} THEN 1 ELSE 0 END, "
        f"tat = CASE WHEN {passes} THEN {moved} ELSE rate_windows.tat END "
        "RETURNING allowed, tat, noticed_until"
    )


async def take_rates(tx: Transaction, rules: Sequence[RateRule], now: datetime) -> RateVerdict:
    """One message against every rule, in `tx`: counted by every rule when
    each allows it, by none when one refuses."""
    d = tx.dialect
    sql = _rate_upsert(d)
    counted: list[tuple[RateRule, int]] = []
    for rule in rules:
        interval_ms = round(60_000 / rule.per_minute)
        burst = timedelta(milliseconds=60_000 - interval_ms)
        limit = d.time(now + burst)
        params = (*_key(rule.subject), d.time(now + timedelta(milliseconds=interval_ms)))
        row = await tx.fetchone(sql, (*params, limit, limit, d.time(now), interval_ms))
        assert row is not None
        if not row[0]:
            # An earlier rule counted this message: it is not sent, so uncount it.
            for earlier, ms in counted:
                await tx.execute(
                    f"UPDATE rate_windows SET tat = tat - ? * {d.millisecond} WHERE {_SUBJECT}",
                    (ms, *_key(earlier.subject)),
                )
            return await _refuse(tx, rule, d.from_time(row[1]) - burst, row[2], now)
        counted.append((rule, interval_ms))
    return ALLOWED


async def _refuse(
    tx: Transaction, rule: RateRule, retry_at: datetime, noticed: object, now: datetime
) -> RateVerdict:
    # Told under the row's lock: of two workers refusing at once, one tells.
    d = tx.dialect
    notify = noticed is None or d.from_time(noticed) <= now
    if notify:
        await tx.execute(
            f"UPDATE rate_windows SET noticed_until = ? WHERE {_SUBJECT}",
            (d.time(max(retry_at, now + NOTICE_GAP)), *_key(rule.subject)),
        )
    limit = "user_rate" if rule.subject.kind == "user" else "chat_rate"
    return RateVerdict(False, limit, retry_at, notify)


_HOLD = (
    "INSERT INTO token_budgets (kind, platform, subject_id, day, held) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (kind, platform, subject_id, day) "
    "DO UPDATE SET held = token_budgets.held + excluded.held "
    "WHERE token_budgets.spent + token_budgets.held < ? RETURNING spent"
)


async def take_hold(tx: Transaction, caps: Sequence[Cap], day: str, tokens: int) -> Hold | Spent:
    """In `tx`: `tokens` held on `day` for each capped subject when every one
    has spent + held below its cap, else Spent (the first cap reached) and
    nothing held. One statement a cap, which locks the subject's row (no row
    comes back when the cap is reached)."""
    held: list[Cap] = []
    for cap in caps:
        row = await tx.fetchone(_HOLD, (*_key(cap.subject), day, tokens, cap.tokens))
        if row is None:
            for earlier in held:
                await tx.execute(
                    f"UPDATE token_budgets SET held = held - ? WHERE {_SUBJECT} AND day = ?",
                    (tokens, *_key(earlier.subject), day),
                )
            spent = await tx.fetchone(
                f"SELECT spent FROM token_budgets WHERE {_SUBJECT} AND day = ?",
                (*_key(cap.subject), day),
            )
            return Spent(cap, int(spent[0]) if spent else 0)
        held.append(cap)
    return Hold(tuple(c.subject for c in caps), day, tokens)


class SqlBudgetStore(BudgetStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._d = db.dialect

    async def hold(self, caps: Sequence[Cap], day: str, tokens: int) -> Hold | Spent:
        return await self._db.transact(lambda tx: take_hold(tx, caps, day, tokens), durable=False)

    async def release(self, hold: Hold) -> None:
        async def work(tx: Transaction) -> None:
            for subject in hold.subjects:
                await tx.execute(
                    f"UPDATE token_budgets SET held = {self._less_held('held')} "
                    f"WHERE {_SUBJECT} AND day = ?",
                    (hold.tokens, hold.tokens, *_key(subject), hold.day),
                )

        await self._db.transact(work, durable=False)

    @staticmethod
    def _less_held(column: str) -> str:
        # Never below zero: a hold is given back once, but a day's row may
        # have been pruned and made again meanwhile.
        return f"CASE WHEN {column} > ? THEN {column} - ? ELSE 0 END"

    async def record(
        self, usage: CallUsage, subjects: Sequence[Subject], day: str, hold: Hold | None
    ) -> None:
        u = usage
        tokens = u.tokens_in + u.tokens_out
        held = set(hold.subjects) if hold is not None else set()
        give_back = hold.tokens if hold is not None else 0

        async def work(tx: Transaction) -> None:
            await tx.execute(
                "INSERT INTO model_usage (at, agent_id, role, model, platform, user_id, "
                "chat_id, shared, tokens_in, tokens_out, estimated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self._d.time(u.at), u.agent_id, u.role, u.model, u.platform, u.user_id,
                    u.chat_id, int(u.shared), u.tokens_in, u.tokens_out, int(u.estimated),
                ),
            )  # fmt: skip
            for subject in subjects:
                back = give_back if subject in held else 0
                less = self._less_held("token_budgets.held")
                await tx.execute(
                    "INSERT INTO token_budgets (kind, platform, subject_id, day, spent) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (kind, platform, subject_id, day) "
                    f"DO UPDATE SET spent = token_budgets.spent + excluded.spent, held = {less}",
                    (*_key(subject), day, tokens, back, back),
                )

        await self._db.transact(work, durable=False)

    async def first_notice(self, subject: Subject, day: str) -> bool:
        async def work(tx: Transaction) -> bool:
            row = await tx.fetchone(
                f"UPDATE token_budgets SET noticed = 1 WHERE {_SUBJECT} AND day = ? "
                "AND noticed = 0 RETURNING 1",
                (*_key(subject), day),
            )
            return row is not None

        return await self._db.transact(work, durable=False)

    async def spent(self, subjects: Sequence[Subject], day: str) -> dict[Subject, int]:
        found: dict[Subject, int] = {}
        for subject in dict.fromkeys(subjects):
            rows = await self._db.query(
                f"SELECT spent FROM token_budgets WHERE {_SUBJECT} AND day = ?",
                (*_key(subject), day),
            )
            if rows:
                found[subject] = int(rows[0][0])
        return found


_GROUP_KEYS: dict[UsageGrouping, str] = {
    "user": "coalesce(platform || ':' || user_id, '(no user)')",
    "chat": "coalesce(platform || ':' || chat_id, '(no chat)')",
    "agent": "agent_id",
    "role": "role",
    "model": "model",
}


class SqlUsageStore(UsageStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._d = db.dialect

    async def usage(self, since: datetime, by: UsageGrouping) -> list[UsageLine]:
        key = _GROUP_KEYS[by]
        rows = await self._db.query(
            f"SELECT {key}, model, count(*), sum(tokens_in), sum(tokens_out), sum(estimated) "
            f"FROM model_usage WHERE at >= ? GROUP BY {key}, model",
            (self._d.time(since),),
        )
        lines = _lines(rows)
        return sorted(lines, key=lambda x: (-(x.tokens_in + x.tokens_out), x.key))

    async def user_usage(self, platform: str, user_id: str, since: datetime) -> UsageLine:
        rows = await self._db.query(
            "SELECT platform || ':' || user_id, model, count(*), sum(tokens_in), "
            "sum(tokens_out), sum(estimated) FROM model_usage "
            "WHERE platform = ? AND user_id = ? AND at >= ? GROUP BY platform, user_id, model",
            (platform, user_id, self._d.time(since)),
        )
        lines = _lines(rows)
        return lines[0] if lines else UsageLine(f"{platform}:{user_id}", 0, 0, 0, 0)


def _lines(rows: Sequence[Sequence[object]]) -> list[UsageLine]:
    grouped: dict[str, list[Sequence[object]]] = {}
    for row in rows:
        grouped.setdefault(str(row[0]), []).append(row)
    lines = []
    for key, parts in grouped.items():
        by_model = tuple(sorted((str(p[1]), int(p[3]), int(p[4])) for p in parts))  # type: ignore[call-overload]
        lines.append(
            UsageLine(
                key,
                calls=sum(int(p[2]) for p in parts),  # type: ignore[call-overload]
                tokens_in=sum(m[1] for m in by_model),
                tokens_out=sum(m[2] for m in by_model),
                estimated_calls=sum(int(p[5]) for p in parts),  # type: ignore[call-overload]
                by_model=by_model,
            )
        )
    return lines
