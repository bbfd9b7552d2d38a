"""The composition root: opens the configured storage backend and builds
core's services on it and one model client.

Kept apart from the runtime so that the wiring — which service hears about
which event — reads in one place, top to bottom. The one caller of
`open_backend`: features see only their store ports."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass

from core.clock import Clock
from core.commands.times import agent_timezone
from core.commands.wording import reminder_refused
from core.commitments.extraction import ExtractionWorker
from core.commitments.service import CommitmentService
from core.config.model import KeptConfig
from core.conversation.manager import ConversationManager
from core.conversation.recovery import UnansweredRecovery
from core.conversation.start_over import StartOver
from core.delivery.send import AccessCheck
from core.heartbeat.source import FollowUpSource
from core.heartbeat.turn import HeartbeatTurn
from core.limits import Admissions, Meter
from core.limits.spend import SpendStores
from core.llm import LLMClient
from core.locks import SessionLocks
from core.messages import Sender
from core.pairing import Pairing
from core.privacy.retention import Retention
from core.privacy.store import PrivacyStores
from core.reminders import (
    ReminderFiring,
    ReminderService,
    ReminderSource,
    register_reminder_tools,
)
from core.reminders.limits import ReminderLimits
from core.scheduler import Scheduler
from core.search.reconcile import IndexReconciler
from core.search.service import SessionSearch
from core.search.tools import register_search_tools
from core.store.backends import Backend, open_backend
from core.store.backends import database_errors as database_errors  # for the commands
from core.tools import ChatAdmins, ToolRegistry
from core.users import FollowUpPreferences, UserZones
from core.users.tools import register_user_tools
from core.wake import Wake


@dataclass
class Services:
    backend: Backend  # every store, e.g. backend.commitments
    llm: LLMClient
    manager: ConversationManager
    search: SessionSearch
    commitments: CommitmentService
    extraction: ExtractionWorker
    reminders: ReminderService
    # Fires due reminders, as one of the scheduler's due sources.
    reminder_source: ReminderSource
    # Each user's own time zone, the agent's when they set none.
    users: UserZones
    # Pairing codes and approved users (dmPolicy: pairing).
    pairing: Pairing
    # One wake loop over the due sources: reminders, follow-ups.
    scheduler: Scheduler
    reconciler: IndexReconciler
    recovery: UnansweredRecovery
    wake: Wake
    clock: Clock
    worker: str
    # `/new`: a chat's conversation starts over for every model call.
    start_over: StartOver
    # Whether kept follows up with a user (their own switch, a group's).
    followup_prefs: FollowUpPreferences
    # Erases what outlived storage.retention, on every worker.
    retention: Retention
    # What the chat's /forget, /mydata and /export act through.
    privacy: PrivacyStores | None = None
    # What /usage reads: the model calls' records and the budgets' counters.
    spend: SpendStores | None = None


def new_worker_id() -> str:
    """This process's name on the claims it makes: host and pid for the
    operator, a random part so a reused pid is never mistaken for its
    predecessor (whose claims must expire, not be taken as ours)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def open_storage(url: str, *, create: bool = True, clock: Clock | None = None) -> Backend:
    """Every store for `storage.url` (not yet opened); ValueError for a URL
    no backend accepts. `create=False`: a missing SQLite file raises
    core.store.errors.DatabaseMissing instead of being created. `clock`
    paces the check that a SQLite file is still the one opened."""
    return open_backend(url, create=create, clock=clock)


def build_services(
    *,
    backend: Backend,
    llm: LLMClient,
    sender: Sender,
    config: Callable[[], KeptConfig],
    clock: Clock,
    platforms: Callable[[], set[str]],
    worker: str | None = None,
    admins: ChatAdmins | None = None,
    access: AccessCheck | None = None,
) -> Services:
    """`access`: who is served at the moment of a check-in's or reminder's
    send (the channels' AdapterRouter); None serves every chat (tools, tests).
    `admins`: who administers a group, for the model's tools (the router too);
    None: nobody."""
    worker = worker or new_worker_id()
    # Storing a reminder or a follow-up wakes the sleeping scheduler, on
    # every worker of the database.
    wake = Wake(backend.wake_channel)
    # A chat turn and a heartbeat turn of one session never interleave.
    # Across workers (PostgreSQL) the database also guards each session.
    session_locks = SessionLocks(shared=backend.session_guard)
    store = backend.store
    users = UserZones(backend.user_zones, lambda agent_id: agent_timezone(config(), agent_id))
    followup_prefs = FollowUpPreferences(backend.followup_prefs)
    tools = ToolRegistry()
    search = SessionSearch(store, config)
    register_search_tools(tools, search)

    # The live config's limits, read at each creation.
    reminders = ReminderService(
        backend.reminders, clock, on_stored=wake, limits=lambda: ReminderLimits.of(config())
    )
    reminder_source = ReminderSource(
        store=backend.reminders,
        firing=ReminderFiring(
            store=backend.reminders,
            transcript=store,
            sender=sender,
            clock=clock,
            platforms=platforms,
            worker=worker,
            access=access,
        ),
        clock=clock,
        platforms=platforms,
    )
    register_reminder_tools(tools, reminders, refusal=reminder_refused, zones=users)
    register_user_tools(tools, users)
    commitment_store = backend.commitments
    # Every model call charged and checked against the token budgets.
    meter = Meter(llm, config=config, clock=clock, budgets=backend.budgets)
    extraction = ExtractionWorker(
        store=commitment_store,
        jobs=backend.extraction_jobs,
        pauses=backend.extraction_pauses,
        llm=llm,
        config=config,
        clock=clock,
        worker=worker,
        on_stored=wake,
        zones=users,
        starts=store,
        prefs=followup_prefs,
        meter=meter,
    )
    manager = ConversationManager(
        store=store,
        llm=llm,
        sender=sender,
        config=config,
        clock=clock,
        tools=tools,
        session_locks=session_locks,
        reply_hooks=[extraction.on_reply],
        zones=users,
        admins=admins,
        meter=meter,
        admissions=Admissions(config),
    )

    heartbeat_store = backend.heartbeat
    followups = FollowUpSource(
        config=config,
        commitments=commitment_store,
        store=heartbeat_store,
        turn=HeartbeatTurn(
            store=heartbeat_store,
            transcript=store,
            llm=llm,
            sender=sender,
            clock=clock,
            worker=worker,
            access=access,
            meter=meter,
        ),
        clock=clock,
        platforms=platforms,
        session_locks=session_locks,
        zones=users,
        prefs=followup_prefs,
    )
    scheduler = Scheduler([reminder_source, followups], clock=clock, wake=wake)

    return Services(
        backend=backend,
        llm=llm,
        manager=manager,
        search=search,
        commitments=CommitmentService(commitment_store, clock, on_snoozed=wake),
        extraction=extraction,
        reminders=reminders,
        reminder_source=reminder_source,
        users=users,
        pairing=Pairing(backend.pairing, clock),
        scheduler=scheduler,
        reconciler=IndexReconciler(store, clock),
        # A worker that died left its chats' stored messages unanswered.
        recovery=UnansweredRecovery(manager, clock, platforms),
        wake=wake,
        clock=clock,
        worker=worker,
        start_over=StartOver(store),
        retention=Retention(backend.retention, lambda: config().storage.retention, clock),
        privacy=PrivacyStores(backend.erasure, backend.exports, backend.chats),
        followup_prefs=followup_prefs,
        spend=SpendStores(backend.usage, backend.budgets),
    )


def start_background(services: Services) -> list[asyncio.Task[None]]:
    """The long-running loops; started once the adapters are up, because the
    scheduler's start-up may deliver missed reminders."""
    services.extraction.start()
    tasks = [
        asyncio.create_task(services.reconciler.run(), name="index-reconciler"),
        services.scheduler.start(),
        asyncio.create_task(services.recovery.run(), name="unanswered-recovery"),
        asyncio.create_task(services.retention.run(), name="retention"),
    ]
    if services.backend.wake_channel is not None:
        tasks.append(
            asyncio.create_task(services.wake.listen(services.clock), name="wake-listener")
        )
    return tasks
