"""Asking before a command erases: a person at a terminal is asked; a
script must say --yes, or nothing is erased."""

from __future__ import annotations

import sys

import click

from bot.context import fail


def interactive() -> bool:
    """Whether a person can answer a question on this terminal."""
    return sys.stdin.isatty()


def confirm_or_fail(plan: str, *, yes: bool) -> None:
    """Return when the erasure `plan` describes may go ahead; otherwise one
    `kept: ...` line and exit 1, with nothing erased."""
    if yes:
        return
    if not interactive():
        fail(f"{plan} Nothing erased: add --yes.")
    click.echo(plan, err=True)
    if not click.confirm("Erase it?", default=False, err=True):
        fail("nothing erased")
