"""``trinbox inspect MODULE:APP [--json]``: each mounted queue's rows, the progress of its
rows in work, and each schedule's last and next tick, read-only.

Only the brokers' pools open; no startup hook runs and no subscription starts, so it is safe
beside a serving app. One statement per table (conditional aggregates, in the database's
clock), one per dead letter table, one per queue whose table keeps progress, and one per
schedule (its latest tick).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TypeAlias

import click

from .._engine.schedules import Schedule
from .._operations.queues import QueueDepth, QueuePause, depths, pauses_of, progress_of
from ._queues import app_queues, choose, run_open, table

__all__ = ["command", "render"]

NONE = "—"  # where the form cannot tell, or there is nothing to tell

Read: TypeAlias = tuple[
    list[QueueDepth],
    list[QueuePause | None],
    list[list[tuple[object, float]] | None],
    list[tuple[str, ...]],
]
"""What one inspection reads: depths, pauses, progress of rows in work, schedule rows."""

HEADERS = ("TABLE", "QUEUE", "DUE", "SCHEDULED", "IN WORK", "DEAD", "OLDEST DUE")
RIGHT = (False, False, True, True, True, True, True)


def _count(value: int | None) -> str:
    return NONE if value is None else str(value)


def age(seconds: float | None) -> str:
    """An age, in the unit that reads best."""
    if seconds is None:
        return NONE
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


PAUSED_HEADERS = ("PAUSED TABLE", "QUEUE", "SINCE")

PROGRESS_HEADERS = ("IN WORK TABLE", "QUEUE", "ROW", "PROGRESS")


def percent(fraction: float) -> str:
    """A progress fraction as a percentage, to a tenth where it is not whole."""
    shown = f"{fraction * 100:.1f}".removesuffix(".0")
    return f"{shown}%"


SCHEDULE_HEADERS = ("SCHEDULE", "WHEN", "TICKS", "LAST TICK", "NEXT TICK")


async def schedule_rows(schedules: tuple[Schedule, ...]) -> list[tuple[str, ...]]:
    """Each schedule's row of the schedules table: its times in the schedule's zone."""
    rows: list[tuple[str, ...]] = []
    for schedule in schedules:
        last, upcoming = await schedule.read_ticks()
        zone = schedule.when.zone
        rows.append(
            (
                schedule.name,
                str(schedule.when),
                schedule.ticks.label,
                NONE if last is None else last.astimezone(zone).isoformat(),
                upcoming.astimezone(zone).isoformat(),
            )
        )
    return rows


def render(found: list[QueueDepth]) -> str:
    """The text table of ``trinbox inspect``."""
    rows = [
        (
            d.table,
            d.queue,
            str(d.due),
            str(d.scheduled),
            _count(d.in_work),
            _count(d.dead),
            age(d.oldest_due_age_seconds),
        )
        for d in found
    ]
    return table(HEADERS, rows, RIGHT)


@click.command("inspect")
@click.argument("target", metavar="MODULE:APP")
@click.option("--json", "as_json", is_flag=True, help="A JSON list, one object per queue.")
@click.option("--queue", "queue_name", metavar="NAME", help="Only this queue (NAME or TABLE:NAME).")
def command(target: str, as_json: bool, queue_name: str | None) -> None:
    """Show each mounted queue of MODULE:APP: rows due now, scheduled for later, in work,
    dead letters, and how long the oldest due row has waited; then the paused queues
    (`trinbox queues MODULE:APP pause`; --json: "paused" where the broker has a pause
    table), and each schedule's last tick (fired by any process) and next (text only: --json
    lists the queues).

    IN WORK counts leased rows (lease tables); row locks and advisory keys cannot be read
    without taking locks, so it shows — there (and their rows in work count as due). Rows
    marked processed are not counted. Then each leased row whose handler reported progress
    (keys.Progress, on a table with a Progress field; --json: "progress"). Opens only the
    database pools: safe beside a serving app."""
    app, queues = app_queues(target)
    chosen = choose(queues, queue_name, what=app.info.name)

    async def read() -> Read:
        queues = await depths(chosen)
        paused = await pauses_of(chosen)
        progress = await progress_of(chosen)
        ticks = [] if as_json or queue_name else await schedule_rows(app.schedules)
        return queues, paused, progress, ticks

    found, paused, progress, schedules = run_open(app, read)
    if as_json:
        listed: list[dict[str, object]] = []
        for d, p, g in zip(found, paused, progress, strict=True):
            entry: dict[str, object] = asdict(d)
            if p is not None:
                entry["paused"] = p.paused
            if g is not None:
                entry["progress"] = [{"id": i, "progress": f} for i, f in g]
            listed.append(entry)
        click.echo(json.dumps(listed, indent=2, default=str))
        return
    if found:
        click.echo(render(found))
    elif not schedules:
        click.echo(f"{app.info.name} mounts no queue")
    held = [
        (d.table, d.queue, NONE if p.since is None else p.since.isoformat())
        for d, p in zip(found, paused, strict=True)
        if p is not None and p.paused
    ]
    if held:
        click.echo()
        click.echo(table(PAUSED_HEADERS, held, (False, False, False)))
    reported = [
        (d.table, d.queue, str(i), percent(f))
        for d, g in zip(found, progress, strict=True)
        for i, f in g or ()
    ]
    if reported:
        click.echo()
        click.echo(table(PROGRESS_HEADERS, reported, (False, False, True, True)))
    if schedules:
        if found:
            click.echo()
        click.echo(table(SCHEDULE_HEADERS, schedules, (False,) * len(SCHEDULE_HEADERS)))
