"""Limits and spend: rates per user and chat, token budgets per user, chat
and bot (checked before a call, counted after, in the database), and the
usage they are counted from."""

from core.limits.admission import Admissions
from core.limits.meter import BudgetSpent, Meter, Payer

__all__ = ["Admissions", "BudgetSpent", "Meter", "Payer"]
