"""Telegram intake keeps a queue per chat only while a chat has updates in hand."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from telegram import Chat, Message, Update

from channels.telegram.intake import UpdateIntake
from core.clock import TestClock


def update(update_id: int, chat_id: int) -> Update:
    chat = Chat(id=chat_id, type="private")
    message = Message(message_id=update_id, date=datetime.now(UTC), chat=chat, text="hi")
    return Update(update_id=update_id, message=message)


async def test_a_chat_keeps_no_queue_once_its_updates_are_safe() -> None:
    release = asyncio.Event()
    done: list[int] = []

    async def process(upd: Update, mark_safe: object) -> None:
        await release.wait()
        done.append(upd.update_id)

    intake = UpdateIntake(process, TestClock())
    jobs = [intake.submit(update(i, chat_id=i % 100)) for i in range(300)]
    await asyncio.sleep(0)
    assert intake.busy_chats == 100  # one per chat, however many updates wait in it
    release.set()
    await asyncio.gather(*(job.safe for job in jobs if job is not None))
    await asyncio.sleep(0)
    assert len(done) == 300
    assert intake.busy_chats == 0
