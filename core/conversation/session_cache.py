"""The bounded cache of session records the conversation manager keeps,
so a turn does not read its session row every time."""

from __future__ import annotations

from collections import OrderedDict

from core.store.base import SessionRecord

# Sessions whose record is kept between turns (about 1 KB each): a chat seen
# lately skips the session upsert; one idle longer is looked up again.
SESSION_CACHE_SIZE = 10_000


class SessionCache:
    """The `size` most recently used session records, by key. A long-running
    process sees far more chats than are active at once, so the least
    recently used record is dropped rather than kept until restart."""

    def __init__(self, size: int = SESSION_CACHE_SIZE) -> None:
        self._size = max(1, size)
        self._records: OrderedDict[str, SessionRecord] = OrderedDict()

    def get(self, key: str) -> SessionRecord | None:
        record = self._records.get(key)
        if record is not None:
            self._records.move_to_end(key)
        return record

    def put(self, record: SessionRecord) -> None:
        self._records[record.key] = record
        self._records.move_to_end(record.key)
        if len(self._records) > self._size:
            self._records.popitem(last=False)

    def __contains__(self, key: str) -> bool:
        return key in self._records

    def __len__(self) -> int:
        return len(self._records)
