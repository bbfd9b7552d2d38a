"""Who a channel answers: the settings the pipeline's admission reads
(channels/base.py ChannelAdapter.admission), what an unknown user is told
under dmPolicy `pairing`, and the warnings `kept run` gives at start."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from core.clock import Clock
from core.config.model import ChannelAccess, DmPolicy, GroupPolicy
from core.logs import event
from core.pairing import PairingRequest, same_username

# What `admission` decides for a sender in a chat: answer, offer a pairing
# code (an unknown user in a DM under dmPolicy `pairing`), or ignore.
Admission = Literal["yes", "pair", "no"]


@dataclass(frozen=True, slots=True)
class Access:
    """Who a channel answers, as its settings say now."""

    dm_policy: DmPolicy = "open"
    allow_from: tuple[str, ...] = ()
    groups: frozenset[str] = frozenset()
    group_policy: GroupPolicy = "open"
    # (old key, new key) for each renamed key the settings still use.
    renamed: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, settings: ChannelAccess) -> Access:
        """A platform's channel settings (channels.<platform> in the config)."""
        return cls(
            dm_policy=settings.dm_policy,
            allow_from=tuple(settings.allow_from),
            groups=frozenset(settings.group_ids()),
            group_policy=settings.group_policy,
            renamed=tuple(settings.renamed_keys()),
        )

    def lists(self, user_id: str, username: str | None = None) -> bool:
        """Whether `allowFrom` names the user. An entry of digits is an id
        and matches only the id (a Discord username may be all digits: it
        must not pass for someone's id); `@name` matches only the username;
        any other entry either."""
        for raw in self.allow_from:
            entry = raw.strip()
            if not entry:
                continue
            if _is_id(entry):
                if entry == user_id.strip():
                    return True
            elif entry.startswith("@"):
                if same_username(username, entry):
                    return True
            elif entry.lower() == user_id.lower() or same_username(username, entry):
                return True
        return False


def _is_id(entry: str) -> bool:
    digits = entry.removeprefix("-")
    return digits.isascii() and digits.isdigit()


def pairing_notice(request: PairingRequest, clock: Clock) -> str:
    """What an unknown user is told: their code and who approves it."""
    minutes = max(1, round((request.expires_at - clock.now()).total_seconds() / 60))
    lasts = f"{minutes} minutes" if minutes < 90 else f"{round(minutes / 60)} hours"
    return (
        "I only talk to people my owner has approved.\n"
        f"Your pairing code: {request.code}\n"
        f"Send it to the owner of this bot; they approve it with "
        f"`kept pairing approve {request.code}`. The code expires in {lasts}; "
        "until it is approved, what you write here is not read."
    )


def announce_access(
    log: logging.Logger, platform: str, access: Access, before: Access | None = None
) -> None:
    """One warning per setting an operator should know about: a renamed
    key still in use, and anyone on the internet being answered on the
    operator's API key. At start `before` is None; a reload passes the
    access in force until then, and the same warnings are given for what
    it widened (a policy opened; users or groups added)."""
    key = f"channels.{platform}"
    for old, new in access.renamed:
        if before is not None and (old, new) in before.renamed:
            continue
        event(
            log,
            logging.WARNING,
            "config_key_renamed",
            key=f"{key}.{old}",
            action=f"rename it to {key}.{new} (the old name is still read)",
        )
    if access.dm_policy == "open" and (before is None or before.dm_policy != "open"):
        event(
            log,
            logging.WARNING,
            f"{platform}_dms_open",
            dm_policy="open",
            action=f"anyone who finds the bot is answered on your API key; set "
            f"{key}.dmPolicy to pairing or allowlist unless that is what you want",
        )
    if access.group_policy == "open" and (before is None or before.group_policy != "open"):
        event(
            log,
            logging.WARNING,
            f"{platform}_groups_open",
            group_policy="open",
            action=f"every group the bot is added to is answered; set "
            f"{key}.groupPolicy to allowlist and list them in {key}.groups to limit it",
        )
    if before is None:
        return
    if before.dm_policy == "allowlist" and access.dm_policy == "pairing":
        event(
            log,
            logging.WARNING,
            f"{platform}_dms_pairing",
            dm_policy="pairing",
            action="unknown users now get a pairing code; approve only those you know",
        )
    added_users = sorted(set(access.allow_from) - set(before.allow_from))
    added_groups = sorted(access.groups - before.groups)
    for name, added in (("allowFrom", added_users), ("groups", added_groups)):
        if added:
            event(
                log,
                logging.WARNING,
                f"{platform}_access_widened",
                key=f"{key}.{name}",
                added=",".join(added),
                action=f"these are answered from now on; remove them from {key}.{name} "
                "if that is not what you want",
            )
