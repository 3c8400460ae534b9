"""The startup checks of a table against the database: the role columns hold what their roles
need, and every statement prepares (the catalog proves the types; a prepare, the names). The
dialect writes the catalog read and judges its answer (``_dialects/_columns.py``); this module
runs it and raises. A table or column the catalog does not list is left to the prepare, which
names what is missing."""

from __future__ import annotations

import logging

from .._declare._spec import TableSpec
from .._dialects._base import DeadLetter, Dialect
from .._dialects._columns import column_warnings
from .._dialects._statement import Statement
from .._dialects.ddl import unique_statements
from .._drivers._base import Connection
from ..errors import DatabaseError, SchemaError, TrinboxError

__all__ = ["check_columns", "check_unique_index", "prepare_statements"]

logger = logging.getLogger("trinbox.app")

# The fix a prepare failure asks for, by what the database says is missing.
_ADVICE = {
    "table": "create the table it names",
    "column": "add the column it names, or name the field's column with Column(..)",
    None: "fix what the database reports, so that the statement prepares",
}


async def prepare_statements(
    where: str, spec: TableSpec, dialect: Dialect, conn: Connection, statements: list[Statement]
) -> None:
    """Prepare each statement on the server; the first that fails stops the subscription
    with advice that fits what the database reports."""
    for statement in statements:
        try:
            await conn.prepare(statement.sql)
        except TrinboxError as exc:
            code = exc.code if isinstance(exc, DatabaseError) else None
            advice = _ADVICE[dialect.missing(code, str(exc))]
            msg = (
                f"{where}: every statement of a subscription prepares against "
                f"the database, found {statement.event} failing on "
                f"{spec.label}: {exc}; {advice}"
            )
            raise SchemaError(msg, table=spec.qualified_name, statement=statement.sql) from exc


async def check_columns(
    where: str, spec: TableSpec, dialect: Dialect, conn: Connection
) -> SchemaError | None:
    """Read the table's columns from the catalog and refuse the first role column whose type
    (or default, or NULL) cannot play its role, naming the column, what was found and the fix;
    warn of a RetryAfter default in the session's local time.
    A read that fails (SQLite's for a schema not attached) is returned, not raised: the
    caller raises it once the prepare, which names what is missing, has passed."""
    query = dialect.columns_query(spec)
    try:
        records = await conn.fetch(query.sql)
    except TrinboxError as exc:
        msg = (
            f"{where}: the column types of {spec.label} are read from the catalog at startup, "
            f"found the read failing: {exc}; let the subscription's user read the catalog"
        )
        failed = SchemaError(msg, table=spec.qualified_name, statement=query.sql)
        failed.__cause__ = exc
        return failed
    columns = dialect.read_columns(spec, records)
    problem = dialect.check_columns(spec, columns)
    if problem is not None:
        raise SchemaError(f"{where}: {problem}", table=spec.qualified_name, statement=query.sql)
    for warning in column_warnings(dialect, spec, columns):
        logger.warning("%s: %s", where, warning)
    return None


async def check_unique_index(
    where: str, spec: TableSpec, dialect: Dialect, conn: Connection, dead: DeadLetter | None
) -> None:
    """Refuse a ``Unique`` field without the unique index that holds each key once over the
    rows that hold their key: without it, two publishes of one key both write (dedup would be
    a read racing a write), naming the statement that adds it."""
    if spec.unique is None:
        return
    query = dialect.unique_index_query(spec)
    records = await conn.fetch(query.sql)
    if dialect.unique_index_found(spec, records):
        return
    holds = dialect.unique_holds(spec)
    over = f"the rows where {' AND '.join(holds)}" if holds else "every row"
    msg = (
        f"{where}: a Unique field is enforced by a unique index on its key over the rows that "
        f"hold it ({over}), without which two publishes of one key both write, found none on "
        f"the column {spec.unique.column!r} of {spec.label}; add it: "
        f"{unique_statements(dialect, spec, dead)}"
    )
    raise SchemaError(msg, table=spec.qualified_name, statement=query.sql)
