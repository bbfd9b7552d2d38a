"""What a one-off call to a platform found, for the CLI: `kept doctor`'s token
check and `kept pairing approve`'s direct message. Each platform's package
makes the call (its probe module); this says what came back in one shape, so
the CLI words both platforms' answers alike."""

from __future__ import annotations

from dataclasses import dataclass

# A command the operator waits for: one request, never retried, and not
# for long.
PROBE_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class BotAccount:
    """The bot a token belongs to."""

    id: str
    username: str
    # Telegram's privacy mode off; None on a platform without one.
    reads_all_group_messages: bool | None = None


class ProbeFailed(Exception):
    """The platform at `root` did not confirm the token."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.root = root


class TokenRejected(ProbeFailed):
    """The platform answered that the token is not valid."""

    def __init__(self, root: str, status: int) -> None:
        super().__init__(root)
        self.status = status


class Unreachable(ProbeFailed):
    """No answer came; `reason` (the token masked) says what the network said."""

    def __init__(self, root: str, reason: str) -> None:
        super().__init__(root)
        self.reason = reason


class UnexpectedAnswer(ProbeFailed):
    """An answer that is neither the bot nor a refusal of the token."""

    def __init__(self, root: str, status: int) -> None:
        super().__init__(root)
        self.status = status


class NotABot(ProbeFailed):
    """The token is valid but a user's, not a bot's."""


class DirectSendFailed(Exception):
    """Why a direct message was not sent; the message is for the operator and
    never holds the token."""
