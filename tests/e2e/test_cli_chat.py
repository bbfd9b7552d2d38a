"""`kept chat` as a user runs it: a real subprocess, piped stdin, the real
openai SDK talking to a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from contextlib import closing
from pathlib import Path

import pytest

from core.conversation.manager import WITHDRAWN
from core.store.sqlite.driver import sqlite3
from tests.fakes.openai_server import FakeOpenAI, delay, error, hang, reply

# Each test starts `kept` as a subprocess: most of a second of interpreter
# start and imports.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def write_config(tmp_path: Path, base_url: str, timeout: float = 5) -> Path:
    config = {
        "storage": {"url": f"sqlite:///{tmp_path}/kept.sqlite"},
        "llm": {"baseUrl": base_url, "timeoutSeconds": timeout, "maxRetries": 0},
        "agents": [{"id": "main", "systemPrompt": "You are kept, under test."}],
        # Follow-ups are on by default; their extraction calls are not what
        # these tests count.
        "commitments": {"enabled": False},
    }
    path = tmp_path / "kept.json"
    path.write_text(json.dumps(config))
    return path


async def kept(
    *args: str, stdin: str = "", cwd: Path = ROOT, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-test-not-a-secret",
        "KEPT_CONFIG": "",
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=env,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout=30)
    except TimeoutError:
        # A process left running keeps its pipes open past this test's loop.
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def transcript(tmp_path: Path) -> list[tuple[str, str, str]]:
    # sqlite3's own context manager commits but does not close.
    with closing(sqlite3.connect(tmp_path / "kept.sqlite")) as db:
        return db.execute("SELECT role, kind, text FROM messages ORDER BY id").fetchall()


async def test_piped_chat_prints_replies_and_stores_transcript(tmp_path: Path):
    async with FakeOpenAI() as fake:
        config = write_config(tmp_path, fake.base_url)
        fake.push(reply("Good luck with the interview!"))
        code, out, err = await kept(
            "chat", "--config", str(config), "--user", "ann", stdin="I have an interview tomorrow\n"
        )
        assert code == 0, err
        assert out == "Good luck with the interview!\n"
        assert transcript(tmp_path) == [
            ("user", "text", "I have an interview tomorrow"),
            ("assistant", "text", "Good luck with the interview!"),
        ]
        request = fake.completions[0]
        assert (request.system_text or "").startswith("You are kept, under test.")
        assert request.bearer == "sk-test-not-a-secret"


async def test_think_block_never_reaches_output(tmp_path: Path):
    async with FakeOpenAI() as fake:
        config = write_config(tmp_path, fake.base_url)
        fake.push(reply("<think>the user seems nervous; plan reply</think>\nYou'll do great."))
        code, out, err = await kept("chat", "--config", str(config), stdin="nervous\n")
        assert code == 0, err
        assert out == "You'll do great.\n"
        assert "nervous; plan" not in out
        assert all("plan reply" not in row[2] for row in transcript(tmp_path))


async def test_model_timeout_gives_apology_and_loses_nothing(tmp_path: Path):
    async with FakeOpenAI() as fake:
        config = write_config(tmp_path, fake.base_url, timeout=0.3)
        fake.push(delay(2.0, reply("too late")))
        code, out, err = await kept(
            "chat", "--config", str(config), stdin="first question\nsecond question\n"
        )
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].startswith("Sorry")
        assert lines[1] == "echo: second question"
        assert "model_failed" in err and "timeout" in err
        rows = transcript(tmp_path)
        assert [r[2] for r in rows if r[0] == "user"] == ["first question", "second question"]
        assert rows[1][1] == "error"


async def test_chat_never_listens_on_http_listen_while_kept_run_holds_the_port(tmp_path: Path):
    # The Docker image sets http.listen; `kept run` in the same container
    # holds the port. Only `kept run` listens: `kept chat` answers as usual.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        async with FakeOpenAI() as fake:
            config = write_config(tmp_path, fake.base_url)
            doc = json.loads(config.read_text())
            doc["http"] = {"listen": f"127.0.0.1:{port}"}
            config.write_text(json.dumps(doc))
            fake.push(reply("hello from chat"))
            code, out, err = await kept("chat", "--config", str(config), stdin="hi\n")
    assert (code, out) == (0, "hello from chat\n"), err
    assert "Traceback" not in err and "http.listen" not in err


async def test_piped_chat_exits_nonzero_when_the_last_message_went_unanswered(tmp_path: Path):
    """A script piping into `kept chat` once got exit 0 after an apology."""
    async with FakeOpenAI() as fake:
        config = write_config(tmp_path, fake.base_url)
        fake.push(reply("Hello!"), error(500))
        code, out, err = await kept("chat", "--config", str(config), stdin="hi\nand now?\n")
        assert code == 1
        assert out.splitlines()[0] == "Hello!" and out.splitlines()[1].startswith("Sorry")
        assert err.endswith("kept: the last message was not answered; see the warning above\n")
        assert "model_failed" in err and "Traceback" not in err
        # A failure followed by an answer: the last message was answered.
        fake.push(error(500), reply("Back again."))
        code, out, err = await kept("chat", "--config", str(config), stdin="one\ntwo\n")
        assert code == 0, err
        assert out.splitlines()[-1] == "Back again."


async def test_chat_creates_config_from_example(tmp_path: Path):
    (tmp_path / "config").mkdir()
    example = json.loads((ROOT / "config" / "kept.example.json").read_text())
    (tmp_path / "config" / "kept.example.json").write_text(json.dumps(example))
    async with FakeOpenAI() as fake:
        env_config = tmp_path / "config" / "kept.json"
        # The example points at the default endpoint; the SDK honours OPENAI_BASE_URL.
        code, out, err = await kept(
            "chat", stdin="hi\n", cwd=tmp_path, env={"OPENAI_BASE_URL": fake.base_url}
        )
        assert code == 0, err
        assert env_config.exists()
        assert "created config/kept.json" in err
        assert out == "echo: hi\n"
        assert (tmp_path / "data" / "kept.sqlite").exists()


async def test_invalid_config_names_key_and_exits_nonzero(tmp_path: Path):
    path = tmp_path / "kept.json"
    path.write_text(json.dumps({"commitments": {"maxPerDay": "lots"}}))
    code, _out, err = await kept("chat", "--config", str(path), stdin="hi\n")
    assert code != 0
    assert "commitments.maxPerDay" in err
    assert "Traceback" not in err


async def test_run_without_channels_explains_and_fails(tmp_path: Path):
    async with FakeOpenAI() as fake:
        config = write_config(tmp_path, fake.base_url)
        code, _out, err = await kept("run", "--config", str(config))
    assert code != 0
    assert "channels.telegram.enabled" in err and "TELEGRAM_BOT_TOKEN" in err
    assert "kept chat" in err
    assert "Traceback" not in err


async def _stderr_until(proc: asyncio.subprocess.Process, needle: str) -> str:
    assert proc.stderr is not None
    seen = ""
    while needle not in seen:
        line = await asyncio.wait_for(proc.stderr.readline(), timeout=10)
        assert line, f"stderr ended before {needle!r}: {seen}"
        seen += line.decode()
    return seen


async def test_ctrl_c_cancels_the_answer_and_ctrl_c_twice_leaves_cleanly(tmp_path: Path):
    """The real signal path: SIGINT while the model holds the answer cancels
    that answer only; two at the prompt end the process with code 0."""
    async with FakeOpenAI() as fake:
        config = write_config(tmp_path, fake.base_url)
        fake.push(hang())
        env = {
            **os.environ,
            "OPENAI_API_KEY": "sk-test-not-a-secret",
            "KEPT_CONFIG": "",
            "PYTHONPATH": str(ROOT),
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "chat", "--config", str(config), "--user", "ann",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=env,
        )  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(b"what should I pack?\n")
            await proc.stdin.drain()
            await fake.wait_for_completions(1, within=15)
            proc.send_signal(signal.SIGINT)
            await _stderr_until(proc, "answer cancelled")

            proc.stdin.write(b"never mind\n")
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=10)
            assert line == b"echo: never mind\n"

            proc.send_signal(signal.SIGINT)
            await _stderr_until(proc, "Ctrl-C again")
            proc.send_signal(signal.SIGINT)
            code = await asyncio.wait_for(proc.wait(), timeout=10)
            rest = await proc.stderr.read() if proc.stderr else b""
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert code == 0
        assert b"Traceback" not in rest
        assert [r[2] for r in transcript(tmp_path) if r[0] == "user"] == [
            "what should I pack?",
            "never mind",
        ]
        assert [r[1:] for r in transcript(tmp_path) if r[0] == "assistant"] == [
            ("error", WITHDRAWN),
            ("text", "echo: never mind"),
        ]
        # The cancelled message was never asked again.
        assert [r.last_user_text for r in fake.completions] == [
            "what should I pack?",
            "never mind",
        ]


async def test_new_leaves_the_earlier_messages_out_of_the_next_request(tmp_path: Path):
    async with FakeOpenAI() as fake:
        config = write_config(tmp_path, fake.base_url)
        fake.push(reply("Noted: zebra."), reply("It was zebra."), reply("Hello again!"))
        lines = "my code word is zebra\nwhat was it?\n/new\nwhat was it?\n"
        code, out, err = await kept("chat", "--config", str(config), stdin=lines)
        assert code == 0, err
        assert "Started over" in out and out.rstrip().endswith("Hello again!")
        before, after = fake.completions[1], fake.completions[2]
        said = [m.get("content") for m in before.messages if m["role"] != "system"]
        assert said == ["my code word is zebra", "Noted: zebra.", "what was it?"]  # control
        assert [m.get("content") for m in after.messages if m["role"] != "system"] == [
            "what was it?"
        ]
        # Nothing was erased: the transcript holds both conversations.
        assert [r[2] for r in transcript(tmp_path) if r[0] == "user"] == [
            "my code word is zebra",
            "what was it?",
            "what was it?",
        ]
