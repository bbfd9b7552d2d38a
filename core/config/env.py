"""Configuration from the environment, laid over the config file.

Every key can be set by a `KEPT_` variable named after its path as written
in the file, upper-cased, levels joined by `__`: `KEPT_STORAGE__URL`,
`KEPT_CHANNELS__TELEGRAM__ENABLED=true`, `KEPT_LLM__APIKEYENV=MY_KEY`. A
list or an object is given as JSON: `KEPT_AGENTS='[{"id": "main"}]'`.
Precedence: environment > file > defaults. pydantic-settings reads the
variables; the result is validated together with the file, and each problem
is reported against the variable (or the file) its value came from.

A `KEPT_` variable that names no key is an error, not a warning: a
misspelt `KEPT_CHANNELS__TELEGRAM__ENABLD=true` would otherwise start a bot
that quietly ignores it.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import EnvSettingsSource
from pydantic_settings.exceptions import SettingsError
from pydantic_settings.sources.utils import parse_env_vars

from core.config.errors import error_items
from core.config.model import ConfigError, KeptConfig

ENV_PREFIX = "KEPT_"
NESTED_DELIMITER = "__"
# KEPT_ variables that are not config keys: the config file's path, and
# the test suite's own settings (e.g. KEPT_TEST_POSTGRES_URL).
NOT_KEYS = frozenset({"KEPT_CONFIG"})
NOT_KEY_PREFIXES = ("KEPT_TEST_",)
# The database URL a host hands out, used for storage.url when nothing else sets it.
DATABASE_URL = "DATABASE_URL"
DATABASE_URL_KEY = ("storage", "url")

Path_ = tuple[str | int, ...]


def variable_for_key(path: Sequence[str | int]) -> str:
    """The variable that sets the key at `path` (list indexes have none:
    a list is set whole)."""
    names = [str(p).upper() for p in path if not isinstance(p, int)]
    return ENV_PREFIX + NESTED_DELIMITER.join(names)


def config_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The KEPT_ variables meant as config keys: upper-cased name -> name as set."""
    found: dict[str, str] = {}
    for name in environ:
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in NOT_KEYS:
            continue
        if upper.startswith(NOT_KEY_PREFIXES):
            continue
        found[upper] = name
    return found


@cache
def known_variables() -> frozenset[str]:
    """Every variable that names a key or a section (a list ends the path)."""
    names: set[str] = set()

    def walk(model: type[BaseModel], path: tuple[str, ...]) -> None:
        for name, info in model.model_fields.items():
            here = (*path, info.alias or name)
            names.add(variable_for_key(here))
            sub = _section_model(info.annotation)
            if sub is not None:
                walk(sub, here)

    walk(KeptConfig, ())
    return frozenset(names)


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The model of a section (`X` or `X | None`); None for lists and scalars."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [_section_model(a) for a in typing.get_args(annotation) if a is not type(None)]
        return models[0] if len(models) == 1 else None
    return None


class _EnvSource(EnvSettingsSource):
    """pydantic-settings' environment source, reading a given mapping
    (tests and the running bot pass theirs) instead of os.environ."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._given = environ
        super().__init__(
            KeptConfig,  # type: ignore[arg-type]  # only its fields are read
            case_sensitive=False,
            env_prefix=ENV_PREFIX,
            env_nested_delimiter=NESTED_DELIMITER,
        )

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(self._given, self.case_sensitive)


@dataclass(frozen=True)
class EnvLayer:
    """What the environment sets: a document keyed like the file, and the
    variables that set it (upper-cased name -> name as set)."""

    values: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    # What the environment sets under the file, only where neither the file
    # nor a KEPT_ variable does: `DATABASE_URL` (Heroku, Render, Fly) as
    # storage.url. Its variables: KEPT_ name of the key -> name as set.
    fallback: dict[str, Any] = field(default_factory=dict)
    fallback_variables: dict[str, str] = field(default_factory=dict)

    def variable_for(
        self,
        path: Sequence[str | int],
        document: dict[str, Any] | None = None,
        *,
        fallback: bool = True,
    ) -> str | None:
        """The variable the value at `path` came from, or None when it did
        not come from the environment. A fallback counts (`fallback`) unless
        `document`, the file, sets the key. Digit strings index lists."""
        found = self._in_values(path)
        if found is None and fallback and not _present(document or {}, tuple(path)):
            found = EnvLayer(self.fallback, self.fallback_variables)._in_values(path)
        return found

    def _in_values(self, path: Sequence[str | int]) -> str | None:
        node: Any = self.values
        for depth, part in enumerate(path):
            if not isinstance(node, dict):
                return self._setter(path[:depth])  # set whole, e.g. a JSON list
            if part not in node:
                return None
            node = node[part]
        return self._setter(path)

    def _setter(self, path: Sequence[str | int]) -> str | None:
        for end in range(len(path), 0, -1):
            found = self.variables.get(variable_for_key(path[:end]))
            if found is not None:
                return found
        return None


def read_env_layer(environ: Mapping[str, str]) -> EnvLayer:
    """The config keys the environment sets; ConfigError names each bad variable."""
    variables = config_variables(environ)
    problems = [_unknown(name) for upper, name in variables.items() if upper not in _known()]
    for upper, name in variables.items():
        if upper not in _known():
            continue
        try:
            _EnvSource({name: environ[name]})()
        except SettingsError as exc:
            # Never echo the value: it may hold a password (a storage URL).
            reason = exc.__cause__ or exc
            problems.append(f"{name}: not valid JSON ({reason}); lists and objects are JSON")
    if problems:
        raise ConfigError(problems)
    chosen = {name: environ[name] for name in variables.values()}
    fallback: dict[str, Any] = {}
    fallback_variables: dict[str, str] = {}
    if database_url := environ.get(DATABASE_URL, "").strip():
        fallback = {"storage": {"url": database_url}}
        fallback_variables = {variable_for_key(DATABASE_URL_KEY): DATABASE_URL}
    return EnvLayer(
        values=dict(_EnvSource(chosen)()),
        variables=variables,
        fallback=fallback,
        fallback_variables=fallback_variables,
    )


def _known() -> frozenset[str]:
    return known_variables()


def _unknown(name: str) -> str:
    close = difflib.get_close_matches(name.upper(), sorted(_known()), n=1, cutoff=0.75)
    if close:
        return f"{name}: not a kept setting (did you mean {close[0]}?)"
    return (
        f"{name}: not a kept setting; variables are KEPT_ + the key path upper-cased, "
        "levels joined by __ (e.g. KEPT_STORAGE__URL)"
    )


def merge(base: Any, over: Any) -> Any:
    """`over` laid over `base`: objects merge key by key, anything else
    (lists included) replaces."""
    if isinstance(base, dict) and isinstance(over, dict):
        merged = dict(base)
        for key, value in over.items():
            merged[key] = merge(base[key], value) if key in base else value
        return merged
    return over


def validate_layers(document: dict[str, Any] | None, source: str, env: EnvLayer) -> KeptConfig:
    """The config of defaults < `document` (the file; None: no file) < env.

    Each problem is one line: `KEPT_X: reason` when the value came from a
    variable, else `<source>: key.path: reason`.
    """
    merged = merge(merge(env.fallback, document or {}), env.values)
    try:
        return KeptConfig.model_validate(merged, by_alias=True, by_name=False)
    except ValidationError as exc:
        where = source if document is not None else "environment"
        lines = [_line(loc, why, where, env, document) for loc, why in error_items(exc, KeptConfig)]
        raise ConfigError(list(dict.fromkeys(lines))) from None


def _line(loc: Path_, why: str, where: str, env: EnvLayer, document: dict[str, Any] | None) -> str:
    dotted = ".".join(str(p) for p in loc) or "(top level)"
    variable = env.variable_for(loc, document)
    if variable is None:
        return f"{where}: {dotted}: {why}"
    if variable.upper() == variable_for_key(loc):
        return f"{variable}: {why}"
    return f"{variable}: {dotted}: {why}"


def describe_source(file: str | None, env: EnvLayer, document: dict[str, Any] | None = None) -> str:
    """Where the config in force comes from, for a log line or a CLI answer
    (`document`: the file's, to tell whether a fallback is used)."""
    used = set(env.variables.values())
    if env.fallback and env.variable_for(DATABASE_URL_KEY, document) == DATABASE_URL:
        used.add(DATABASE_URL)
    names = ", ".join(sorted(used))
    if file is None:
        return f"environment ({names})"
    return f"{file} + environment ({names})" if names else file


def origins(config: KeptConfig, document: dict[str, Any] | None, env: EnvLayer) -> dict[str, str]:
    """For every value of the config, dotted path -> `env:<VARIABLE>`, `file`
    or `default`. Lists of scalars are one value; lists of objects are
    walked by index."""
    out: dict[str, str] = {}

    def walk(node: Any, path: Path_) -> None:
        if isinstance(node, dict) and node:
            for key, value in node.items():
                walk(value, (*path, key))
            return
        if isinstance(node, list) and node and all(isinstance(i, dict) for i in node):
            for index, value in enumerate(node):
                walk(value, (*path, index))
            return
        variable = env.variable_for(path, document)
        if variable is not None:
            origin = f"env:{variable}"
        else:
            origin = "file" if _present(document, path) else "default"
        out[".".join(str(p) for p in path)] = origin

    walk(config.model_dump(mode="json", by_alias=True), ())
    return out


def _present(document: Any, path: Path_) -> bool:
    node = document
    for part in path:
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if in_list or (isinstance(node, dict) and part in node):
            node = node[part]
        else:
            return False
    return True


def without_env_keys(document: Any, env_values: Any) -> Any:
    """`document` minus every key the environment overrides."""
    if not isinstance(document, dict) or not isinstance(env_values, dict):
        return document
    out = {}
    for key, value in document.items():
        if key not in env_values:
            out[key] = value
        elif isinstance(value, dict) and isinstance(env_values[key], dict):
            out[key] = without_env_keys(value, env_values[key])
    return out
