"""The config file's schema: pydantic models, camelCase in JSON, snake_case in Python.

Unknown keys are errors (extra="forbid"); every model validates its own values,
so a bad file is reported by key path instead of failing later at run time.
"""

from __future__ import annotations

import re
from datetime import time
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pytimeparse2
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from core.config.errors import ConfigError, KeyedValueError, describe_errors, json_type


class Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_assignment=True,
    )


def parse_duration(value: str) -> float:
    """Seconds in a duration such as "2s", "30m", "1h", "1d" or "0"."""
    text = value.strip()
    if text == "0":
        return 0.0
    seconds = pytimeparse2.parse(text)
    if seconds is None or seconds < 0:
        raise ValueError(f"not a duration: {value!r} (use forms like '2s', '30m', '1h', '0')")
    return float(seconds)


def _check_timezone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"unknown time zone {name!r} (use an IANA name like 'Europe/Paris')"
        ) from exc
    return name


_CLOCK_TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$|^24:00$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_env_name(name: str) -> str:
    # Pasting the token itself here is the classic mistake; the message must
    # not echo the value, or the secret ends up in logs and terminals.
    if not _ENV_NAME.match(name):
        raise ValueError(
            "must be the NAME of an environment variable (letters, digits, _), "
            "not the secret itself"
        )
    return name


def _check_http_url(url: str | None) -> str | None:
    if url is not None and not url.startswith(("http://", "https://")):
        raise ValueError(f"expected an http:// or https:// URL, got {url!r}")
    return url


EnvName = Annotated[str, AfterValidator(_check_env_name)]
HttpUrl = Annotated[str | None, AfterValidator(_check_http_url)]


# A retention shorter than this could erase a message while its turn is
# still being answered (the reply points at it), or a follow-up whose
# buttons were just sent.
MIN_RETENTION_SECONDS = 86_400


def _check_retention(value: str | None) -> str | None:
    if value is None:
        return None
    forms = "use forms like '90d', '52w'; null keeps forever"
    try:
        seconds = parse_duration(value)
    except ValueError:
        raise ValueError(f"not a duration: {value!r} ({forms})") from None
    if seconds < MIN_RETENTION_SECONDS:
        raise ValueError(f"{value!r} is shorter than a day ({forms})")
    return value


Retention = Annotated[str | None, AfterValidator(_check_retention)]


class RetentionConfig(Model):
    """How long rows stay before the background pass erases them
    (core/privacy/retention.py); read at every pass."""

    # Messages older than this (by their time), with their index rows and
    # the exchanges queued from them; None keeps them forever.
    messages: Retention = None
    # Follow-ups and reminders that ended (sent, dismissed, resolved,
    # expired, failed; done, cancelled), this long after they ended.
    closed: Retention = "90d"

    @property
    def messages_seconds(self) -> float | None:
        return None if self.messages is None else parse_duration(self.messages)

    @property
    def closed_seconds(self) -> float | None:
        return None if self.closed is None else parse_duration(self.closed)


class StorageConfig(Model):
    url: str = "sqlite:///data/kept.sqlite"
    # SQLite only (a process on PostgreSQL is never pinned); read at start
    # (kept run, kept chat). Why, and what it gives up: bot/cpu.py;
    # `bench/search.py --no-pin` measures the difference.
    pin_cpu: bool = True
    retention: RetentionConfig = RetentionConfig()

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if v.startswith(("postgresql://", "postgres://")):
            return v
        if not v.startswith("sqlite:///"):
            raise ValueError(
                "only sqlite:///relative/path, sqlite:////absolute/path or "
                "postgresql://user@host/database is supported"
            )
        if len(v) == len("sqlite:///"):
            raise ValueError("the sqlite URL names no file")
        return v


# A required string: "" would only fail later, at the first call that uses it.
NonEmpty = Annotated[str, Field(min_length=1)]


class ModelsConfig(Model):
    chat: NonEmpty = "gpt-4.1-mini"
    extraction: NonEmpty | None = None
    heartbeat: NonEmpty | None = None


# An output cap below this leaves no room for a sentence, let alone JSON.
MIN_OUTPUT_TOKENS = 16
OutputCap = Annotated[int, Field(ge=MIN_OUTPUT_TOKENS, le=1_000_000)]


class OutputCapsConfig(Model):
    """The most tokens a call of each role may write (sent with every call
    as `max_tokens`, or `max_completion_tokens` where the endpoint wants
    it: core/llm.py). A reply cut there says so; an extraction answer cut
    there is an invalid answer."""

    chat: OutputCap = 1024
    extraction: OutputCap = 512
    heartbeat: OutputCap = 256


class PriceConfig(Model):
    """What one model costs, in USD per 1 M tokens (for `kept usage`)."""

    input: Annotated[float, Field(ge=0)]
    output: Annotated[float, Field(ge=0)]


class LlmConfig(Model):
    base_url: HttpUrl = None
    api_key_env: EnvName = "OPENAI_API_KEY"
    timeout_seconds: Annotated[float, Field(gt=0, le=600)] = 60
    max_retries: Annotated[int, Field(ge=0, le=10)] = 2
    models: ModelsConfig = ModelsConfig()
    max_output_tokens: OutputCapsConfig = OutputCapsConfig()
    # Model name -> price; a model without one is counted in tokens only.
    prices: dict[NonEmpty, PriceConfig] = {}

    def output_cap(self, role: Literal["chat", "extraction", "heartbeat"]) -> int:
        return int(getattr(self.max_output_tokens, role))

    def model_for(self, role: Literal["chat", "extraction", "heartbeat"]) -> str:
        if role == "extraction" and self.models.extraction:
            return self.models.extraction
        if role == "heartbeat" and self.models.heartbeat:
            return self.models.heartbeat
        return self.models.chat


class ActiveHours(Model):
    start: str
    end: str
    timezone: str | None = None

    @field_validator("start", "end")
    @classmethod
    def _hhmm(cls, v: str) -> str:
        if not _CLOCK_TIME.match(v):
            raise ValueError(f"expected HH:MM between 00:00 and 24:00, got {v!r}")
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str | None) -> str | None:
        return None if v is None else _check_timezone(v)

    @model_validator(mode="after")
    def _window(self) -> ActiveHours:
        # "24:00" only makes sense as an exclusive end (start_time() would
        # crash on it), and start == end is ambiguous: empty or all day?
        if self.start == "24:00":
            raise KeyedValueError([(("start",), "24:00 is only allowed as the end")])
        if self.start == self.end:
            raise KeyedValueError(
                [(("end",), "equals start; set activeHours to null to be active all day")]
            )
        return self

    def start_time(self) -> time:
        return _to_time(self.start)

    def end_time(self) -> time | None:
        """None means midnight at the end of the day ("24:00")."""
        return None if self.end == "24:00" else _to_time(self.end)


def _to_time(hhmm: str) -> time:
    h, m = hhmm.split(":")
    return time(int(h), int(m))


# Check-ins wait for the day: the same default whether the agent comes from
# the file, the environment (KEPT_AGENTS) or nowhere. null: always active.
DEFAULT_ACTIVE_HOURS = ActiveHours(start="08:00", end="22:00")


class HeartbeatConfig(Model):
    every: str = "30m"
    target: Literal["origin", "none"] = "origin"
    active_hours: ActiveHours | None = DEFAULT_ACTIVE_HOURS

    @field_validator("every")
    @classmethod
    def _every(cls, v: str) -> str:
        parse_duration(v)
        return v

    @property
    def every_seconds(self) -> float:
        return parse_duration(self.every)


class AgentConfig(Model):
    id: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")] = "main"
    system_prompt: str = "You are a helpful assistant."
    timezone: str = "UTC"
    heartbeat: HeartbeatConfig = HeartbeatConfig()
    max_tool_rounds: Annotated[int, Field(ge=0, le=20)] = 4
    history_chars: Annotated[int, Field(ge=500, le=2_000_000)] = 24_000

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        return _check_timezone(v)


def _id_to_str(value: Any) -> Any:
    # Platform ids are numbers; people paste them unquoted. Bools are not ids.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


# User/guild ids or @usernames, numbers accepted and kept as strings.
IdList = list[Annotated[str, BeforeValidator(_id_to_str)]]


DmPolicy = Literal["pairing", "allowlist", "open"]
GroupPolicy = Literal["allowlist", "open"]


def _group_ids(groups: list[str]) -> set[str]:
    return {g.strip() for g in groups if g.strip()}


# Who a platform's bot answers (channels/base.py decides, on every message).
# Direct messages follow `dmPolicy`: `pairing` (an unknown user gets a
# one-time code for the operator to approve), `allowlist` (only `allowFrom`)
# or `open` (anyone). Groups are answered only when listed in `groups`
# (Telegram chat ids, Discord server ids), or any with `groupPolicy: open`;
# in a listed group every member is served. Both platforms' models carry the
# same four keys (read through ChannelAccess below).


class DiscordConfig(Model):
    enabled: bool = False
    token_env: EnvName = "DISCORD_TOKEN"
    agent: str = "main"
    dm_policy: DmPolicy = "pairing"
    allow_from: IdList = []
    group_policy: GroupPolicy = "allowlist"
    groups: IdList = []  # server ids
    dev_guild_id: NonEmpty | None = None
    # The old name of `groups`, still read (with a warning at start).
    allow_guilds: IdList = []
    # The REST root used instead of https://discord.com (requests go to
    # <apiBaseUrl>/api/v10/...), e.g. a REST proxy such as nirn-proxy; the
    # gateway URL then comes from its /gateway/bot answer. None: Discord's.
    api_base_url: HttpUrl = None
    # Several workers split Discord's gateway: each runs `shardIds` of
    # `shardCount` shards (a server's messages arrive on one shard, DMs on
    # shard 0). None: this process runs every shard itself.
    shard_count: Annotated[int, Field(ge=1)] | None = None
    shard_ids: list[Annotated[int, Field(ge=0)]] | None = None
    # Message Content is a privileged intent (a bot in 100 or more servers
    # needs Discord's approval for it). Without it DMs and messages that
    # mention the bot still carry their text; only a reply to the bot whose
    # ping was switched off arrives empty, and is ignored. True: request it
    # (enable it in the developer portal too) and answer such replies. Read
    # at start.
    message_content_intent: bool = False

    @model_validator(mode="after")
    def _shards(self) -> DiscordConfig:
        ids, count = self.shard_ids, self.shard_count
        if ids is None:
            return self
        problem: str | None = None
        if count is None:
            problem = "needs shardCount (the total number of shards) beside it"
        elif not ids:
            problem = "is empty: name at least one shard, or leave it out"
        elif too_big := sorted(i for i in ids if i >= count):
            problem = f"{too_big} must be below shardCount (shards are 0 to {count - 1})"
        elif len(set(ids)) != len(ids):
            problem = "lists a shard twice"
        if problem is not None:
            raise KeyedValueError([(("shardIds",), problem)])
        return self

    def group_ids(self) -> set[str]:
        """The listed servers, the old `allowGuilds` included."""
        return _group_ids(self.groups) | _group_ids(self.allow_guilds)

    def renamed_keys(self) -> list[tuple[str, str]]:
        """(old key, new key) for each old key this config still uses."""
        return [("allowGuilds", "groups")] if self.allow_guilds else []

    def runs_shard(self, shard: int) -> bool:
        """Whether this worker runs `shard` (always, when not sharded)."""
        if self.shard_count is None:
            return True
        return self.shard_ids is None or shard in self.shard_ids


class TelegramWebhookConfig(Model):
    """Webhook mode: Telegram POSTs updates to `url`, which must reach the
    server this process opens on listenHost:port (usually via a proxy that
    terminates TLS). The path of `url` is the path served."""

    url: str
    listen_host: NonEmpty = "0.0.0.0"
    port: Annotated[int, Field(ge=1, le=65535)] = 8443
    # The shared secret Telegram echoes in X-Telegram-Bot-Api-Secret-Token
    # comes from the environment like every other secret: a value written in
    # the file would be printed by `kept config show`.
    secret_token_env: EnvName = "TELEGRAM_WEBHOOK_SECRET"

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"expected an https:// URL Telegram can reach, got {v!r}")
        return v


class TelegramConfig(Model):
    enabled: bool = False
    token_env: EnvName = "TELEGRAM_BOT_TOKEN"
    agent: str = "main"
    base_url: HttpUrl = None
    dm_policy: DmPolicy = "pairing"
    allow_from: IdList = []
    group_policy: GroupPolicy = "allowlist"
    groups: IdList = []  # chat ids
    # None: long polling (the default).
    webhook: TelegramWebhookConfig | None = None

    def group_ids(self) -> set[str]:
        """The listed groups."""
        return _group_ids(self.groups)

    def renamed_keys(self) -> list[tuple[str, str]]:
        """(old key, new key) for each old key this config still uses."""
        return []


# What channels/access.py reads of a platform's settings.
ChannelAccess = TelegramConfig | DiscordConfig


class ChannelsConfig(Model):
    discord: DiscordConfig = DiscordConfig()
    telegram: TelegramConfig = TelegramConfig()


class CommitmentsConfig(Model):
    # On by default, in the code (an environment-only deployment has them)
    # as in the example: following up is what kept is for.
    enabled: bool = True
    max_per_day: Annotated[int, Field(ge=0, le=100)] = 3
    # Skip the extraction call for exchanges with no time, event, wellbeing
    # or promise cue (core/commitments/prefilter.py); `kept eval extraction`
    # reports what it saves and the recall it loses.
    prefilter: bool = True


def _check_regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from exc
    return pattern


PerMinute = Annotated[int, Field(ge=1, le=100_000)]
TokensPerDay = Annotated[int, Field(ge=1)]


class PerUserLimits(Model):
    """What one user may do (a user is a platform account: the same cap in
    every chat and under every agent). null: no limit."""

    # Up to this many at once, then one every 60/N seconds (core/limits/admission.py).
    messages_per_minute: PerMinute | None = 20
    # Tokens in + out of every model call made for the user in a UTC day.
    tokens_per_day: TokensPerDay | None = None
    # Reminders waiting to fire (one-off and repeating) the user set.
    active_reminders: Annotated[int, Field(ge=1, le=100_000)] | None = 50


class PerChatLimits(Model):
    """What one group (a shared chat) may do, all its members together.
    A private chat is its user's: only `perUser` applies there."""

    messages_per_minute: PerMinute | None = 60
    tokens_per_day: TokensPerDay | None = None


class LimitsConfig(Model):
    """Rates and token budgets (core/limits/), kept in the database so every
    worker counts against the same numbers; read on every message and call."""

    per_user: PerUserLimits = PerUserLimits()
    per_chat: PerChatLimits = PerChatLimits()
    # The whole bot's tokens in a UTC day, every user and role together.
    tokens_per_day: TokensPerDay | None = None


# A repeating reminder more often than this is refused (a cron that fires
# every minute is a flood the user set up once).
MIN_REPEAT_SECONDS = 60


def _check_min_interval(value: str) -> str:
    seconds = parse_duration(value)
    if seconds < MIN_REPEAT_SECONDS:
        raise ValueError(f"{value!r} is shorter than a minute (use forms like '5m', '1h')")
    return value


class RemindersConfig(Model):
    # The shortest gap between two firings of a repeating reminder.
    min_interval: Annotated[str, AfterValidator(_check_min_interval)] = "5m"

    @property
    def min_interval_seconds(self) -> float:
        return parse_duration(self.min_interval)


class SearchConfig(Model):
    visibility: Literal["self", "agent", "all"] = "self"
    # Extra secret patterns masked in search snippets, on top of the built-in list.
    redact_patterns: list[Annotated[str, AfterValidator(_check_regex)]] = []


class SessionsConfig(Model):
    search: SearchConfig = SearchConfig()


class ShutdownConfig(Model):
    # Seconds in-flight work (a heartbeat turn, a reminder send, a chat
    # turn) may take to finish on stop before it is cancelled; keep a
    # service manager's stop timeout longer than this.
    grace_seconds: Annotated[float, Field(ge=0, le=600)] = 10


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


class LoggingConfig(Model):
    # Read at start (kept run); `kept run -v` forces debug.
    level: Annotated[Literal["debug", "info", "warning", "error"], BeforeValidator(_lower)] = "info"
    # text: `time LEVEL logger event k=v ...`; json: one object per line with
    # the event's fields, for a log shipper.
    format: Annotated[Literal["text", "json"], BeforeValidator(_lower)] = "text"


def _check_listen(value: str | None) -> str | None:
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(
            f"expected host:port such as '127.0.0.1:8080' (port 1-65535), got {value!r}"
        )
    return value


class HttpConfig(Model):
    # "host:port" of the listener for /healthz, /readyz and /metrics
    # (bot/http.py); None: no listener. Read at start.
    listen: Annotated[str | None, AfterValidator(_check_listen)] = None

    def address(self) -> tuple[str, int] | None:
        """(host, port) to bind, None when off; "[::1]:8080" binds ::1."""
        if self.listen is None:
            return None
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


class KeptConfig(Model):
    storage: StorageConfig = StorageConfig()
    llm: LlmConfig = LlmConfig()
    agents: Annotated[list[AgentConfig], Field(min_length=1)] = [AgentConfig()]
    channels: ChannelsConfig = ChannelsConfig()
    commitments: CommitmentsConfig = CommitmentsConfig()
    reminders: RemindersConfig = RemindersConfig()
    limits: LimitsConfig = LimitsConfig()
    sessions: SessionsConfig = SessionsConfig()
    shutdown: ShutdownConfig = ShutdownConfig()
    logging: LoggingConfig = LoggingConfig()
    http: HttpConfig = HttpConfig()

    @model_validator(mode="after")
    def _agents_referenced_exist(self) -> KeptConfig:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        ids = [a.id for a in self.agents]
        for index, agent_id in enumerate(ids):
            if agent_id in ids[:index]:
                problems.append((("agents", index, "id"), f"duplicate agent id {agent_id!r}"))
        for name in ("discord", "telegram"):
            channel = getattr(self.channels, name)
            if channel.agent not in ids:
                problems.append(
                    (
                        ("channels", name, "agent"),
                        f"no agent with id {channel.agent!r} (agents: {', '.join(ids)})",
                    )
                )
        if problems:
            raise KeyedValueError(problems)
        return self

    def find_agent(self, agent_id: str) -> AgentConfig | None:
        """The agent, or None when the config no longer has it."""
        return next((a for a in self.agents if a.id == agent_id), None)

    def agent_or_default(self, agent_id: str) -> AgentConfig:
        """The agent, or one with default settings when it was removed from
        the config while its sessions live on: their messages are still
        answered (and listed) rather than dropped."""
        return self.find_agent(agent_id) or AgentConfig(id=agent_id)


def validate_document(data: Any, source: str) -> KeptConfig:
    """Validate parsed JSON; raises ConfigError listing every problem."""
    if not isinstance(data, dict):
        raise ConfigError([f"{source}: the top level must be a JSON object, got {json_type(data)}"])
    try:
        # by_name=False: the file speaks camelCase only; a snake_case key is
        # an unknown key rather than a silent second spelling.
        return KeptConfig.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise ConfigError(
            [f"{source}: {line}" for line in describe_errors(exc, KeptConfig)]
        ) from None
