"""`trinbox schema` (not built yet)."""

from __future__ import annotations

import click


@click.command("schema")
def command() -> None:
    """Not built yet."""
    raise click.ClickException("trinbox schema is not built yet")
