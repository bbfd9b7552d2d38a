"""Secrets masked out of anything kept prints: `kept config show`, `kept doctor`,
log lines and error lines all pass their text through `mask_secrets`.

Three kinds of secret are masked wherever they appear in a string:
- the password of a URL's userinfo (`postgresql://kept:***@db/kept`);
- the value of a query parameter whose name suggests a secret
  (`?password=***`, `&api_key=***`, `&X-Amz-Signature=***`);
- the value of every configured secret (the variables the config names in
  `llm.apiKeyEnv`, `channels.*.tokenEnv`, `webhook.secretTokenEnv`), once a
  config and its environment have been `remember`ed, and anything shaped
  like a Telegram bot token, so a webhook URL or a Bot API URL holding the
  token shows `bot***`.

The remembered values are process-wide on purpose: a log formatter has no
config to ask, and a secret seen once stays masked for the process's life.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only a type here: the config package itself masks with this module
    from core.config.model import KeptConfig

MASK = "***"

# scheme://user:password@ - a password in a URL cannot hold "@" or "/" unencoded.
_USERINFO = re.compile(r"([A-Za-z][\w+.-]*://[^\s:/@'\"]*):[^\s@/'\"]+@")

# A query parameter (after ? & or ;) whose name holds one of these words.
_SECRET_WORDS = (
    "pass",
    "pwd",
    "token",
    "secret",
    "key",
    "signature",
    "sig",
    "auth",
    "credential",
    "cookie",
)
_SECRET_PARAM = re.compile(
    r"([?&;][^\s=&#?;'\"]*(?:" + "|".join(_SECRET_WORDS) + r")[^\s=&#?;'\"]*=)[^\s&#;'\"]+",
    re.IGNORECASE,
)

# A Telegram bot token: the bot's numeric id, a colon, 35 url-safe characters.
_TELEGRAM_TOKEN = re.compile(r"(?<!\d)\d{5,}:[A-Za-z0-9_-]{30,}")

# A configured value shorter than this is not masked: it would garble
# ordinary text, and no real key or token is that short.
MIN_SECRET_LENGTH = 6

_lock = threading.Lock()
_known: set[str] = set()
_known_pattern: re.Pattern[str] | None = None


def secret_env_names(config: KeptConfig) -> list[str]:
    """The environment variables `config` reads secrets from."""
    names = [
        config.llm.api_key_env,
        config.channels.telegram.token_env,
        config.channels.discord.token_env,
    ]
    if config.channels.telegram.webhook is not None:
        names.append(config.channels.telegram.webhook.secret_token_env)
    return names


def remember(config: KeptConfig, environ: Mapping[str, str]) -> None:
    """Mask, from now on, the values of the secrets `config` names."""
    remember_values(environ.get(name, "") for name in secret_env_names(config))


def remember_values(values: Iterable[str | None]) -> None:
    """Mask these values (stripped; blank and too short ones are skipped)."""
    global _known_pattern
    fresh = {v.strip() for v in values if v and len(v.strip()) >= MIN_SECRET_LENGTH}
    with _lock:
        if fresh <= _known:
            return
        _known.update(fresh)
        # Longest first: a secret that contains another is masked whole.
        ordered = sorted(_known, key=len, reverse=True)
        _known_pattern = re.compile("|".join(re.escape(v) for v in ordered))


def mask_secrets(text: str) -> str:
    """`text` fit for a terminal or a log line: every secret in it masked."""
    pattern = _known_pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    text = _TELEGRAM_TOKEN.sub(MASK, text)
    if "://" in text:
        text = _USERINFO.sub(r"\1:" + MASK + "@", text)
    if "=" in text:
        text = _SECRET_PARAM.sub(r"\1" + MASK, text)
    return text


def masked_url(url: str) -> str:
    """A URL fit for a message or a log line (see mask_secrets)."""
    return mask_secrets(url)
