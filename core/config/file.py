"""The config file on disk: load it, edit it in place, create it, watch it.

Edits are validated as a whole document and written atomically, so neither
a typo nor a crash leaves a half-written or invalid file. A running bot
polls the file and applies valid changes; an invalid one is logged once.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import os
import stat
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.clock import Clock
from core.config.env import (
    EnvLayer,
    describe_source,
    origins,
    read_env_layer,
    validate_layers,
    without_env_keys,
)
from core.config.errors import did_you_mean
from core.config.model import ConfigError, KeptConfig, validate_document
from core.logs import event
from core.secrets import mask_secrets
from core.secrets import remember as remember_secrets

log = logging.getLogger("kept.config")

# A file modified this recently may change again within the same (coarse)
# mtime tick at the same size; the watcher re-hashes it until it is older.
_RACY_NS = 2_000_000_000


def secret_from_env(env_name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The secret in $env_name, or None when unset or blank (the file only names it).

    Whitespace is stripped: tokens pasted into .env files often carry a stray
    newline, which platforms reject as a bad token.
    """
    env = os.environ if environ is None else environ
    value = env.get(env_name, "").strip()
    return value or None


class _RejectedJson(ValueError):
    """JSON that Python's parser accepts but a config file must not contain."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads silently keeps the last of two equal keys; in a config file
    # that hides an edit, and `config set` would drop the other one.
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _RejectedJson(f"duplicate key {key!r}")
        seen.add(key)
    return dict(pairs)


def _no_constants(name: str) -> Any:
    raise _RejectedJson(f"{name} is not valid JSON")


def parse_json_document(text: str, source: str) -> Any:
    """Strict JSON (no NaN/Infinity, no duplicate keys); errors name a position."""
    if not text.strip():
        raise ConfigError([f"{source}: the file is empty (expected a JSON object)"])
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"]
        ) from None
    except _RejectedJson as exc:
        raise ConfigError([f"{source}: invalid JSON: {exc}"]) from None


def parse_config_text(text: str, source: str) -> KeptConfig:
    """Parse and validate config JSON; `source` (usually the path) prefixes each problem."""
    return validate_document(parse_json_document(text, source), source)


@dataclass(frozen=True)
class LoadedConfig:
    """The config in force and where its values came from."""

    config: KeptConfig
    path: Path
    document: dict[str, Any] | None  # the file as written; None: no file, env only
    env: EnvLayer

    @property
    def source(self) -> str:
        """`config/kept.json`, `... + environment (KEPT_...)` or `environment (...)`."""
        file = None if self.document is None else str(self.path)
        return describe_source(file, self.env, self.document)

    def origins(self) -> dict[str, str]:
        """Dotted key path -> `env:<VARIABLE>`, `file` or `default`."""
        return origins(self.config, self.document, self.env)


def load_config(path: Path, environ: Mapping[str, str] | None = None) -> KeptConfig:
    """The config in force: defaults < the file < KEPT_ variables (see
    core/config/env.py); raises ConfigError naming every problem."""
    return load_layers(path, environ).config


def config_source(path: Path, environ: Mapping[str, str] | None = None) -> str:
    """Where the config comes from (see LoadedConfig.source), without validating it."""
    env = read_env_layer(os.environ if environ is None else environ)
    file = str(path) if path.exists() or not (env.variables or env.fallback) else None
    return describe_source(file, env)


def load_layers(path: Path, environ: Mapping[str, str] | None = None) -> LoadedConfig:
    """Like load_config, keeping each layer. The file may be missing when the
    environment sets at least one key: a git-push host has only variables."""
    env = read_env_layer(os.environ if environ is None else environ)
    document: dict[str, Any] | None = None
    if path.exists() or not (env.variables or env.fallback):
        read = _read_document(path)
        if not isinstance(read, dict):
            validate_document(read, str(path))  # raises, naming the file
        document = read
    config = validate_layers(document, str(path), env)
    return LoadedConfig(config=config, path=path, document=document, env=env)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError([f"{path}: no such file"]) from None
    except IsADirectoryError:
        raise ConfigError([f"{path}: is a directory, not a config file"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror or exc}"]) from None


def _decode(data: bytes, path: Path) -> str:
    try:
        # utf-8-sig: editors on Windows may prepend a BOM, which json rejects.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text (bad byte at offset {exc.start})"]) from None


def _read_document(path: Path) -> Any:
    return parse_json_document(_decode(_read_bytes(path), path), str(path))


# --- kept config get / set ---


def _split_key(key: str, source: str) -> list[str]:
    parts = key.split(".")
    if any(not part.strip() for part in parts):
        hint = "use dots, e.g. commitments.maxPerDay"
        raise ConfigError([f"{source}: {key!r} is not a key path ({hint})"])
    return parts


def _is_index(part: str) -> bool:
    return part.isascii() and part.isdigit()


def get_value(path: Path, key: str, environ: Mapping[str, str] | None = None) -> Any:
    """The JSON value in force at a dotted camelCase key path, e.g. `agents.0.id`.

    Keys the file and the environment leave out answer with their defaults:
    the file as written is laid over the validated model, so values keep the
    file's spelling (`60`, not the model's `60.0`). The config must be valid.
    """
    source = str(path)
    parts = _split_key(key, source)
    loaded = load_layers(path, environ)
    written = without_env_keys(loaded.document or {}, loaded.env.values)
    node: Any = _overlay(loaded.config.model_dump(mode="json", by_alias=True), written)
    for depth, part in enumerate(parts):
        here = ".".join(parts[: depth + 1])
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and _is_index(part) and int(part) < len(node):
            node = node[int(part)]
        else:
            hint = did_you_mean(part, list(node)) if isinstance(node, dict) else ""
            if isinstance(node, list):
                hint = f" ({'.'.join(parts[:depth])} has {len(node)} entries)"
            raise ConfigError([f"{source}: {here}: unknown key{hint}"])
    return node


def _overlay(base: Any, over: Any) -> Any:
    """`over` (the file) laid over `base` (the model dumped with its defaults)."""
    if isinstance(base, dict) and isinstance(over, dict):
        merged = dict(base)
        for key, value in over.items():
            merged[key] = _overlay(base[key], value) if key in base else value
        return merged
    if isinstance(base, list) and isinstance(over, list) and len(base) == len(over):
        return [_overlay(b, o) for b, o in zip(base, over, strict=True)]
    return over


def parse_raw_value(raw: str) -> Any:
    """A command-line value: JSON when it parses (`true`, `3`, `null`, `{"a": 1}`),
    else the plain string (`gpt-4.1-mini`, `Europe/Paris`). Quote a string
    that looks like JSON: `'"3"'`."""

    def reject(name: str) -> Any:
        raise ValueError(name)  # NaN/Infinity are not JSON; keep them as text

    try:
        return json.loads(raw, parse_constant=reject)
    except ValueError:
        return raw


def set_value(
    path: Path, key: str, raw: str, environ: Mapping[str, str] | None = None
) -> KeptConfig:
    """Set `key` to `raw` (see parse_raw_value) in the file and return the new
    config in force. Only the file changes: a KEPT_ variable that sets the
    key stays on top (see env_override).

    Missing objects along the path are created; a list index may name an
    existing element or append one (`agents.1.id` on a one-agent list). The
    resulting config (the file under the environment) is validated first: on
    any problem this raises ConfigError and the file is left byte-for-byte
    untouched. Otherwise it is
    replaced atomically, keeping its key order, with a 2-space indent.
    """
    source = str(path)
    parts = _split_key(key, source)
    value = parse_raw_value(raw)
    env = read_env_layer(os.environ if environ is None else environ)
    document = _read_document(path)
    if not isinstance(document, dict):
        raise ConfigError([f"{source}: the top level must be a JSON object"])
    _assign(document, parts, value, source)
    config = validate_layers(document, source, env)
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    _write_atomic(path, text.encode("utf-8"))
    return config


def env_override(key: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The KEPT_ variable that overrides `key` in the file, if one is set."""
    env = read_env_layer(os.environ if environ is None else environ)
    return env.variable_for(key.split("."), fallback=False)


def _assign(document: dict[str, Any], parts: list[str], value: Any, source: str) -> None:
    node: Any = document
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        # What goes here when nothing (or null) is there yet.
        fresh: Any = value if last else [] if _is_index(parts[depth + 1]) else {}
        if isinstance(node, list) and _is_index(part) and int(part) <= len(node):
            index = int(part)
            if index == len(node):
                node.append(fresh)
            elif last or node[index] is None:
                node[index] = fresh
            node = node[index]
        elif isinstance(node, dict):
            if last or node.get(part) is None:
                node[part] = fresh
            node = node[part]
        else:
            here, parent = ".".join(parts[: depth + 1]), ".".join(parts[:depth])
            what = f"a list of {len(node)}" if isinstance(node, list) else "not an object"
            raise ConfigError([f"{source}: {here}: cannot set, {parent} is {what}"])


def _write_atomic(path: Path, data: bytes) -> None:
    try:
        _replace_file(Path(os.path.realpath(path)), data)  # a symlinked config stays a symlink
    except OSError as exc:
        raise ConfigError([f"{path}: cannot write: {exc.strerror or exc}"]) from None


def _replace_file(target: Path, data: bytes) -> None:
    # Temp file beside the target, fsync, rename over it: a crash or the
    # running bot's watcher sees the old file or the new one, never half.
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = 0o644
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()  # fsync sees only what left Python's buffer
            os.fsync(tmp.fileno())
        os.chmod(tmp_name, mode)  # mkstemp makes 0600; keep the file's own mode
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    # Make the rename itself durable; not every platform can fsync a directory.
    with contextlib.suppress(OSError):
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def ensure_config_file(path: Path, example: Path) -> bool:
    """Create `path` as a copy of `example` when it does not exist; True if created."""
    if path.exists():
        return False
    try:
        data = example.read_bytes()
    except OSError as exc:
        raise ConfigError([f"{example}: cannot read the example config: {exc.strerror}"]) from None
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, data)
    return True


def masked_view(config: KeptConfig, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The config as JSON (camelCase, defaults included) that is safe to print.

    Each `<name>Env` key (`apiKeyEnv`, `tokenEnv`) gets a sibling `<name>Set`
    (`apiKeySet`, `tokenSet`): true when that variable holds a non-blank value.
    Secret values never appear: every string goes through core/secrets.py
    (a URL's password, secret-looking query parameters, the configured
    tokens' values show as `***`). The result is for reading, not for
    writing back.
    """
    env = os.environ if environ is None else environ
    remember_secrets(config, env)
    return _mask(config.model_dump(mode="json", by_alias=True), env)


def _mask(node: Any, environ: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return mask_secrets(node)
    if isinstance(node, list):
        return [_mask(item, environ) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        out[key] = _mask(value, environ)
        if key.endswith("Env") and isinstance(value, str):
            out[key.removesuffix("Env") + "Set"] = secret_from_env(value, environ) is not None
    return out


# --- live reload ---

OnChange = Callable[[KeptConfig], Awaitable[None] | None]


class ConfigWatcher:
    """Polls the config file and hands valid changes to `on_change`.

    Polling a stat signature is cheap and works with every editor and
    filesystem, saves by rename included. A change is applied only when it
    parses, validates and differs from the config in force (re-saving the
    same config restarts nothing); an invalid file is logged once per
    distinct content and ignored, so the previous config stays in force.
    The KEPT_ variables stay on top of every version of the file; with
    them, a missing file is no problem (an environment-only deployment).
    """

    def __init__(
        self,
        path: Path,
        current: KeptConfig,
        on_change: OnChange,
        clock: Clock,
        interval: float = 2.0,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.path = path
        # The environment is fixed for the process; read it once.
        self.env = read_env_layer(os.environ if environ is None else environ)
        self.current = current
        self.on_change = on_change
        self.clock = clock
        self.interval = interval
        self._signature: tuple[int, int] | None = None  # (mtime_ns, size) last read
        self._digest: bytes | None = None  # hash of the content last read
        self._reported: object | None = None  # the bad state last warned about

    async def check_once(self) -> bool:
        """Apply the file if it changed to a valid, different config; True if applied."""
        config = self._poll()
        if config is None:
            return False
        self.current = config
        event(log, logging.DEBUG, "config_file_reloaded", path=self.path)
        try:
            result = self.on_change(config)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            # The new config is valid and now current; a consumer that fails
            # to apply it must not stop future reloads.
            event(
                log,
                logging.ERROR,
                "config_apply_failed",
                path=self.path,
                error=repr(exc),
                note="applying the reloaded config failed; it is current all the same",
                action="report this bug; restart kept to apply the config everywhere",
            )
        return True

    async def run(self) -> None:
        """Check every `interval` seconds until cancelled."""
        while True:
            try:
                await self.check_once()
            except Exception as exc:  # a watcher that dies quietly is worse than a noisy one
                event(
                    log,
                    logging.ERROR,
                    "config_check_failed",
                    path=self.path,
                    error=repr(exc),
                    action="report this bug; the watcher tries again",
                )
            await self.clock.sleep(self.interval)

    def _poll(self) -> KeptConfig | None:
        # Synchronous on purpose: a stat and a small read take microseconds,
        # and no thread hop keeps the watcher deterministic under TestClock.
        try:
            st = self.path.stat()
            signature = (st.st_mtime_ns, st.st_size)
            if signature == self._signature:
                return None
            data = self.path.read_bytes()
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and (self.env.variables or self.env.fallback):
                self._signature = self._digest = None  # the environment alone configures
                return None
            self._signature = self._digest = None  # re-read whatever comes back
            self._report(f"oserror:{exc.errno}", [f"cannot read: {exc.strerror or exc}"])
            return None
        settled = time.time_ns() - st.st_mtime_ns >= _RACY_NS
        self._signature = signature if settled else None
        digest = hashlib.sha256(data).digest()
        if digest == self._digest:
            return None
        self._digest = digest
        try:
            source = str(self.path)
            document = parse_json_document(_decode(data, self.path), source)
            if not isinstance(document, dict):
                validate_document(document, source)  # raises, naming the file
            config = validate_layers(document, source, self.env)
        except ConfigError as exc:
            self._report(digest, exc.problems)
            return None
        if self._reported is not None:
            self._reported = None
            event(log, logging.INFO, "config_valid_again", path=self.path)
        return None if config == self.current else config

    def _report(self, state: object, problems: list[str]) -> None:
        if state == self._reported:
            return
        self._reported = state
        prefix = f"{self.path}: "
        details = "; ".join(p.removeprefix(prefix).replace("\n", " ") for p in problems)
        event(
            log,
            logging.WARNING,
            "config_invalid",
            path=self.path,
            problems=details,
            note="the previous config stays in force",
            action="fix the file; it is read again when it changes",
        )
