"""The one secret mask (core/secrets.py): URL passwords, secret-looking query
parameters, configured tokens and Telegram-shaped tokens, anywhere in a string."""

from __future__ import annotations

import io
import json
import logging

import pytest

from core.config.model import KeptConfig
from core.logs import event, log_handler
from core.secrets import mask_secrets, masked_url, remember, remember_values
from core.store.errors import masked_url as store_masked_url

PASSWORD = "pg-Pass-4711"
API_KEY = "sk-live-9f8e7d6c5b4a"
BOT_TOKEN = "7012345678:AAHk3-Zx9_qW2eRtYuIoPaSdFgHjKlZxCvB"


def test_a_url_password_is_masked_wherever_the_url_is() -> None:
    text = f"cannot open postgresql://kept:{PASSWORD}@db.internal:5432/kept: refused"
    assert mask_secrets(text) == "cannot open postgresql://kept:***@db.internal:5432/kept: refused"
    # Two URLs in one line, each masked.
    two = f"a=http://u:{PASSWORD}@h/x b=https://v:{PASSWORD}@g/y"
    assert mask_secrets(two) == "a=http://u:***@h/x b=https://v:***@g/y"
    # A port is not a password.
    assert mask_secrets("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"


@pytest.mark.parametrize(
    "name",
    ["password", "sslpassword", "api_key", "apikey", "token", "access_token", "X-Amz-Signature",
     "sig", "client_secret", "auth", "KEY"],
)  # fmt: skip
def test_a_query_parameter_named_like_a_secret_is_masked(name: str) -> None:
    url = f"https://llm.example/v1?model=m&{name}={PASSWORD}&x=1"
    assert mask_secrets(url) == f"https://llm.example/v1?model=m&{name}=***&x=1"


def test_ordinary_query_parameters_and_text_stay() -> None:
    text = "postgresql:///kept?host=/run/pg&sslmode=require&application_name=kept"
    assert mask_secrets(text) == text
    line = "telegram_message_stored session=agent:main:telegram:private:42 chars=12"
    assert mask_secrets(line) == line


def test_a_telegram_token_is_masked_even_before_any_config_is_known() -> None:
    url = f"https://api.telegram.org/bot{BOT_TOKEN}/getMe"
    assert mask_secrets(url) == "https://api.telegram.org/bot***/getMe"


def test_configured_secrets_are_masked_anywhere_once_remembered() -> None:
    secret = "dc-token-value-0123abcd"
    assert secret in mask_secrets(f"Authorization: Bot {secret}")
    config = KeptConfig.model_validate({"channels": {"discord": {"tokenEnv": "MY_DISCORD"}}})
    remember(config, {"MY_DISCORD": f" {secret}\n"})
    assert mask_secrets(f"Authorization: Bot {secret}, again {secret}") == (
        "Authorization: Bot ***, again ***"
    )


def test_short_values_are_not_masked() -> None:
    remember_values(["abc", "", None, "   "])
    assert mask_secrets("abc abc") == "abc abc"


def test_the_store_errors_masked_url_is_the_same_helper() -> None:
    url = f"postgresql://kept@db/kept?password={PASSWORD}"
    assert store_masked_url(url) == masked_url(url) == "postgresql://kept@db/kept?password=***"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_log_line_never_carries_a_secret(fmt: str) -> None:
    remember_values([API_KEY])
    stream = io.StringIO()
    logger = logging.getLogger(f"kept.test.secrets.{fmt}")
    logger.handlers[:] = [log_handler(fmt, stream)]  # type: ignore[arg-type]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    event(
        logger,
        logging.WARNING,
        "store_unreachable",
        url=f"postgresql://kept:{PASSWORD}@db/kept",
        error=f"401 for https://llm.example/v1?api_key={API_KEY}",
    )
    # A library record (not an event) with the token in a URL, and a traceback.
    logger.info("HTTP Request: POST https://api.telegram.org/bot%s/getUpdates", BOT_TOKEN)
    try:
        raise RuntimeError(f"bad key {API_KEY}")
    except RuntimeError:
        logger.exception("failed")
    out = stream.getvalue()
    for secret in (PASSWORD, API_KEY, BOT_TOKEN):
        assert secret not in out
    assert "postgresql://kept:***@db/kept" in out
    if fmt == "json":
        lines = [json.loads(row) for row in out.splitlines() if row.startswith("{")]
        assert lines[0]["event"] == "store_unreachable"
        assert lines[0]["url"] == "postgresql://kept:***@db/kept"


def test_an_event_record_is_masked_for_every_handler(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("kept.test.secrets.caplog")
    with caplog.at_level(logging.INFO, logger=logger.name):
        event(logger, logging.INFO, "x", url=f"https://u:{PASSWORD}@h/")
    [record] = caplog.records
    assert PASSWORD not in record.getMessage()
    assert record.kept_fields == {"url": "https://u:***@h/"}  # type: ignore[attr-defined]
