"""What ``inspect`` and ``dead-letters`` share: the app's queues, chosen by ``--queue``, an
error in one line, and plain aligned tables (click draws none)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import click
import trio

from .._engine.app import App
from .._operations.queues import Queue, opened, queues_of
from ..errors import TrinboxError
from ._load import load_app
from .run import one_line

__all__ = ["app_queues", "choose", "label", "run_open", "table"]

T = TypeVar("T")


def app_queues(target: str) -> tuple[App, list[Queue]]:
    """The app ``target`` names and its mounted queues; a bad target is one line."""
    try:
        app = load_app(target)
        return app, queues_of(app)
    except click.BadParameter as exc:
        raise click.ClickException(one_line(exc.message)) from None
    except TrinboxError as exc:
        raise click.ClickException(one_line(exc)) from None


def label(q: Queue) -> str:
    """How a queue is named on the command line: its name, or TABLE:NAME when names repeat."""
    return f"{q.table}:{q.name}"


def choose(queues: Sequence[Queue], name: str | None, *, what: str) -> list[Queue]:
    """The queues ``--queue`` names (all of them without it): a queue's name, or TABLE:NAME."""
    if name is None:
        return list(queues)
    found = [q for q in queues if name in (q.name, label(q))]
    known = ", ".join(label(q) for q in queues) or "none"
    if not found:
        msg = (
            f"--queue names a mounted queue, found {name!r}, which {what} has not (queues: {known})"
        )
        raise click.ClickException(msg)
    if len(found) > 1:
        msg = f"--queue {name!r} names {len(found)} queues; name one as TABLE:NAME ({known})"
        raise click.ClickException(msg)
    return found


def run_open(app: App, work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` with the app's brokers' pools open (nothing else of the app starts); a
    trinbox error (the connection, a statement) is one line."""

    async def main() -> T:
        async with opened(app.brokers):
            return await work()

    try:
        return trio.run(main)
    except TrinboxError as exc:
        raise click.ClickException(one_line(exc)) from None


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    """Columns aligned by their widest cell, numbers (``right``) to the right, two spaces
    between them."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        out = [
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)
        ]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])
