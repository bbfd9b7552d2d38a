"""Masking of secrets in message text before it leaves the store layer.

People paste keys, tokens and card numbers into chats; snippets and history
must not carry them back out to a model or an admin terminal. A replacement
keeps a hint of what was there (`sk-…[redacted]`, `[redacted card]`) but never
a secret character beyond a short, publicly documented prefix.

Speed: most texts hold no secret, so each rule runs only when a literal that
every match contains is present; `in` costs a fraction of a regex scan, and
one big alternation would defeat the engine's literal-prefix search. Safety:
token rules never start inside a run of token characters and are possessive,
so a long run is scanned once, not once per position; other repeats are
bounded, which keeps 4 KB of adversarial input linear.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

REDACTED = "[redacted]"

_TOK = r"A-Za-z0-9_\-"
_NOT_IN_RUN = rf"(?<![{_TOK}])"

Replace = Callable[[re.Match[str]], str]


@dataclass(frozen=True, slots=True)
class _Rule:
    apply: Callable[[str], str]
    # Run only if a literal occurs in the text (lowercased text when `lower`)
    # or, for rules without a good literal, if `gate_re` is found.
    literals: tuple[str, ...] = ()
    gate_re: re.Pattern[str] | None = None
    lower: bool = False


def _prefixed(m: re.Match[str]) -> str:
    # Group "p" is the provider's documented prefix: safe to show, and it tells
    # the reader which kind of credential was there.
    return f"{m['p']}…{REDACTED}"


def _fixed(hint: str) -> Replace:
    return lambda m: hint


def _openai(m: re.Match[str]) -> str:
    # "sk-learn-style-notes" is prose, not a key: real keys are random.
    slug = re.fullmatch(r"[a-z]+(?:[_\-][a-z]+)+", m["body"])
    return m.group() if slug else _prefixed(m)


# (regex, replace) of every token rule, also used to give an assigned value
# (api_key=sk-…) its provider hint.
_TOKENS: list[tuple[re.Pattern[str], Replace]] = []


def _token(regex: str, replace: Replace, literals: tuple[str, ...], gate: str = "") -> _Rule:
    compiled = re.compile(regex)
    _TOKENS.append((compiled, replace))
    return _Rule(partial(compiled.sub, replace), literals, re.compile(gate) if gate else None)


def _prefixed_token(prefixes: str, body: str, literals: tuple[str, ...] = ()) -> _Rule:
    names = sorted(prefixes.split(), key=len, reverse=True)
    alternatives = "|".join(re.escape(p) for p in names)
    replace = _openai if "sk-" in names else _prefixed
    return _token(f"{_NOT_IN_RUN}(?P<p>{alternatives}){body}", replace, literals or tuple(names))


# Every gate literal is a substring of every match; prefixes sharing a
# substring that prose rarely holds share one gate: fewer checks are cheaper.
_TOKEN_RULES = (
    # Anthropic, OpenAI project/service/admin/legacy, OpenRouter.
    _prefixed_token(
        "sk-ant- sk-proj- sk-svcacct- sk-admin- sk-or-v1- sk-",
        r"(?P<body>[A-Za-z0-9_\-]{20,}+)",
        ("sk-",),
    ),
    # Stripe secret/restricted/webhook, GitHub, Hugging Face, npm, Groq. The
    # body has no underscore, so identifiers like hf_hub_download stay.
    _prefixed_token(
        "sk_live_ rk_live_ sk_test_ rk_test_ whsec_ ghp_ gho_ ghu_ ghs_ ghr_ hf_ npm_ gsk_",
        r"[A-Za-z0-9]{16,}+",
        ("_",),
    ),
    _prefixed_token("github_pat_", r"[A-Za-z0-9_]{20,}+"),
    _prefixed_token("glpat-", r"[A-Za-z0-9_\-]{20,}+"),  # GitLab
    _prefixed_token(
        "xoxb- xoxp- xoxa- xoxr- xoxs- xoxe- xapp-", r"[A-Za-z0-9\-]{10,}+", ("xox", "xapp-")
    ),
    _prefixed_token("AKIA ASIA", r"[A-Z0-9]{16}"),  # AWS access key id
    _prefixed_token("AIza", r"[A-Za-z0-9_\-]{30,}+"),  # Google
    _prefixed_token("pypi-", r"AgE[A-Za-z0-9_\-]{40,}+"),
    _prefixed_token("xai-", r"[A-Za-z0-9]{30,}+"),
    _prefixed_token("SG.", r"[A-Za-z0-9_\-]{16,}+\.[A-Za-z0-9_\-]{16,}+"),  # SendGrid
    _token(
        rf"{_NOT_IN_RUN}eyJ[{_TOK}]{{4,}}+\.eyJ[{_TOK}]{{4,}}+\.[{_TOK}]*+",
        _fixed("[redacted jwt]"),
        ("eyJ",),
    ),
    # <bot id>:<35 characters> (with some slack); "bot" may touch the id, as
    # in https://api.telegram.org/bot<token>/getMe. The gate starts with a
    # literal, so the engine jumps from colon to colon.
    _token(
        rf"(?:{_NOT_IN_RUN}|(?<=bot))\d{{6,12}}+:[{_TOK}]{{33,}}+",
        _fixed("[redacted telegram token]"),
        (),
        rf":[{_TOK}]{{33}}",
    ),
    # base64(user id).timestamp.hmac: what a Discord bot logs in with.
    _token(
        rf"{_NOT_IN_RUN}[MNO][{_TOK}]{{23,27}}+\.[{_TOK}]{{6}}\.[{_TOK}]{{27,40}}+",
        _fixed("[redacted discord token]"),
        (),
        rf"\.[{_TOK}]{{6}}\.",
    ),
)


def _mask_value(value: str) -> str:
    """Mask an assigned or header value, keeping quotes and any token hint."""
    quote = value[0] if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0] else ""
    core = value[1:-1] if quote else value
    if "[redacted" in core:
        return value  # masked by an earlier pass; keep its hint
    hint = REDACTED
    for regex, replace in _TOKENS:
        if m := regex.fullmatch(core):
            hint = replace(m)
            break
    return quote + (REDACTED if hint == core else hint) + quote


def _keyed(m: re.Match[str]) -> str:
    return m["key"] + _mask_value(m["value"])


# A bearer value made only of letters is a word ("the bearer responsibility")
# unless it is long; real tokens almost always hold a digit or punctuation.
_WORDY = re.compile(r"[A-Za-z]{8,19}")


def _bearer(m: re.Match[str]) -> str:
    return m.group() if _WORDY.fullmatch(m["value"]) else m["key"] + REDACTED


# key=value, key: value, "key": "value", key => value. A case-insensitive
# scan for the keys would try every position (slow on French text, where
# "passé" passes the gate), so assignments are found from their separator,
# which is rare, and the key is checked just before it.
_SEP = re.compile(r"[:=]>?")  # a leading class lets the engine skip ahead
_WORD_KEYS = ("password", "passwd", "passphrase", "pwd", "secret", "token", "credential")
_KINDS = ("api", "access", "secret", "private", "auth", "signing", "encryption", "master")
_KEYS = (*_WORD_KEYS, "credentials", *(f"{k}{j}key" for k in _KINDS for j in ("", "_", "-")))
_VALUE = re.compile(r"[ \t]*+(\"[^\"\n]{1,256}+\"|'[^'\n]{1,256}+'|[^\s\"'&,;]{1,256}+)")


def _assignments(text: str) -> str:
    # The key is matched as a suffix, so any prefix works (DB_PASSWORD,
    # client_secret), and it must touch the separator: max_tokens=5 stays.
    parts: list[str] = []
    done = 0
    for sep in _SEP.finditer(text):
        start, end = sep.span()
        if start < done:
            continue
        before = text[max(0, start - 32) : start].rstrip(" \t\"'").lower()
        if not before.endswith(_KEYS) or (value := _VALUE.match(text, end)) is None:
            continue
        parts += (text[done : value.start(1)], _mask_value(value[1]))
        done = value.end(1)
    return "".join((*parts, text[done:])) if parts else text


# Card digits include Persian and Arabic-Indic ones: a Persian keyboard types
# those by default, and int() reads them for the Luhn check.
_DIGIT = "0-9\u06f0-\u06f9\u0660-\u0669"
_CARD_GROUP = re.compile(f"[{_DIGIT}]+")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (1 + i % 2)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _card(m: re.Match[str]) -> str:
    # The candidate is a whole run of digit groups. A card often sits next to
    # other numbers ("order 12 4111 1111 1111 1111 2024"), and a run may hold
    # several cards, so from left to right take the longest span of whole
    # groups with 13–19 digits that passes Luhn. Groups before a span's last
    # need ≥ 4 digits, so a list of small numbers ("10 20 30 …") is no card.
    text = m.group()
    groups = [g.span() for g in _CARD_GROUP.finditer(text)]
    parts: list[str] = []
    done = i = 0
    while i < len(groups):
        best, count = None, 0
        for j in range(i, len(groups)):
            count += groups[j][1] - groups[j][0]
            if count > 19:
                break
            if count >= 13 and _luhn("".join(text[a:b] for a, b in groups[i : j + 1])):
                best = j
            if groups[j][1] - groups[j][0] < 4:
                break
        if best is None:
            i += 1
            continue
        parts += (text[done : groups[i][0]], "[redacted card]")
        done, i = groups[best][1], best + 1
    return "".join((*parts, text[done:]))


def _sub(regex: str, replace: Replace) -> Callable[[str], str]:
    return partial(re.compile(regex).sub, replace)


_RULES: tuple[_Rule, ...] = (
    # A truncated block (no END line) is masked to the end of the text.
    _Rule(
        _sub(
            r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            r"(?s:.*?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|.*)",
            _fixed("[redacted private key]"),
        ),
        ("PRIVATE KEY",),
    ),
    # Authorization: Bearer/Basic/Token/Bot <credentials>; the scheme is kept.
    _Rule(
        _sub(
            r"(?i)(?P<key>\b(?:proxy-)?authorization[\"']?\s*+[:=]\s*+[\"']?"
            r"(?:(?:bearer|basic|token|bot|digest)\s++)?)(?P<value>[^\s\"',;]++)",
            _keyed,
        ),
        ("authorization",),
        lower=True,
    ),
    _Rule(
        _sub(r"(?i)(?P<key>\bbearer\s++)(?P<value>[A-Za-z0-9\-._~+/]{8,}+=*+)", _bearer),
        ("bearer",),
        lower=True,
    ),
    # https://user:password@host: the user name stays, the password goes.
    _Rule(
        _sub(r"(?<=://)(?P<key>[^/\s:@]{1,256}+:)(?P<value>[^/\s@]{1,256}+)(?=@)", _keyed),
        ("://",),
    ),
    _Rule(_assignments, ("pass", "pwd", "secret", "token", "credential", "key"), lower=True),
    *_TOKEN_RULES,
    # 13–19 digits in groups split by one space or dash, Luhn-checked in
    # _card. Runs last so that digits inside keys are already masked. Every
    # candidate _card accepts holds 8 digits with at most one separator.
    _Rule(
        _sub(rf"[{_DIGIT}](?<![{_DIGIT}][{_DIGIT}])(?:[ \-]?[{_DIGIT}]){{12,}}+", _card),
        gate_re=re.compile(rf"[{_DIGIT}][{_DIGIT}]{{3}}[ \-]?[{_DIGIT}]{{4}}"),
    ),
)


class Redactor:
    """Masks secrets in text; one instance per set of configured patterns."""

    def __init__(self, extra_patterns: Sequence[str] = ()) -> None:
        self._extra: list[re.Pattern[str]] = []
        for pattern in extra_patterns:
            try:
                self._extra.append(re.compile(pattern))
            except (re.error, TypeError) as exc:
                raise ValueError(f"invalid redaction pattern {pattern!r}: {exc}") from exc

    def redact(self, text: str) -> str:
        lowered = text.lower()
        for rule in _RULES:
            haystack = lowered if rule.lower else text
            if rule.gate_re is not None:
                gated = rule.gate_re.search(haystack) is not None
            else:
                gated = any(literal in haystack for literal in rule.literals)
            if gated:
                text = rule.apply(text)
        for pattern in self._extra:
            text = pattern.sub(_replace_extra, text)
        return text


def _replace_extra(m: re.Match[str]) -> str:
    # A configured pattern that matches the empty string must not sprinkle
    # markers between every character.
    return REDACTED if m.group() else ""
