"""Running labelled cases through the real extraction call (core/commitments/extraction_call.py).

Each case becomes one synthetic scope in agent "eval" — nothing is stored,
nothing is delivered — and one `run_extraction` call with the case's "now", time zone,
chat kind, pending follow-ups and exchanges: the prompt, parser and rules are
the worker's own. Calls run concurrently up to a bound; a model error or a
missed deadline is that case's outcome, never the run's end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from core.commitments.exchange import Exchange
from core.commitments.extraction_call import ExtractionOutcome, run_extraction
from core.commitments.model import Commitment, Scope
from core.commitments.prefilter import worth_extracting
from core.config.model import KeptConfig
from core.evaluation.cases import Case
from core.evaluation.scoring import CaseResult, score_case
from core.llm import LLMError, Model

EVAL_AGENT = "eval"
EVAL_PLATFORM = "eval"
EVAL_SENDER = "user"
DEFAULT_CONCURRENCY = 4

Prefilter = Callable[[Case], bool]
Progress = Callable[[CaseResult], None]


@dataclass(frozen=True, slots=True)
class RunSettings:
    heartbeat_seconds: float  # the lead a stored follow-up keeps from its creation
    call_deadline: float  # seconds one call may take, retries included
    concurrency: int = DEFAULT_CONCURRENCY

    @classmethod
    def from_config(
        cls, config: KeptConfig, *, concurrency: int = DEFAULT_CONCURRENCY
    ) -> RunSettings:
        """The worker's own figures: the first agent's heartbeat, the same deadline."""
        return cls(
            heartbeat_seconds=config.agents[0].heartbeat.every_seconds,
            call_deadline=config.llm.timeout_seconds * 2 + 5,
            concurrency=concurrency,
        )


def with_extraction_model(config: KeptConfig, model: str | None) -> KeptConfig:
    """A copy of `config` whose extraction role uses `model` (the file is untouched)."""
    if model is None:
        return config
    models = config.llm.models.model_copy(update={"extraction": model})
    return config.model_copy(update={"llm": config.llm.model_copy(update={"models": models})})


def scope_of(case: Case) -> Scope:
    key = f"agent:{EVAL_AGENT}:{EVAL_PLATFORM}:{case.chat_kind}:{case.id}"
    return Scope(
        EVAL_AGENT, key, EVAL_PLATFORM, case.id, None, EVAL_SENDER, chat_kind=case.chat_kind
    )


def exchanges_of(case: Case) -> list[Exchange]:
    return [Exchange(i, e.user, e.assistant) for i, e in enumerate(case.exchanges, start=1)]


def pending_of(case: Case, scope: Scope) -> list[Commitment]:
    """The case's pending follow-ups as stored commitments of its scope."""
    return [
        Commitment(
            id=p.id,
            agent_id=scope.agent_id,
            session_key=scope.session_key,
            platform=scope.platform,
            chat_id=scope.chat_id,
            thread_id=scope.thread_id,
            sender_id=scope.sender_id,
            kind=p.kind,
            sensitivity="routine",
            source="inferred_user_context",
            status="pending",
            reason=p.reason,
            suggested_text=p.reason,
            dedupe_key=p.dedupe_key,
            confidence=0.9,
            due_earliest=p.due_earliest,
            due_latest=p.due_latest,
            due_timezone=case.timezone,
            source_message_id=None,
            created_at=case.now,
            updated_at=case.now,
        )
        for p in case.pending
    ]


def worth_calling(case: Case) -> bool:
    """The worker's pre-filter (core/commitments/prefilter.py) on this case."""
    return worth_extracting(exchanges_of(case), pending=bool(case.pending))


async def run_case_extraction(llm: Model, case: Case, settings: RunSettings) -> ExtractionOutcome:
    """One case through the real extraction call; LLMError / TimeoutError propagate."""
    scope = scope_of(case)
    now: datetime = case.now
    async with asyncio.timeout(settings.call_deadline):
        return await run_extraction(
            llm,
            scope=scope,
            exchanges=exchanges_of(case),
            pending=pending_of(case, scope),
            now=now,
            timezone=case.timezone,
            heartbeat_seconds=settings.heartbeat_seconds,
            created_at=lambda: now,
        )


async def run_cases(
    llm: Model,
    cases: Sequence[Case],
    settings: RunSettings,
    *,
    prefilter: Prefilter = worth_calling,
    progress: Progress | None = None,
) -> list[CaseResult]:
    """Every case's result, in the cases' order; at most `settings.concurrency` calls at once."""
    bound = asyncio.Semaphore(max(1, settings.concurrency))

    async def one(case: Case) -> CaseResult:
        async with bound:
            outcome: ExtractionOutcome | BaseException
            try:
                outcome = await run_case_extraction(llm, case, settings)
            except LLMError as exc:
                outcome = exc
            except TimeoutError:
                outcome = TimeoutError(f"no answer within {settings.call_deadline:g}s")
        result = score_case(case, outcome, prefilter)
        if progress is not None:
            progress(result)
        return result

    return list(await asyncio.gather(*(one(c) for c in cases)))
