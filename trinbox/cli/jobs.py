"""``trinbox jobs MODULE:APP cancel ID...``: cancel rows of one of an app's queues, and say
what each was (``broker.cancel``): cancelled while queued, in work (its handler cancelled
through the app's cancel requests, where it uses them), already finished, or not found."""

from __future__ import annotations

import sys

import click

from .._api.cancelled import CancelResult
from .._operations.queues import Queue, parse_id
from ..errors import TrinboxError
from ._queues import app_queues, choose, label, run_open
from .run import one_line

__all__ = ["command", "said"]


def said(q: Queue, found: CancelResult) -> str:
    """What a cancel did, in words."""
    if found is CancelResult.QUEUED:
        return "cancelled while queued"
    if found is CancelResult.RUNNING:
        if q.broker.cancel_requests is None:
            return "in work, left running (the app writes no cancel requests)"
        return "in work: cancel requested from the process that holds it"
    if found is CancelResult.FINISHED:
        return "already finished"
    return "not found"


@click.command("jobs")
@click.argument("target", metavar="MODULE:APP")
@click.argument("action", type=click.Choice(["cancel"]))
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@click.option("--queue", "queue_name", metavar="NAME", help="The queue (NAME or TABLE:NAME).")
def command(target: str, action: str, ids: tuple[str, ...], queue_name: str | None) -> None:
    """Cancel jobs of MODULE:APP's queue (name it with --queue when the app mounts several):
    a queued row is settled as cancelled at once and never claimed again; a row in work has
    its handler cancelled in the process that holds it, where the app uses cancel requests
    (broker.use_cancel_requests); a finished row stays as it is. Exit status 1 when an id
    was not found."""
    app, queues = app_queues(target)
    chosen = choose(queues, queue_name, what=app.info.name)
    if len(chosen) != 1:
        names = ", ".join(label(q) for q in chosen) or "none"
        raise click.UsageError(
            f"{action} works on the rows of one queue, found {len(chosen)} ({names}); name "
            f"one with --queue"
        )
    q = chosen[0]
    row_type = q.spec.row_type
    assert row_type is not None  # a mounted queue's table has its row class
    try:
        wanted = [parse_id(q, text) for text in ids]
    except TrinboxError as exc:
        raise click.ClickException(one_line(exc)) from None

    async def cancel() -> list[CancelResult]:
        return [await q.broker.cancel(row_type, ident) for ident in wanted]

    results = run_open(app, cancel)
    for ident, found in zip(wanted, results, strict=True):
        click.echo(f"{label(q)} {ident}: {said(q, found)}")
    if CancelResult.NOT_FOUND in results:
        sys.exit(1)
