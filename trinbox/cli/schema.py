"""``trinbox schema MODULE:Row``: print the DDL of a row class's table (or of a ``Tracker``'s
seen-records table, or of a ``Ticks``' tick table)."""

from __future__ import annotations

from typing import cast

import click

from ..errors import TrinboxError
from ..schema import DIALECTS, DialectName, ddl_script
from ._load import load_table


@click.command("schema")
@click.argument("target", metavar="MODULE:Row")
@click.option(
    "--dialect",
    type=click.Choice(DIALECTS),
    default="postgres",
    show_default=True,
    help="The database to write the DDL for (mysql serves MySQL and MariaDB).",
)
@click.option(
    "--dead-letter",
    "dead_letter",
    metavar="NAME",
    default=None,
    help=(
        "The dead letter destination as the mount names it (.dead_letter(NAME)): "
        "[schema.]table also creates that table; a table with a Group field moves spent "
        "rows to the group NAME and needs none (its OriginGroup field keeps their group)."
    ),
)
def command(target: str, dialect: str, dead_letter: str | None) -> None:
    """Print the CREATE statements of the queue table that the row class MODULE:Row
    declares: its columns typed for the database, its claim index and, with --dead-letter,
    its dead letter table. Each statement ends with ';' and creates only what is missing.

    MODULE:NAME may also name a trinbox.outbox.Tracker (its seen-records table), a
    trinbox.schedules.Ticks (its tick table), a trinbox.Pauses (its pause table) or a
    trinbox.CancelRequests (its cancel request table).

    Put the output in your migrations; for development and tests,
    `await broker.create_tables(Row)` runs the same statements.
    """
    row = load_table(target)
    try:
        script = ddl_script(row, cast("DialectName", dialect), dead_letter=dead_letter)
    except TrinboxError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(script, nl=False)
