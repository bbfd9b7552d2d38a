"""One wording per result, on every surface: the same command answered on
Telegram (the fake Bot API), Discord (the real CommandTree on dpytest),
`kept chat` and the operator's CLI says the same words. Surfaces differ only
as core/commands/wording.py's Style lets them: Discord shows ids in code
spans, and the CLI, which reaches every chat, leaves out "in this chat".
A surface that phrases a result its own way fails here."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import click
import discord
import pytest
from click.testing import CliRunner
from rich.console import Console

from bot.commitments_cmd import commitments_group
from bot.reminders_cmd import reminders_group
from channels.console.commands import ConsoleCommands, parse
from core.commands.registry import COMMANDS
from core.commitments.model import Scope
from core.commitments.visibility import Asker
from core.messages import Target, session_key
from tests.support.discord_dpytest import Responses, Rig, build_rig, capture_responses, slash
from tests.support.telegram_harness import TelegramHarness, scope, telegram_harness

TELEGRAM_CHAT = 42
CONSOLE_USER = "ann"
CONSOLE_KEY = session_key("main", Target("console", CONSOLE_USER), "private")
IN_THIS_CHAT = " in this chat"


@dataclass
class Surfaces:
    """Every surface on real services: Telegram's and `kept chat`'s on one
    database, which the CLI reads too; Discord's on the dpytest rig's."""

    tg: TelegramHarness
    rig: Rig
    answers: Responses
    console: ConsoleCommands
    config: Path

    async def chats(self, line: str, ids: dict[str, str] | None = None) -> dict[str, str]:
        """`line` typed on each chat surface, `ID` in it standing for that
        surface's own item (`ids`); each answer with that id written back as
        ID and Discord's code spans as plain text."""
        ids = ids or {}
        said = {
            "telegram": await self._telegram(line.replace("ID", ids.get("telegram", "ID"))),
            "discord": await self._discord(line.replace("ID", ids.get("discord", "ID"))),
            "kept chat": await self._kept_chat(line.replace("ID", ids.get("kept chat", "ID"))),
        }
        for surface, text in said.items():
            if surface in ids:
                text = text.replace(ids[surface], "ID")
            said[surface] = text.replace("`", "")
        return said

    async def cli(self, group: click.Group, *args: str) -> tuple[str, str]:
        """stdout and stderr of `kept <group> <args>`, run as a process runs
        it: on a thread of its own, with its own event loop."""
        runner = CliRunner()
        result = await asyncio.to_thread(
            runner.invoke, group, [*args, "--config", str(self.config)]
        )
        return result.stdout, result.stderr

    async def _telegram(self, line: str) -> str:
        before = len(self.tg.fake.sent)
        await self.tg.fake.push_message(line, chat_id=TELEGRAM_CHAT)
        await self.tg.fake.wait_for(lambda: len(self.tg.fake.sent) > before)
        return self.tg.fake.sent[before].text

    async def _discord(self, line: str) -> str:
        """The line as Discord's slash command (its place in the tree, its
        options by the registry's argument names), in the member's DM."""
        name, *words = line.removeprefix("/").split()
        command = COMMANDS.get(name)
        assert command is not None and command.discord, name
        arguments = command.parse(words)
        assert arguments is not None, line
        options = {k: v if isinstance(v, str) else " ".join(v) for k, v in arguments.items()}
        member = self.rig.member(0)
        dm = await member.create_dm()
        user: discord.abc.User = member._user  # type: ignore[attr-defined]
        await slash(self.rig.bot, " ".join(command.discord), channel=dm, user=user, options=options)
        _, data = self.answers.calls[-1]
        return str(data["content"])

    async def _kept_chat(self, line: str) -> str:
        parsed = parse(line)
        assert parsed is not None, line
        shown = io.StringIO()
        Console(file=shown, width=200, color_system=None).print(await self.console.run(parsed))
        return shown.getvalue().strip()


@pytest.fixture
async def surfaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Surfaces]:
    (tmp_path / "tg").mkdir()
    config = tmp_path / "kept.json"
    url = f"sqlite:///{tmp_path}/tg/kept.sqlite"
    config.write_text(json.dumps({"storage": {"url": url}}))
    answers = capture_responses(monkeypatch)
    rig = await build_rig(tmp_path / "dc")
    try:
        async with telegram_harness(tmp_path / "tg") as tg:
            await tg.start()
            asker = Asker("main", CONSOLE_KEY, "private", CONSOLE_USER)
            console = ConsoleCommands(tg.context(), lambda: asker)
            yield Surfaces(tg, rig, answers, console, config)
    finally:
        await rig.close()


def alike(said: dict[str, str]) -> str:
    """The one answer every chat surface gave."""
    assert len(set(said.values())) == 1, said
    return next(iter(said.values()))


def operators(chat_sentence: str) -> str:
    """The chats' sentence as the CLI, which reaches every chat, says it."""
    assert IN_THIS_CHAT in chat_sentence
    return chat_sentence.replace(IN_THIS_CHAT, "")


async def seeded(s: Surfaces) -> dict[str, str]:
    """An open follow-up on each chat surface, by surface."""
    telegram = await s.tg.seed(scope(TELEGRAM_CHAT))
    kept_chat = await s.tg.seed(
        Scope("main", CONSOLE_KEY, "console", CONSOLE_USER, None, CONSOLE_USER, chat_kind="private")
    )
    discord_one = await s.rig.seed(await s.rig.member(0).create_dm(), s.rig.member(0))
    return {"telegram": telegram.id, "discord": discord_one.id, "kept chat": kept_chat.id}


@pytest.mark.parametrize(
    ("command", "unknown", "group"),
    [
        ("dismiss", "cm_000000000000", commitments_group),
        ("cancel", "rm_000000000000", reminders_group),
    ],
)
async def test_not_found_is_worded_once(
    surfaces: Surfaces, command: str, unknown: str, group: click.Group
) -> None:
    said = alike(await surfaces.chats(f"/{command} {unknown}"))
    assert said == f"{unknown}: not found in this chat."
    out, err = await surfaces.cli(group, command, unknown)
    assert (out, err) == ("", f"kept: {operators(said)}\n")


async def test_done_and_nothing_changed_are_worded_once(surfaces: Surfaces) -> None:
    ids = await seeded(surfaces)
    done = alike(await surfaces.chats("/dismiss ID", ids))
    assert done == "Dismissed ID: I won't follow up on it."
    again = alike(await surfaces.chats("/dismiss ID", ids))
    assert again == "ID: nothing changed (already dismissed)."

    # The operator dismisses another of the database's, then Telegram's again.
    fresh = await surfaces.tg.seed(scope(TELEGRAM_CHAT), "Did the move go well?")
    out, err = await surfaces.cli(commitments_group, "dismiss", fresh.id)
    assert (out.replace(fresh.id, "ID"), err) == (f"{done}\n", "")
    out, err = await surfaces.cli(commitments_group, "dismiss", ids["telegram"])
    assert (out, err.replace(ids["telegram"], "ID")) == ("", f"kept: {again}\n")


async def test_an_empty_list_is_worded_once(surfaces: Surfaces) -> None:
    said = alike(await surfaces.chats("/commitments"))
    assert said == "No open follow-ups in this chat."
    out, err = await surfaces.cli(commitments_group)
    assert (out, err) == (f"{operators(said)} Use --all to include every status.\n", "")

    said = alike(await surfaces.chats("/reminders"))
    assert said == "No reminders in this chat."
    out, err = await surfaces.cli(reminders_group)
    assert (out, err) == (f"{operators(said)} Use --all to include finished ones.\n", "")
