"""A user's data on every surface kept stores it: two members (Ann, Ben),
each with a private chat, both in one group, and Ann also under a second
agent; follow-ups, reminders, a queued exchange, zones and pairing. For the
erasure, export and retention tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.commitments.exchange import Exchange
from core.commitments.jobs import NewJob
from core.commitments.model import NewCommitment, Scope
from core.messages import ChatKind, Target
from core.reminders.model import NewReminder
from core.search.redact import Redactor
from core.store.backends import Backend, open_backend
from core.store.base import NewMessage, SearchScope
from tests.support.followups import store_rows

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
ANN, BEN = "111", "222"
PRIVATE = f"agent:main:telegram:private:{ANN}"
BEN_PRIVATE = f"agent:main:telegram:private:{BEN}"
GROUP = "agent:main:telegram:group:-500"
OTHER_AGENT = f"agent:side:telegram:private:{ANN}"


@dataclass
class Seeded:
    ann_group_message: int
    ben_group_message: int


async def session(b: Backend, key: str, chat_id: str, kind: ChatKind, agent: str = "main") -> None:
    await b.store.ensure_session(
        key, agent_id=agent, platform="telegram", chat_id=chat_id, chat_kind=kind,
        thread_id=None, now=NOW,
    )  # fmt: skip


async def exchange(b: Backend, key: str, sender: str, said: str, answer: str) -> int:
    asked = await b.store.add_message(NewMessage(key, "user", said, NOW, sender_id=sender))
    await b.store.add_message(NewMessage(key, "assistant", answer, NOW, in_reply_to=asked.id))
    return asked.id


def scope(key: str, chat_id: str, sender: str, kind: ChatKind, agent: str = "main") -> Scope:
    return Scope(agent, key, "telegram", chat_id, None, sender, chat_kind=kind)


async def follow_up(b: Backend, where: Scope, reason: str) -> None:
    new = NewCommitment(
        scope=where, kind="event_check_in", sensitivity="routine",
        source="inferred_user_context", reason=reason, suggested_text=f"How did {reason} go?",
        dedupe_key=reason, confidence=0.9, due_earliest=NOW + timedelta(hours=1),
        due_latest=NOW + timedelta(days=1), due_timezone="UTC", source_message_id=None,
        created_at=NOW,
    )  # fmt: skip
    await b.commitments.apply_extraction(where, [new], [], now=NOW)


async def reminder(b: Backend, key: str, chat_id: str, by: str, text: str) -> None:
    await b.reminders.add(
        NewReminder(
            agent_id=key.split(":")[1], session_key=key, target=Target("telegram", chat_id),
            created_by=by, text=text, kind="after", cron=None, timezone="UTC",
            next_fire_at=NOW + timedelta(hours=2), created_at=NOW,
        )
    )  # fmt: skip


async def seed(b: Backend) -> Seeded:
    await session(b, PRIVATE, ANN, "private")
    await session(b, BEN_PRIVATE, BEN, "private")
    await session(b, GROUP, "-500", "group")
    await session(b, OTHER_AGENT, ANN, "private", agent="side")
    await exchange(b, PRIVATE, ANN, "my zebracorn interview is tomorrow", "Good luck!")
    await exchange(b, PRIVATE, ANN, "I slept badly", "Sorry to hear")
    await exchange(b, BEN_PRIVATE, BEN, "ben's own zebracorn", "ok")
    ann_group = await exchange(b, GROUP, ANN, "zebracorn in the group", "noted")
    ben_group = await exchange(b, GROUP, BEN, "ben says zebracorn too", "noted too")
    await exchange(b, OTHER_AGENT, ANN, "told the other agent", "fine")
    await follow_up(b, scope(PRIVATE, ANN, ANN, "private"), "the interview")
    await follow_up(b, scope(GROUP, "-500", ANN, "group"), "the match")
    await follow_up(b, scope(GROUP, "-500", BEN, "group"), "ben's match")
    await follow_up(b, scope(OTHER_AGENT, ANN, ANN, "private", agent="side"), "elsewhere")
    await reminder(b, PRIVATE, ANN, ANN, "stretch")
    await reminder(b, GROUP, "-500", ANN, "ann's group reminder")
    await reminder(b, GROUP, "-500", BEN, "ben's group reminder")
    job = NewJob(scope(PRIVATE, ANN, ANN, "private"), Exchange(1, "queued words", "reply"))
    await b.extraction_jobs.enqueue(job, worker="w", now=NOW, lease_until=NOW)
    await b.user_zones.set_zone("telegram", ANN, "Europe/Paris", now=NOW)
    await b.user_zones.set_zone("telegram", BEN, "Asia/Tokyo", now=NOW)
    for user, code in ((ANN, "ANNCODE1"), (BEN, "BENCODE1")):
        await b.pairing.request(
            "telegram", user, None, code=code, now=NOW, expires_at=NOW + timedelta(hours=1),
            max_pending=10, notify_every=None,
        )  # fmt: skip
    assert await b.pairing.approve("ANNCODE1", now=NOW) is not None  # Ben's stays pending
    return Seeded(ann_group, ben_group)


async def texts(b: Backend) -> list[str]:
    return sorted(r[0] for r in await store_rows(b.store, "SELECT text FROM messages"))


async def found(b: Backend, word: str) -> set[str]:
    hits = await b.store.search(word, scope=SearchScope(), limit=50, redactor=Redactor())
    return {h.session_key for h in hits}


async def seeded_config(tmp_path: Path) -> Path:
    """A config whose SQLite database holds `seed`'s data, for the CLI tests."""
    url = f"sqlite:///{tmp_path}/kept.sqlite"
    async with open_backend(url) as backend:
        await seed(backend)
    path = tmp_path / "kept.json"
    path.write_text(json.dumps({"storage": {"url": url}, "agents": [{"id": "main"}]}))
    return path
