"""The Telegram channel: `TelegramAdapter` (adapter.py) with its update
intake, at-most-once sending, commands and message reading beside it."""

from channels.telegram.adapter import TelegramAdapter

__all__ = ["TelegramAdapter"]
