"""``trinbox dead-letters MODULE:APP list|redrive``: show a queue's dead letters, or move
chosen ones back into their queue.

A queue's dead letters in a dead letter group are the rows that came from its group (their
OriginGroup field holds it); in a dead letter table, every row. A redrive makes each row a
first delivery again (attempt 1, as a publish writes it), due now, lease cleared, in one
transaction: a dead letter group's rows go back by an update of their group (to the queue's
own, or ``--to-group``), a dead letter table's by a copy into the queue's table and a delete.
Large moves run in chunks inside that one transaction, with a progress bar on stderr.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click

from .._operations.queues import (
    CHUNK,
    DeadRow,
    Queue,
    Redriven,
    dead_rows,
    parse_id,
    redrive,
    redrive_group,
)
from .._util import as_bytes
from ..errors import DeclarationError, TrinboxError
from ._queues import app_queues, choose, label, run_open, table
from .run import one_line

__all__ = ["command", "preview"]

NONE = "—"
PREVIEW = 48  # characters of a payload shown


def preview(q: Queue, row: DeadRow) -> str:
    """The payload as text (or the row's data columns), cut to ``PREVIEW`` characters."""
    spec = q.spec
    if spec.payload is not None:
        value = row.values.get(spec.payload.field)
        raw = as_bytes(value)
        text = str(value) if raw is None else raw.decode("utf-8", errors="replace")
    else:
        text = " ".join(f"{c.field}={row.values.get(c.field)!r}" for c in spec.data)
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…"


def _letters(n: int) -> str:
    return f"{n} dead letter" + ("" if n == 1 else "s")


def _time(value: object) -> str:
    if value is None:
        return NONE
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)[:19]  # SQLite's text, to the second


def _list(queues: list[Queue], found: list[tuple[list[DeadRow], int]]) -> str:
    rows: list[tuple[str, ...]] = []
    for q, (dead, _total) in zip(queues, found, strict=True):
        for row in dead:
            rows.append(
                (
                    label(q),
                    str(row.id),
                    NONE if row.attempts is None else str(row.attempts),
                    _time(row.retry_after) if q.spec.retry_after is not None else NONE,
                    preview(q, row),
                )
            )
    lines: list[str] = []
    if rows:
        headers = ("QUEUE", "ID", "ATTEMPTS", "RETRY AFTER", "PAYLOAD")
        lines.append(table(headers, rows, (False, True, True, False, False)))
    for q, (dead, total) in zip(queues, found, strict=True):
        dest = q.dead_letter.label if q.dead_letter else NONE
        shown = f", {len(dead)} shown" if len(dead) < total else ""
        lines.append(f"{label(q)}: {_letters(total)} in {dest}{shown}")
    return "\n".join(lines)


@dataclass
class _Bar:
    """A progress bar on stderr, made once the move's size is known (large moves only)."""

    chunk: int
    bar: Any = None

    def start(self, count: int) -> None:
        if count > self.chunk:
            self.bar = click.progressbar(length=count, label="redriving", file=sys.stderr)
            self.bar.__enter__()

    def step(self, moved: int) -> None:
        if self.bar is not None:
            self.bar.update(moved)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


def _ids(q: Queue, text: str) -> list[object]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise click.UsageError("--ids takes ids separated by commas, like --ids 12,13,20")
    try:
        return [parse_id(q, p) for p in parts]
    except TrinboxError as exc:
        raise click.ClickException(one_line(exc)) from None


@click.command("dead-letters")
@click.argument("target", metavar="MODULE:APP")
@click.argument("action", type=click.Choice(["list", "redrive"]))
@click.option("--queue", "queue_name", metavar="NAME", help="The queue (NAME or TABLE:NAME).")
@click.option("--ids", metavar="ID,ID,...", help="redrive: these dead letters.")
@click.option("--all", "every", is_flag=True, help="redrive: every dead letter of the queue.")
@click.option(
    "--to-group",
    metavar="GROUP",
    help="redrive: into this group of the table, not the queue's own.",
)
@click.option(
    "--limit", default=50, show_default=True, type=click.IntRange(min=1), help="list: rows shown."
)
@click.option("--chunk-size", default=CHUNK, type=click.IntRange(min=1), hidden=True)
def command(
    target: str,
    action: str,
    queue_name: str | None,
    ids: str | None,
    every: bool,
    to_group: str | None,
    limit: int,
    chunk_size: int,
) -> None:
    """List the dead letters of MODULE:APP's queues, or redrive chosen ones back into their
    queue (--ids 12,13 or --all; with several dead-lettering queues, name one with --queue).

    In a dead letter group, a queue's dead letters are the rows that came from its group,
    and a redrive returns them there (or into --to-group). A redriven row is a first
    delivery again (attempt 1), due now, in one transaction; ids not found among the queue's
    dead letters, or found among another queue's, are reported and left (exit status 1)."""
    app, queues = app_queues(target)
    with_dead = [q for q in queues if q.dead_letter is not None]
    chosen = choose(with_dead, queue_name, what=f"{app.info.name} (with a dead letter destination)")
    if action == "list":
        if ids is not None or every or to_group is not None:
            raise click.UsageError(
                "--ids, --all and --to-group say what redrive moves; list takes none of them"
            )

        async def read() -> list[tuple[list[DeadRow], int]]:
            return [await dead_rows(q, limit=limit) for q in chosen]

        if not chosen:
            click.echo(f"{app.info.name} mounts no queue with a dead letter destination")
            return
        click.echo(_list(chosen, run_open(app, read)))
        return
    if (ids is None) == (not every):
        raise click.UsageError(
            "redrive moves the dead letters --ids 12,13,... names, or --all of them; give one"
            + (", not both" if every else "")
        )
    if len(chosen) != 1:
        names = ", ".join(label(q) for q in chosen) or "none"
        raise click.UsageError(
            f"redrive moves the dead letters of one queue, found {len(chosen)} with a dead "
            f"letter destination ({names}); name one with --queue"
        )
    q = chosen[0]
    try:
        redrive_group(q, to_group)
    except DeclarationError as exc:
        raise click.UsageError(one_line(exc)) from None
    wanted = None if every else _ids(q, str(ids))
    bar = _Bar(chunk_size)

    async def move() -> Redriven:
        try:
            return await redrive(
                q,
                wanted,
                to_group=to_group,
                chunk=chunk_size,
                progress=bar.step,
                on_count=bar.start,
            )
        finally:
            bar.close()

    done = run_open(app, move)
    moved = ", ".join(str(i) for i in done.moved)
    into = "back into the queue" if to_group is None else f"into the group {to_group}"
    click.echo(
        f"redrove {_letters(len(done.moved))} of {label(q)} {into}"
        + (f": {moved}" if moved else "")
    )
    if done.elsewhere:
        others = ", ".join(
            f"{i} ({'no group recorded' if g is None else 'from ' + g})" for i, g in done.elsewhere
        )
        click.echo(
            f"Error: dead letters of another queue, not of {label(q)}, left where they are: "
            f"{others}; redrive each with --queue naming the queue it came from",
            err=True,
        )
    if done.held:
        held = ", ".join(f"{i} ({key})" for i, key in done.held)
        click.echo(
            f"Error: dead letters whose dedup key an unfinished row of {q.spec.label} holds, "
            f"left where they are: {held}; redrive them once that row is finished",
            err=True,
        )
    if done.missing:
        missing = ", ".join(str(i) for i in done.missing)
        click.echo(f"Error: not found among the dead letters of {label(q)}: {missing}", err=True)
    if done.elsewhere or done.missing or done.held:
        sys.exit(1)
