"""`trinbox run` (not built yet)."""

from __future__ import annotations

import click


@click.command("run")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("trinbox run is not built yet")
