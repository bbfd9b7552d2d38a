"""How long a delivery claim is vouched for by its worker (its lease).

A lease must outlast everything the claimant may still do with the claim: for
a heartbeat turn, the model call with all its retries and then the send with
its own retries; for a reminder, the send. It is renewed when the claim moves
to `sending`. Too short and a live claim would be taken for a dead one (a
`sending` one would then end `failed` although it was sent); too long only
delays how soon a crashed worker's claim is released.
"""

from __future__ import annotations

from datetime import timedelta

from core.config.model import LlmConfig
from core.delivery.send import DEFAULT_ATTEMPTS, MAX_BACKOFF

# The send: every attempt deliver_once may make, each a platform request of
# up to a minute, with the longest backoff between them.
SEND_LEASE = timedelta(seconds=DEFAULT_ATTEMPTS * (60 + MAX_BACKOFF))
# LLMClient gives one attempt `2 * timeout + 1` seconds overall; its backoff
# between retries is bounded well below this.
_MODEL_RETRY_PAUSE = 60.0


def turn_lease(llm: LlmConfig) -> timedelta:
    """The lease of a follow-up claim, from the model call's worst case."""
    attempts = llm.max_retries + 1
    per_attempt = 2 * llm.timeout_seconds + 1
    model = attempts * per_attempt + llm.max_retries * _MODEL_RETRY_PAUSE
    return timedelta(seconds=model) + SEND_LEASE
