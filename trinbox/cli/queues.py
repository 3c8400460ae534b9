"""``trinbox queues pause|resume MODULE:APP QUEUE``: pause a mounted queue in its broker's
pause table (``pauses=Pauses(..)``), or end the pause; every process serving it stops (or
starts again) claiming within one poll interval, and the pause outlives restarts.

Only the brokers' pools open: no startup hook runs and no subscription starts.
"""

from __future__ import annotations

import click

from ._queues import app_queues, choose, label, run_open

__all__ = ["command"]


@click.group("queues")
def command() -> None:
    """Pause and resume the mounted queues of an app."""


def _write(target: str, queue_name: str, whole_table: bool, *, pause: bool) -> None:
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


WHOLE_TABLE = click.option(
    "--table",
    "whole_table",
    is_flag=True,
    help="The queue's whole table (every subscription of it), not its group alone.",
)


@command.command("pause")
@click.argument("target", metavar="MODULE:APP")
@click.argument("queue_name", metavar="QUEUE")
@WHOLE_TABLE
def pause(target: str, queue_name: str, whole_table: bool) -> None:
    """Pause QUEUE (its name, or TABLE:NAME) of MODULE:APP: no process claims it until it is
    resumed; deliveries in work finish. A queue of a table with a Group field is its group
    (--table: the whole table)."""
    _write(target, queue_name, whole_table, pause=True)


@command.command("resume")
@click.argument("target", metavar="MODULE:APP")
@click.argument("queue_name", metavar="QUEUE")
@WHOLE_TABLE
def resume(target: str, queue_name: str, whole_table: bool) -> None:
    """End the pause of QUEUE (its name, or TABLE:NAME) of MODULE:APP that `queues pause`
    wrote (--table: the whole table's)."""
    _write(target, queue_name, whole_table, pause=False)
