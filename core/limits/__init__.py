"""Limits and spend: rates per user and chat, token budgets per user, chat
and bot (checked before a call, counted after, in the database), and the
usage they are counted from."""

from core.limits.meter import BudgetSpent, Meter, Payer
from core.limits.rates import RateLimiter

__all__ = ["BudgetSpent", "Meter", "Payer", "RateLimiter"]
