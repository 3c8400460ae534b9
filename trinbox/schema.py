"""The DDL of a queue table, from its row class, per database (public facade).

    >>> from trinbox.schema import ddl
    >>> for statement in ddl(Transcode, "postgres", dead_letter="video_jobs_dead"):
    ...     print(statement + ";")

Every statement is idempotent (``CREATE ... IF NOT EXISTS``) and creates exactly what the
startup check accepts: the column types of each role, the attempt's ``DEFAULT 1``, the
generated id, the claim index, and the dead letter table when the mount names one. For
development and tests ``await broker.create_tables(Row)`` runs them; a production schema
belongs to your migrations (print it with ``trinbox schema MODULE:Row``, then keep it there).
"""

from __future__ import annotations

from typing import Any, Literal

from ._broker.backends import BACKENDS
from ._declare._cancels import CancelRequests
from ._declare._inbox import spec_of
from ._declare._limit_records import LimitRecords
from ._declare._pauses import Pauses
from ._declare._rates import Rates
from ._declare._ticks import Ticks
from ._declare._tracker import Tracker
from ._dialects._base import Dialect
from ._dialects._rated import rates_ddl
from ._dialects.cancels import request_plan
from ._dialects.ddl import render_ddl
from ._dialects.limit_records import record_plan
from ._dialects.pauses import pause_plan
from ._dialects.seen import seen_plan
from ._dialects.ticks import tick_plan

__all__ = ["DIALECTS", "DialectName", "ddl", "ddl_script"]

DialectName = Literal["postgres", "mysql", "sqlite"]
DIALECTS: tuple[DialectName, ...] = tuple(BACKENDS)


def dialect_named(name: str) -> Dialect:
    """The dialect ``name`` names, or ``ValueError`` listing the names."""
    backend = next((b for kind, b in BACKENDS.items() if kind == name), None)
    if backend is None:
        msg = (
            f"a dialect is one of {', '.join(map(repr, DIALECTS))} (MySQL serves MariaDB too), "
            f"found {name!r}"
        )
        raise ValueError(msg)
    return backend.dialect()


def ddl(
    row: type[Any] | Tracker | Ticks | Pauses | CancelRequests | Rates | LimitRecords,
    dialect: DialectName,
    *,
    dead_letter: str | None = None,
) -> list[str]:
    """The statements (without their ``;``) that create ``row``'s table and its claim index,
    and, given ``dead_letter`` as the mount names it (``.dead_letter("jobs_dead")``), its dead
    letter table (a table with a ``Group`` field moves spent rows to a group: no table, and
    its ``OriginGroup`` field keeps each row's group; without one ``DeclarationError``).

    ``dialect`` is ``"postgres"``, ``"mysql"`` (MySQL and MariaDB) or ``"sqlite"``. A field
    whose type has no SQL type raises ``DeclarationError``; give it one with ``SqlType``.
    A ``trinbox.outbox.Tracker``: its seen-records table; a ``trinbox.schedules.Ticks``:
    its tick table; a ``trinbox.Pauses``: its pause table; a ``trinbox.CancelRequests``: its
    cancel request table; a ``trinbox.Rates``: its rate table; a ``trinbox.LimitRecords``:
    its limit record table."""
    if isinstance(row, CancelRequests):
        return list(request_plan(dialect_named(dialect), row.table, row.schema, repr(row)).ddl)
    if isinstance(row, LimitRecords):
        return list(record_plan(dialect_named(dialect), row.table, row.schema, repr(row)).ddl)
    if isinstance(row, Tracker):
        return list(seen_plan(dialect_named(dialect), row.table, row.schema, repr(row)).ddl)
    if isinstance(row, Ticks):
        return list(tick_plan(dialect_named(dialect), row.table, row.schema, repr(row)).ddl)
    if isinstance(row, Pauses):
        return list(pause_plan(dialect_named(dialect), row.table, row.schema, repr(row)).ddl)
    if isinstance(row, Rates):
        return list(rates_ddl(dialect_named(dialect), row, repr(row)))
    return render_ddl(dialect_named(dialect), spec_of(row), dead_letter)


def ddl_script(
    row: type[Any] | Tracker | Ticks | Pauses | CancelRequests | Rates | LimitRecords,
    dialect: DialectName,
    *,
    dead_letter: str | None = None,
) -> str:
    """:func:`ddl`'s statements as one script to print or save: each ends with ``;`` and a
    blank line parts them."""
    return "\n".join(f"{statement};\n" for statement in ddl(row, dialect, dead_letter=dead_letter))
