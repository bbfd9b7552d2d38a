"""KeptError: the root of kept's own exceptions.

Every error kept raises on purpose (a bad config, a model that failed, a
store refusal, a channel that cannot start) derives from it, so a caller that
must tell kept's errors from bugs and library failures catches one class.
"""

from __future__ import annotations


class KeptError(Exception):
    """An error kept raises on purpose; its message says what to fix."""
