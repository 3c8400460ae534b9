"""`trinbox asyncapi` (not built yet)."""

from __future__ import annotations

import click


@click.command("asyncapi")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("trinbox asyncapi is not built yet")
