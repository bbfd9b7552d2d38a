"""The labelled extraction set: one case per JSONL line, validated strictly.

A case is what the extraction pass sees (the exchange(s), the user's time
zone and "now", the scope's pending follow-ups) and what it should store
after the code rules: no candidate, or each expected follow-up's kind,
sensitivity and an acceptable due window, plus the pending ids the exchange
closes. A case file that breaks a rule is refused whole, with the line and
the reason, so a mislabelled case never quietly skews a measurement.

The labelled set itself ships with the package (data/extraction, one file
per language), so `kept eval` finds it wherever kept is installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Annotated, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from core.commitments.model import Kind, Sensitivity
from core.errors import KeptError
from core.messages import ChatKind

Language = Literal["en", "fr", "fa", "th", "tr", "es", "de", "ar", "ja", "zh"]
LANGUAGES: tuple[Language, ...] = get_args(Language)

# What makes a case worth having; every case names at least one.
Tag = Literal[
    "positive",  # at least one follow-up is expected
    "reminder",  # the user asks for an exact reminder / alarm / timer
    "mixed",  # a reminder request and a real follow-up in one exchange
    "small_talk",
    "past",  # a question or story about what already happened
    "third_party",  # someone else's event the user is not part of
    "hypothetical",
    "sarcasm",
    "closed",  # the exchange itself already closed the matter
    "agent_promise",  # the assistant promised to come back
    "resolves",  # the exchange closes a pending follow-up
    "group",  # a group or channel chat
]

NonEmpty = Annotated[str, Field(min_length=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(
        strict=True, extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class Range(_Strict):
    """An acceptable span for one end of a due window: [lo, hi], inclusive."""

    lo: AwareDatetime
    hi: AwareDatetime

    @model_validator(mode="before")
    @classmethod
    def _from_pair(cls, value: object) -> object:
        # Written as a two-item list in the files: ["2026-…", "2026-…"].
        if isinstance(value, list | tuple) and len(value) == 2:
            return {"lo": value[0], "hi": value[1]}
        return value

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.hi < self.lo:
            raise ValueError("range ends before it starts")
        return self

    def __contains__(self, when: datetime) -> bool:
        return self.lo <= when <= self.hi


class ExpectedFollowUp(_Strict):
    kind: Kind
    sensitivity: Sensitivity = "routine"
    earliest: Range
    latest: Range | None = None
    # What the follow-up is about, for people reading the set and for
    # scripted answers in tests; never shown to a model.
    note: NonEmpty


class Expected(_Strict):
    candidates: list[ExpectedFollowUp] = []
    resolved: list[NonEmpty] = []


class PendingItem(_Strict):
    """A follow-up already stored for the scope, as the prompt lists it."""

    id: Annotated[str, Field(min_length=1, max_length=64)]
    kind: Kind
    reason: NonEmpty
    dedupe_key: NonEmpty
    due_earliest: AwareDatetime
    due_latest: AwareDatetime


class CaseExchange(_Strict):
    user: NonEmpty
    assistant: NonEmpty


class Case(_Strict):
    id: Annotated[str, Field(pattern=r"^[a-z]{2}-[a-z0-9-]+$")]
    lang: Language
    tags: Annotated[list[Tag], Field(min_length=1)]
    chat_kind: ChatKind = "private"
    now: AwareDatetime
    timezone: NonEmpty
    pending: list[PendingItem] = []
    exchanges: Annotated[list[CaseExchange], Field(min_length=1, max_length=4)]
    expect: Expected

    @model_validator(mode="after")
    def _consistent(self) -> Case:
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"timezone {self.timezone!r} is not an IANA zone") from None
        if not self.id.startswith(f"{self.lang}-"):
            raise ValueError(f"id {self.id!r} must start with its language, {self.lang}-")
        ids = [p.id for p in self.pending]
        if len(set(ids)) != len(ids):
            raise ValueError("pending ids repeat")
        unknown = sorted(set(self.expect.resolved) - set(ids))
        if unknown:
            raise ValueError(f"expect.resolved names ids not pending: {', '.join(unknown)}")
        if bool(self.expect.candidates) != ("positive" in self.tags):
            raise ValueError('tag "positive" exactly when expect.candidates is not empty')
        if bool(self.expect.resolved) != ("resolves" in self.tags):
            raise ValueError('tag "resolves" exactly when expect.resolved is not empty')
        if ("group" in self.tags) != (self.chat_kind != "private"):
            raise ValueError('tag "group" exactly when chatKind is group or channel')
        if "mixed" in self.tags and not {"reminder", "positive"} <= set(self.tags):
            raise ValueError('a "mixed" case is also tagged "reminder" and "positive"')
        for n, c in enumerate(self.expect.candidates):
            where = f"expect.candidates[{n}]"
            if c.earliest.lo <= self.now:
                raise ValueError(f"{where}.earliest starts before now")
            if c.latest is not None and c.latest.hi < c.earliest.lo:
                raise ValueError(f"{where}.latest ends before earliest can start")
            if self.chat_kind != "private" and (
                c.kind == "care_check_in" or c.sensitivity != "routine"
            ):
                raise ValueError(f"{where}: a group chat stores only routine follow-ups")
        return self


class CaseFileError(KeptError, ValueError):
    """A case file that cannot be used; the message names the file, line and reason."""


def parse_cases(lines: Iterable[str], *, source: str) -> list[Case]:
    cases: list[Case] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise CaseFileError(f"{where}: not valid JSON ({exc})") from None
        try:
            cases.append(Case.model_validate(raw, strict=False))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "(case)"
            raise CaseFileError(f"{where}: {loc}: {first['msg']}") from None
    return cases


def labelled_set() -> Traversable:
    """The labelled set kept ships with: a directory of .jsonl files inside
    the installed package (a plain directory, or one inside a zip)."""
    return files(__package__).joinpath("data", "extraction")


def load_cases(path: Traversable) -> list[Case]:
    """Every case in `path` (a .jsonl file, or a directory of them, sorted by
    name): a `Path`, or a `Traversable` such as `labelled_set()`."""
    if path.is_dir():
        found = sorted(
            (f for f in path.iterdir() if f.name.endswith(".jsonl") and f.is_file()),
            key=lambda f: f.name,
        )
        if not found:
            raise CaseFileError(f"no .jsonl files in {path}")
    elif path.is_file():
        found = [path]
    else:
        raise CaseFileError(f"no labelled set at {path}")
    cases: list[Case] = []
    for file in found:
        with file.open(encoding="utf-8") as handle:
            cases.extend(parse_cases(handle, source=str(file)))
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise CaseFileError(f"case id {case.id} appears twice in {path}")
        seen.add(case.id)
    return cases


def select(
    cases: Sequence[Case], *, lang: str | None = None, limit: int | None = None
) -> list[Case]:
    """The cases of one language (all when None), the first `limit` of them."""
    chosen = [c for c in cases if lang is None or c.lang == lang]
    return chosen if limit is None else chosen[:limit]
