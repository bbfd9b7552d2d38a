"""The extraction model's answer, parsed strictly.

The answer must be one JSON object of the shape the prompt asks for
(core/commitments/prompt.py; `ExtractionAnswer` below), either the whole
text or inside a Markdown code fence (prose around the fence is
ignored). Anything else — another shape, an unknown key, a string where a
number belongs, a time without a UTC offset — is rejected as a whole: a
model that cannot follow the format is not trusted with any part of it.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from core.commitments.model import Kind, Sensitivity, Source
from core.errors import KeptError

MAX_CANDIDATES = 10  # more than this in one exchange is not a careful answer
MAX_RESOLVED = 50
REASON_CHARS = 300
SUGGESTED_CHARS = 300
DEDUPE_KEY_CHARS = 120

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)```", re.DOTALL)


class _Strict(BaseModel):
    # strict: no "0.9" for 0.9, no 1 for "x"; camelCase keys as the prompt shows them.
    model_config = ConfigDict(
        strict=True, extra="forbid", alias_generator=to_camel, populate_by_name=False
    )


class DueWindow(_Strict):
    earliest: AwareDatetime
    latest: AwareDatetime | None = None


class Candidate(_Strict):
    kind: Kind
    sensitivity: Sensitivity = "routine"
    source: Source = "inferred_user_context"
    due_window: DueWindow
    reason: Annotated[str, Field(min_length=1, max_length=REASON_CHARS)]
    suggested_text: Annotated[str, Field(min_length=1, max_length=SUGGESTED_CHARS)]
    confidence: Annotated[float, Field(ge=0.0, le=1.0)]
    dedupe_key: Annotated[str, Field(min_length=1, max_length=DEDUPE_KEY_CHARS)]

    @property
    def earliest(self) -> datetime:
        return self.due_window.earliest

    @property
    def latest(self) -> datetime | None:
        return self.due_window.latest


class ExtractionAnswer(_Strict):
    # Both may be left out: `{}` is a (rare) way of saying "nothing here".
    candidates: Annotated[list[Candidate], Field(max_length=MAX_CANDIDATES)] = []
    resolved: Annotated[
        list[Annotated[str, Field(max_length=64)]], Field(max_length=MAX_RESOLVED)
    ] = []


class UnusableAnswer(KeptError, ValueError):
    """The model's text is not a valid extraction answer; the message says why."""


def _json_text(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("{"):
        return stripped
    for match in _FENCE.finditer(text):
        body = match.group(1).strip()
        if body.startswith("{"):
            return body
    if not stripped:
        raise UnusableAnswer("empty answer")
    raise UnusableAnswer("no JSON object (neither the whole answer nor in a code fence)")


def parse_answer(text: str) -> ExtractionAnswer:
    """The validated answer; raises UnusableAnswer naming the first problems."""
    body = _json_text(text)
    try:
        # Decoded once on its own so the log tells "not JSON" from "wrong shape".
        json.loads(body)
    except ValueError as exc:
        raise UnusableAnswer(f"not valid JSON: {exc}") from None
    try:
        return ExtractionAnswer.model_validate_json(body)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"
            for err in exc.errors()[:3]
        ]
        more = f" (+{exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        raise UnusableAnswer("; ".join(problems) + more) from None
