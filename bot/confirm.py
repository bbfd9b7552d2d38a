"""Asking before a command erases or replaces data: a person at a terminal
is asked; a script must say --yes, or nothing is done."""

from __future__ import annotations

import sys

import click

from bot.context import fail


def interactive() -> bool:
    """Whether a person can answer a question on this terminal."""
    return sys.stdin.isatty()


def confirm_or_fail(plan: str, *, yes: bool, verb: str = "erase") -> None:
    """Return when what `plan` describes may go ahead; otherwise one
    `kept: ...` line and exit 1, with nothing done. `verb`: what is asked
    ("erase", "restore")."""
    if yes:
        return
    untouched = "Nothing erased" if verb == "erase" else "Nothing changed"
    if not interactive():
        fail(f"{plan} {untouched}: add --yes.")
    click.echo(plan, err=True)
    if not click.confirm(f"{verb.capitalize()} it?", default=False, err=True):
        fail(untouched.lower())
