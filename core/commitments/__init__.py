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
