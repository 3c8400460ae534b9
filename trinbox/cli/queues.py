"""``trinbox queues MODULE:APP pause|resume --queue NAME [--table]``: pause a mounted queue in
its broker's pause table (``pauses=Pauses(..)``), or end the pause; every process serving it
stops (or starts again) claiming within one poll interval, and the pause outlives restarts.

Only the brokers' pools open: no startup hook runs and no subscription starts.
"""

from __future__ import annotations

import click

from ._queues import app_queues, choose, label, run_open

__all__ = ["command"]


@click.command("queues")
@click.argument("target", metavar="MODULE:APP")
@click.argument("action", type=click.Choice(["pause", "resume"]))
@click.option(
    "--queue", "queue_name", metavar="NAME", required=True, help="The queue (NAME or TABLE:NAME)."
)
@click.option(
    "--table",
    "whole_table",
    is_flag=True,
    help="The queue's whole table (every subscription of it), not its group alone.",
)
def command(target: str, action: str, queue_name: str, whole_table: bool) -> None:
    """Pause the queue NAME of MODULE:APP (pause): no process claims it until it is resumed,
    and deliveries in work finish; or end that pause (resume). A queue of a table with a
    Group field is its group (--table: the whole table). Opens only the database pools."""
    pause = action == "pause"
    app, queues = app_queues(target)
    (queue,) = choose(queues, queue_name, what=app.info.name)
    group = None if whole_table else queue.group
    shown = queue.table if group is None else label(queue)
    if queue.broker.pause_plan is None:
        msg = (
            f"{label(queue)}: a pause is kept in its broker's pause table, found a broker "
            f"without one; pass pauses=Pauses('app_pauses') to its SqlBroker"
        )
        raise click.ClickException(msg)

    async def write() -> None:
        await queue.broker.write_pause(queue.spec, group, pause=pause)

    run_open(app, write)
    if pause:
        click.echo(f"paused {shown}: serving processes stop claiming it within a poll interval")
    else:
        click.echo(f"resumed {shown}: serving processes claim it again within a poll interval")
