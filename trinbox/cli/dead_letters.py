"""`trinbox dead-letters` (not built yet)."""

from __future__ import annotations

import click


@click.command("dead-letters")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("trinbox dead-letters is not built yet")
