"""Reporting every problem with a config by key path, one line each, in
the JSON (camelCase) names the file and the KEPT_ variables use."""

from __future__ import annotations

import difflib
import json
import typing
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

from core.errors import KeptError


class KeyedValueError(ValueError):
    """A model validator's verdict on specific keys.

    Pydantic reports a model validator's error at the model itself (the top
    level for KeptConfig); raising this instead lets the config loader report
    each problem at the key that caused it. Paths are relative to the model
    and use the JSON (camelCase) names.
    """

    def __init__(self, problems: list[tuple[tuple[str | int, ...], str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{_dotted(loc)}: {msg}" for loc, msg in problems))


def _dotted(loc: tuple[str | int, ...]) -> str:
    return ".".join(str(part) for part in loc)


class ConfigError(KeptError):
    """Everything wrong with a config, one line per problem.

    Each line reads `<source>: <key.path>: <reason>` (key paths use the JSON
    camelCase names and list indexes, e.g. `agents.0.heartbeat.every`), so a
    CLI can print them as they are.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))

    def __str__(self) -> str:
        return "\n".join(self.problems)


def describe_errors(exc: ValidationError, root: type[BaseModel]) -> list[str]:
    """`key.path: reason` for every error pydantic found, in its order."""
    lines = [f"{_dotted(loc) or '(top level)'}: {why}" for loc, why in error_items(exc, root)]
    return list(dict.fromkeys(lines))


def error_items(
    exc: ValidationError, root: type[BaseModel]
) -> list[tuple[tuple[str | int, ...], str]]:
    """(key path, reason) for every error pydantic found validating `root`,
    in its order."""
    items: list[tuple[tuple[str | int, ...], str]] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        keyed = err.get("ctx", {}).get("error")
        if isinstance(keyed, KeyedValueError):
            items.extend((loc + sub, msg) for sub, msg in keyed.problems)
        else:
            items.append((loc, _reason(err, loc, root)))
    return items


def _reason(err: Any, loc: tuple[str | int, ...], root: type[BaseModel]) -> str:
    kind: str = err["type"]
    msg: str = err["msg"]
    if kind == "extra_forbidden":
        known = _known_keys(loc[:-1], root)
        return "unknown key" + did_you_mean(str(loc[-1]), known)
    if kind == "missing":
        return "required key is missing"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a JSON object, got {json_type(err['input'])}"
    if kind == "list_type":
        return f"expected a JSON list, got {json_type(err['input'])}"
    if kind in ("value_error", "assertion_error"):
        # Our own validators already quote the offending value where it is safe to.
        return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return f"{msg} (got {_short_json(err.get('input'))})"


def did_you_mean(word: str, choices: list[str]) -> str:
    """` (did you mean 'x'?)` when a choice is close to `word`, else ''."""
    camel = to_camel(word)
    if camel != word and camel in choices:
        return f" (did you mean {camel!r}? keys are camelCase)"
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _known_keys(loc: tuple[str | int, ...], root: type[BaseModel]) -> list[str]:
    model: type[BaseModel] | None = root
    for part in loc:
        if model is None:
            return []
        if isinstance(part, int):
            continue  # a list index: the element has the list's model
        fields = {f.alias or name: f for name, f in model.model_fields.items()}
        field = fields.get(part)
        model = _model_in(field.annotation) if field is not None else None
    return [] if model is None else [f.alias or n for n, f in model.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def json_type(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    kinds = {int: "a number", float: "a number", str: "a string", list: "a list"}
    return kinds.get(type(value), "an object")


def _short_json(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
