"""`trinbox inspect` (not built yet)."""

from __future__ import annotations

import click


@click.command("inspect")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("trinbox inspect is not built yet")
