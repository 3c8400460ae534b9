"""The statements of retention (``.retain(processed=..., dead_letters=...)`` on a mount, and
``trinbox prune``): finished rows and dead letters deleted by age, a short batch at a time.
Pure text, no I/O.

Each kind of row pruned is a :class:`Prune`: ``delete`` removes at most ``RETAIN_BATCH`` of
them older than the ``before`` slot, the first by id, in one statement that is its own
transaction (repeated while it finds that many, so no transaction is ever long); ``count``
counts them all (``trinbox prune --dry-run``). The kinds:

    processed     rows of the table marked finished (``ProcessedAt`` before ``before``);
                  an unfinished row (NULL) is never one
    dead_letters  dead letters (``DeadLetteredAt`` before ``before``): in a dead letter
                  group, the table's rows of that group; in a dead letter table, its rows

PostgreSQL selects the batch ``FOR UPDATE SKIP LOCKED``, passing over a row another
transaction holds; SQLite's one writer needs none; MySQL deletes with ``ORDER BY ... LIMIT``
(no subquery of the table it deletes from) at READ COMMITTED (``prune_begin``), locking
only the rows it deletes. ``before`` is the broker's clock's now less the age kept, on the
clock that wrote the marks: ``now`` reads the server's under the database clock.

Another table trinbox keeps (cancel requests, when they come) adds a kind here, with its
own time column, and the retention loop prunes it with the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from .._declare._spec import TableSpec
from ..errors import DeclarationError
from ._base import DeadLetter, Dialect
from ._statement import Frag, P, Sql, Statement

__all__ = ["RETAIN_BATCH", "Kind", "Prune", "RetentionPlan", "check_ages", "retention_plan"]

RETAIN_BATCH = 1000
"""Rows one retention statement deletes at most: a short transaction, repeated while it
finds that many."""

Kind: TypeAlias = Literal["processed", "dead_letters"]


@dataclass(frozen=True, slots=True)
class Prune:
    """One kind of row retention deletes: where (``table``), its batch ``delete`` and its
    ``count``, both over the rows older than the ``before`` slot."""

    kind: Kind
    table: str
    delete: Statement
    count: Statement


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """What one mount prunes (``prunes``, in order), what runs before each delete on its
    connection (``begin``: MySQL's level), and the server's now (``now``)."""

    prunes: tuple[Prune, ...]
    begin: Statement | None
    now: Statement


def retention_plan(
    dialect: Dialect,
    spec: TableSpec,
    dead_letter: DeadLetter | None,
    *,
    processed: bool,
    dead_letters: bool,
    where: str,
) -> RetentionPlan:
    """The retention of ``spec``'s table on ``dialect``: its finished rows (``processed``)
    and its dead letters in ``dead_letter`` (``dead_letters``). A kind the table cannot tell
    the age of is refused, naming ``where`` and the field to add."""
    order = dialect.column(spec.id)
    check_ages(spec, processed=processed, dead_letters=dead_letters, where=where)
    prunes: list[Prune] = []
    if processed:
        assert spec.processed_at is not None  # check_ages
        col = dialect.column(spec.processed_at)
        prunes.append(_prune(dialect, "processed", dialect.table(spec), col, order))
    if dead_letters:
        if dead_letter is None:
            msg = (
                f"{where}: .retain(dead_letters=...) prunes the mount's dead letters, found no "
                f"dead letter destination; declare .max_attempts(n).dead_letter(dest) on the "
                f"mount, or leave dead_letters= out"
            )
            raise DeclarationError(msg)
        assert spec.dead_lettered_at is not None  # check_ages
        died = dialect.column(spec.dead_lettered_at)
        if dead_letter.group is not None:
            assert spec.group is not None  # a dead letter group needs one (the plan's check)
            group = dialect.column(spec.group)
            prunes.append(
                _prune(
                    dialect,
                    "dead_letters",
                    dialect.table(spec),
                    died,
                    order,
                    also=f"{group} = " + P("dest") + " AND ",
                )
            )
        else:
            table = dialect.qualified(str(dead_letter.table), dead_letter.schema)
            prunes.append(_prune(dialect, "dead_letters", table, died, order))
    now = dialect.render("now", f"SELECT {dialect.server_clock.now}")
    return RetentionPlan(prunes=tuple(prunes), begin=dialect.prune_begin(), now=now)


def check_ages(spec: TableSpec, *, processed: bool, dead_letters: bool, where: str) -> None:
    """Refuse a kind of row whose age ``spec``'s table cannot tell: finished rows without a
    ``ProcessedAt`` field, dead letters without a ``DeadLetteredAt`` field."""
    if processed and spec.processed_at is None:
        msg = (
            f"{where}: .retain(processed=...) prunes rows marked finished, found no "
            f"ProcessedAt field on {spec.label} (its ack and drop delete the row, so none "
            f"is kept); add one, like processed_at: Annotated[datetime | None, "
            f"ProcessedAt()] = None, or leave processed= out"
        )
        raise DeclarationError(msg)
    if dead_letters and spec.dead_lettered_at is None:
        msg = (
            f"{where}: .retain(dead_letters=...) ages a dead letter by the time it became "
            f"one, found no DeadLetteredAt field on {spec.label}; add one, like "
            f"dead_at: Annotated[datetime | None, DeadLetteredAt()] = None (a dead letter "
            f"table gets its column too), or leave dead_letters= out"
        )
        raise DeclarationError(msg)


def _prune(
    dialect: Dialect, kind: Kind, table: str, column: str, order: str, *, also: Frag = ""
) -> Prune:
    older = Sql(also, f"{column} < ", P("before"))
    event = f"prune {kind.replace('_', ' ')}"
    delete = dialect.render(
        event, dialect.delete_first(table, older, order, RETAIN_BATCH, skip_locked=True)
    )
    count = dialect.render(event, f"SELECT count(*) FROM {table} WHERE " + older)
    return Prune(kind=kind, table=table, delete=delete, count=count)
