"""Inferred commitments: short-lived follow-ups found after a reply, stored
per scope, listed / dismissed / snoozed by people, expired by time.

    model.py       the record, statuses, kinds, ids
    candidates.py  the strict parse of the extraction model's JSON
    rules.py       what code enforces whatever the model says
    prompt.py      the extraction context
    extraction.py  the background worker (a ConversationManager reply hook)
    pause.py       per-agent pauses after auth / unknown-model errors
    store.py       the CommitmentStore interface
    service.py     list / dismiss / snooze for the CLI and slash commands
    visibility.py  who sees and manages which of a chat's follow-ups (groups)
    expiry.py      active past latest + grace → expired
"""

from core.commitments.expiry import ExpirySweeper, sweep_expired
from core.commitments.extraction import ExtractionWorker
from core.commitments.model import (
    ACTIVE_STATUSES,
    KINDS,
    STATUSES,
    Commitment,
    Kind,
    NewCommitment,
    Scope,
    Status,
    to_json,
)
from core.commitments.service import (
    CommitmentService,
    DismissOutcome,
    SnoozeError,
    chat_filter,
)
from core.commitments.store import CommitmentStore, Filter
from core.commitments.visibility import Asker, ChatAccess

__all__ = [
    "ACTIVE_STATUSES",
    "KINDS",
    "STATUSES",
    "Asker",
    "ChatAccess",
    "Commitment",
    "CommitmentService",
    "CommitmentStore",
    "DismissOutcome",
    "ExpirySweeper",
    "ExtractionWorker",
    "Filter",
    "Kind",
    "NewCommitment",
    "Scope",
    "SnoozeError",
    "Status",
    "chat_filter",
    "sweep_expired",
    "to_json",
]
