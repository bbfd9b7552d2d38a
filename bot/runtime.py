"""Builds the running service from config: store, model client, conversation
manager, channel adapters and background services; starts and stops them."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import os
import signal
from collections.abc import Callable, Mapping
from pathlib import Path

from bot.http import HttpListener
from bot.metrics import MeteredSender, PrometheusMetrics
from bot.services import Services, build_services, open_storage, start_background
from channels.base import ChannelAdapter, ChannelStartError
from channels.context import ChannelContext, WebRoutes
from channels.router import AdapterRouter
from core.clock import Clock, SystemClock
from core.config.changes import (
    announce_restart_needed,
    announce_search_visibility,
    changed_keys,
    restart_only_changes,
)
from core.config.file import ConfigWatcher, config_source
from core.config.model import ConfigError, KeptConfig
from core.conversation.manager import ConversationManager
from core.errors import KeptError
from core.llm import LLMClient
from core.logs import event
from core.metrics import install, uninstall
from core.secrets import remember as remember_secrets
from core.store import Store
from core.store.errors import StoreUnavailable

log = logging.getLogger("kept.runtime")

AdapterFactory = Callable[["Runtime"], ChannelAdapter]


def channel_context(runtime: Runtime) -> ChannelContext:
    services = runtime.services
    assert services is not None, "start_core() first"
    return services_context(services, lambda: runtime.config, runtime.environ, web=runtime.http)


def services_context(
    services: Services,
    config: Callable[[], KeptConfig],
    environ: Mapping[str, str],
    *,
    web: WebRoutes | None = None,
) -> ChannelContext:
    """What an adapter gets of one worker's services (and, on PostgreSQL,
    of its backend's cross-worker parts)."""
    return ChannelContext(
        conversation=services.manager,
        store=services.backend.store,
        commitments=services.commitments,
        reminders=services.reminders,
        config=config,
        clock=services.clock,
        environ=environ,
        leadership=services.backend.session_guard,
        updates=services.backend.update_queue,
        worker=services.worker,
        app_state=services.backend.app_state,
        users=services.users,
        pairing=services.pairing,
        web=web,
        parked=services.backend.parked,
        start_over=services.start_over,
        privacy=services.privacy,
        followup_prefs=services.followup_prefs,
        spend=services.spend,
    )


def _discord(runtime: Runtime) -> ChannelAdapter:
    # Imported on use: discord.py is heavy, and `kept chat` never needs it.
    from channels.discord import DiscordAdapter

    return DiscordAdapter(channel_context(runtime))


def _telegram(runtime: Runtime) -> ChannelAdapter:
    from channels.telegram import TelegramAdapter

    return TelegramAdapter(channel_context(runtime))


# Platform name -> factory.
ADAPTER_FACTORIES: dict[str, AdapterFactory] = {"telegram": _telegram, "discord": _discord}

CHANNEL_HELP = (
    "no channel is enabled. Enable one with "
    "`kept config set channels.telegram.enabled true` (token in $TELEGRAM_BOT_TOKEN, "
    "or the variable named by channels.telegram.tokenEnv) or "
    "`kept config set channels.discord.enabled true` (token in $DISCORD_TOKEN, "
    "or channels.discord.tokenEnv). To talk to the bot in this terminal, run `kept chat`."
)


class StartupError(KeptError):
    """A start-up problem the operator must fix; the message says how."""


class Runtime:
    def __init__(
        self,
        config_path: Path,
        config: KeptConfig,
        *,
        clock: Clock | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config_path = config_path
        self.config = config
        self.clock = clock or SystemClock()
        self.environ = environ if environ is not None else os.environ
        remember_secrets(config, self.environ)  # masked in every log line from here on
        self.router = AdapterRouter()
        self.adapters: list[ChannelAdapter] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._store: Store | None = None
        self._llm: LLMClient | None = None
        self.services: Services | None = None
        self._background_started = False
        self.http: HttpListener | None = None
        self.metrics: PrometheusMetrics | None = None
        self._stopping = False

    @property
    def stop_grace(self) -> float:
        """shutdown.graceSeconds, read when the stop begins."""
        return self.config.shutdown.grace_seconds

    @property
    def store(self) -> Store:
        assert self._store is not None, "start_core() first"
        return self._store

    @property
    def manager(self) -> ConversationManager:
        assert self.services is not None, "start_core() first"
        return self.services.manager

    async def start_core(self) -> None:
        """The store, the model client and every service; no listener
        (`kept chat` runs beside `kept run` and must not take its port:
        `serve` starts the listener first)."""
        backend = open_storage(self.config.storage.url, clock=self.clock)
        await backend.open()
        self._store = backend.store
        self._llm = LLMClient(self.config.llm, environ=self.environ, clock=self.clock)
        self.services = build_services(
            backend=backend,
            llm=self._llm,
            sender=MeteredSender(self.router),
            config=lambda: self.config,
            clock=self.clock,
            platforms=lambda: self.router.platforms,
            admins=self.router,
            # Access is asked again just before every check-in and reminder.
            access=self.router,
        )
        watcher = ConfigWatcher(
            self.config_path,
            self.config,
            on_change=self._apply_config,
            clock=self.clock,
            environ=self.environ,
        )
        self._tasks.append(asyncio.create_task(watcher.run(), name="config-watcher"))

    async def start_http(self) -> None:
        """The listener of `http.listen` (read at start), before anything
        else, so /healthz answers and /readyz says what is still starting."""
        address = self.config.http.address()
        if address is None or self.http is not None:
            return
        self.metrics = PrometheusMetrics()
        listener = HttpListener(
            *address,
            readiness=self.readiness,
            metrics=self.metrics,
            refresh=self._refresh_metrics,
            clock=self.clock,
        )
        try:
            await listener.start()
        except OSError as exc:
            self.metrics = None
            why = exc.strerror or str(exc)
            raise StartupError(
                f"http.listen {self.config.http.listen}: cannot listen there ({why}); "
                "free the port or change http.listen"
            ) from None
        install(self.metrics)
        self.http = listener

    async def readiness(self) -> dict[str, str]:
        """/readyz: "ok" or why not, for the store, each enabled channel
        and the scheduler."""
        return await readiness_checks(self)

    async def _refresh_metrics(self) -> None:
        if self.metrics is not None:
            services = self.services
            await self.metrics.refresh(
                services.backend.commitments if services else None,
                services.extraction if services else None,
            )

    def _apply_config(self, new: KeptConfig) -> None:
        remember_secrets(new, self.environ)
        old = self.config
        before = {a.platform: a.access() for a in self.adapters}
        self.config = new
        if self._llm is not None:
            self._llm.update_config(new.llm)
        if self.services is not None:
            self.services.scheduler.wake(reset=True)
        changed = changed_keys(old, new)
        event(
            log, logging.INFO, "config_reloaded", path=self.config_path, changed=",".join(changed)
        )
        # The warnings a start gives, for what this reload widened.
        for adapter in self.adapters:
            adapter.announce_access(before=before[adapter.platform])
        announce_search_visibility(log, new, before=old)
        announce_restart_needed(log, restart_only_changes(old, new))

    def build_channel_adapters(self) -> list[ChannelAdapter]:
        enabled = [
            name for name in ("telegram", "discord") if getattr(self.config.channels, name).enabled
        ]
        if not enabled:
            raise StartupError(CHANNEL_HELP)
        adapters = []
        for name in enabled:
            factory = ADAPTER_FACTORIES.get(name)
            if factory is None:
                raise StartupError(
                    f"channels.{name}.enabled is true, but this build has no {name} adapter yet; "
                    f"set it to false or use `kept chat`"
                )
            adapters.append(factory(self))
        return adapters

    async def start_adapters(self, adapters: list[ChannelAdapter]) -> None:
        for adapter in adapters:
            try:
                await adapter.start()
            except ChannelStartError as exc:
                raise StartupError(f"{adapter.platform}: {exc}") from None
            self.router.add(adapter)
            self.adapters.append(adapter)
            event(log, logging.INFO, "channel_started", platform=adapter.platform)
        await self.manager.recover_unanswered(platforms=self.router.platforms)
        if self.services is not None and not self._background_started:
            self._background_started = True
            self._tasks.extend(start_background(self.services))
        elif self.services is not None:
            self.services.scheduler.wake(reset=True)

    async def stop(self) -> None:
        """Stop in the order that loses nothing: 1) the scheduler takes no
        new follow-ups or reminders, and its in-flight turn or sends get
        shutdown.graceSeconds to finish (after that they are cancelled, and a
        claim that had not reached `sending` is released); 2) the adapters
        stop (no new turns; they let theirs finish); 3) the rest of the
        running work ends, and the store closes, so no row is half-written.
        /readyz says "stopping" from the start; the listener closes last."""
        self._stopping = True
        if self.services is not None:
            await self.services.scheduler.stop(self.stop_grace)
        for adapter in reversed(self.adapters):
            try:
                await adapter.stop()
            except Exception as exc:
                event(
                    log,
                    logging.ERROR,
                    "channel_stop_failed",
                    platform=adapter.platform,
                    error=repr(exc),
                )
            self.router.remove(adapter.platform)
        self.adapters.clear()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self.services is not None:
            await self.services.manager.drain()
            await self.services.extraction.stop()
        if self._llm is not None:
            await self._llm.aclose()
        if self.services is not None:
            # The whole backend: the store and, on PostgreSQL, the session
            # guard's own connection.
            await self.services.backend.close()
            self._store = None
        elif self._store is not None:
            await self._store.close()
            self._store = None
        if self.http is not None:
            await self.http.stop()
            self.http = None
        if self.metrics is not None:
            uninstall(self.metrics)


# /readyz waits this long for the store before calling it unreachable.
STORE_CHECK_TIMEOUT = 2.0


async def readiness_checks(runtime: Runtime) -> dict[str, str]:
    """ "ok", or what is wrong, for each thing a ready worker needs."""
    if runtime._stopping:
        return {"process": "stopping"}
    checks: dict[str, str] = {}
    services = runtime.services
    if services is None:
        checks["store"] = "not open yet"
    else:
        try:
            async with asyncio.timeout(STORE_CHECK_TIMEOUT):
                await services.backend.store.schema_version()
            checks["store"] = "ok"
        except StoreUnavailable as exc:  # what happened, and what to do
            checks["store"] = str(exc)
        except Exception as exc:
            checks["store"] = f"unreachable: {type(exc).__name__}"
    for name in ("telegram", "discord"):
        if not getattr(runtime.config.channels, name).enabled:
            continue
        adapter = next((a for a in runtime.adapters if a.platform == name), None)
        connected = adapter is not None and getattr(adapter, "connected", True)
        checks[name] = "ok" if connected else "not connected"
    scheduler = next((t for t in runtime._tasks if t.get_name() == "scheduler"), None)
    if scheduler is None:
        checks["scheduler"] = "not started"
    else:
        checks["scheduler"] = "ok" if not scheduler.done() else "stopped"
    return checks


def startup_fields(runtime: Runtime) -> dict[str, str]:
    """What the operator must know about this process first: version, where
    the config came from, the storage backend (never its URL: it may hold a
    password), the enabled channels and each one's DM policy."""
    config = runtime.config
    try:
        version = importlib.metadata.version("kept-bot")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    enabled = [n for n in ("telegram", "discord") if getattr(config.channels, n).enabled]
    policies = [f"{name}:{_dm_policy(getattr(config.channels, name))}" for name in enabled]
    scheme = config.storage.url.partition(":")[0]
    try:
        source = config_source(runtime.config_path, runtime.environ)
    except ConfigError:  # an environment the config was not loaded from
        source = str(runtime.config_path)
    return {
        "version": version,
        "config": source,
        "storage": "postgresql" if scheme in ("postgresql", "postgres") else scheme,
        "channels": ",".join(enabled) or "none",
        "dm_policy": ",".join(policies) or "none",
    }


def _dm_policy(channel: object) -> str:
    # channels.<platform>.dmPolicy; before it existed, an empty allowFrom
    # answered anyone.
    policy = getattr(channel, "dm_policy", None)
    if policy is not None:
        return str(policy)
    return "allowlist" if getattr(channel, "allow_from", []) else "open"


async def serve(runtime: Runtime) -> None:
    """`kept run`: start everything, then wait for SIGINT/SIGTERM.

    Signal handlers go in first, so a signal during start-up still stops
    the process cleanly instead of killing it mid-write."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        event(log, logging.INFO, "starting", **startup_fields(runtime))
        announce_search_visibility(log, runtime.config)
        await runtime.start_http()
        await runtime.start_core()
        adapters = runtime.build_channel_adapters()
        await runtime.start_adapters(adapters)
        event(log, logging.INFO, "running", channels=",".join(sorted(runtime.router.platforms)))
        await stop.wait()
        event(log, logging.INFO, "stopping")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await runtime.stop()
