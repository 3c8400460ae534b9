"""``trinbox prune MODULE:APP [--dry-run]``: one retention pass now over every queue of the
app that declares ``.retain(...)``, as the serving processes run one every minute: finished
rows and dead letters older than their age deleted, a batch a statement, each statement its
own short transaction; and the lapsed requests of each broker's ``CancelRequests`` table.
``--dry-run`` counts them and deletes none."""

from __future__ import annotations

import click

from .._dialects.retention import Kind
from .._engine.retention import Retention
from .._operations.cancel_requests import prune_lapsed
from .._operations.queues import Queue, retentions_of
from ..errors import TrinboxError
from ._load import load_app
from ._queues import label, run_open, table
from .run import one_line

__all__ = ["command"]

NONE = "—"
KINDS: tuple[tuple[Kind, str], ...] = (
    ("processed", "finished rows"),
    ("dead_letters", "dead letters"),
)


def _rows(n: int) -> str:
    return f"{n} row" + ("" if n == 1 else "s")


@click.command("prune")
@click.argument("target", metavar="MODULE:APP")
@click.option("--dry-run", is_flag=True, help="Count what a pass would delete; delete nothing.")
def command(target: str, dry_run: bool) -> None:
    """Run one retention pass now: delete the finished rows and dead letters of MODULE:APP's
    queues older than their .retain(processed=..., dead_letters=...) ages, a batch a
    statement, and its lapsed cancel requests (--dry-run: count them only). Safe beside
    serving processes."""
    try:
        app = load_app(target)
        found = retentions_of(app)
    except click.BadParameter as exc:
        raise click.ClickException(one_line(exc.message)) from None
    except TrinboxError as exc:
        raise click.ClickException(one_line(exc)) from None
    requesting = [b for b in app.brokers if b.cancel_requests is not None]
    if not found and not requesting:
        click.echo(f"{app.info.name} mounts no queue with .retain(...)")
        return

    async def work() -> tuple[list[dict[Kind, int]], list[int]]:
        counts: list[dict[Kind, int]] = []
        for _, retention in found:
            await retention.open()
            counts.append(await retention.prune(dry_run=dry_run))
        lapsed = [await prune_lapsed(b, dry_run=dry_run) for b in requesting]
        return counts, lapsed

    counts, lapsed = run_open(app, work)
    if found:
        click.echo(_report(found, counts))
    for broker, n in zip(requesting, lapsed, strict=True):
        assert broker.cancel_requests is not None
        click.echo(f"cancel requests in {broker.cancel_requests.label}: {n} lapsed")
    total = sum(sum(c.values()) for c in counts) + sum(lapsed)
    if dry_run:
        click.echo(f"{app.info.name}: {_rows(total)} to delete (--dry-run: none deleted)")
    else:
        click.echo(f"{app.info.name}: {_rows(total)} deleted")


def _report(found: list[tuple[Queue, Retention]], counts: list[dict[Kind, int]]) -> str:
    names = [q.name for q, _ in found]
    rows = [
        [
            label(q) if names.count(q.name) > 1 else q.name,
            *(str(c[kind]) if kind in c else NONE for kind, _ in KINDS),
        ]
        for (q, _), c in zip(found, counts, strict=True)
    ]
    headers = ["queue", *(title for _, title in KINDS)]
    return table(headers, rows, [False, True, True])
