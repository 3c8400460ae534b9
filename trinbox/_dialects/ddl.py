"""The DDL of a queue table, rendered from its ``TableSpec``: what the startup check accepts.

Three kinds of statement, each idempotent (``IF NOT EXISTS``):

* ``CREATE TABLE`` with one column per field, in declaration order, typed by ``_ddl_types``;
* the claim index, in the claim's order: the group, then the priority, then ``retry_after``,
  then the id, with
  only the columns the table has (none when that is the id alone: the primary key serves).
  Partial (``WHERE processed_at IS NULL``) where the database has partial indexes and the
  table a ``ProcessedAt`` field, so finished rows drop out of it; inline in the CREATE TABLE
  on MySQL, which has no ``CREATE INDEX IF NOT EXISTS``;
* the unique index of a ``Unique`` field, on the rows that hold their key (unfinished, not a
  dead letter in a group): partial on PostgreSQL and SQLite; on MySQL, inline, on a stored
  generated column that holds the key while the row does (NULL after);
* the dead letter table, when the mount names one and the table has no group (a grouped table
  moves spent rows to another group of itself, its OriginGroup column keeping their own): the
  same columns, its id a plain primary key, since the move inserts each row with its id.

Names are quoted as the dialect quotes them in every other statement. The text is plain SQL,
as a database client runs it; ``render`` turns it into a statement for trinbox's drivers.
"""

from __future__ import annotations

import hashlib

from .._declare._spec import ColumnSpec, TableSpec
from .._declare._sqltype import SqlType, sql_types_of
from ..errors import DeclarationError
from ._base import DeadLetter, Dialect, fold
from ._ddl_types import DdlRules, column_type, is_optional

__all__ = [
    "claim_index_columns",
    "dead_letter_of",
    "index_name",
    "render_ddl",
    "unique_statements",
]


def render_ddl(dialect: Dialect, spec: TableSpec, dead_letter: str | None = None) -> list[str]:
    """The statements that create ``spec``'s table, its claim index and (``dead_letter``,
    written ``[schema.]table`` as the mount writes it) its dead letter table."""
    rules = dialect.ddl_rules
    dest = dead_letter_of(spec, dead_letter)
    dialect.check_names(spec, dest)
    overrides = sql_types_of(spec.row_type)
    columns = [
        _column(dialect, rules, spec, c, overrides.get(c.field), dead=False) for c in spec.columns
    ]
    statements: list[str] = []
    index = claim_index_columns(spec)
    name = index_name(dialect, spec, dest) if index else ""
    cols = ", ".join(dialect.column(c) for c in index)
    unique: list[str] = []
    if spec.unique is not None and rules.inline_index:
        *held, unique_index = _unique_lines(dialect, spec, dest, overrides.get(spec.unique.field))
        columns.extend(held)
        unique.append(unique_index)
    if index and rules.inline_index:
        columns.append(f"INDEX {dialect.quoted(name)} ({cols})")
    columns.extend(unique)
    statements.append(_create_table(dialect, dialect.table(spec), columns))
    if index and not rules.inline_index:
        where = ""
        if rules.partial_indexes and spec.processed_at is not None:
            where = f" WHERE {dialect.column(spec.processed_at)} IS NULL"
        statements.append(
            f"CREATE INDEX IF NOT EXISTS {_index_target(dialect, spec, name)} "
            f"ON {_index_table(dialect, spec)} ({cols}){where}"
        )
    if spec.unique is not None and not rules.inline_index:
        statements.append(_unique_index(dialect, spec, dest))
    if dest is not None and dest.table is not None:
        dead = [
            _column(dialect, rules, spec, c, overrides.get(c.field), dead=True)
            for c in spec.columns
        ]
        statements.append(_create_table(dialect, dialect.qualified(dest.table, dest.schema), dead))
    return statements


def claim_index_columns(spec: TableSpec) -> tuple[ColumnSpec, ...]:
    """The claim's order: its equality first, then its sort (``Dialect.order_by``; a FIFO
    group's head select sorts by priority and id alone unless delayed rows move behind).
    Empty when the primary key alone serves it."""
    found: list[ColumnSpec] = []
    if spec.group is not None:
        found.append(spec.group)
    if spec.priority is not None:
        found.append(spec.priority)
    by_due = not spec.fifo or spec.delayed_rows_move_behind
    if spec.retry_after is not None and by_due:
        found.append(spec.retry_after)
    if not found:
        return ()
    return (*found, spec.id)


def dead_letter_of(
    spec: TableSpec, name: str | None, *, where: str | None = None
) -> DeadLetter | None:
    """Where ``name`` sends spent rows of ``spec`` (the mount's ``dead_letter(name)``): a group
    of a grouped table, else a ``[schema.]table``. ``where`` names the caller in errors."""
    if name is None:
        return None
    if spec.group is not None:
        if spec.origin_group is None:
            # The move overwrites the row's group: without its origin, no listing or
            # redrive could tell one queue's dead letters from another's.
            on = "" if where is None else f" on {spec.label}"
            msg = (
                f"{where or spec.label}: a dead letter group keeps the group each row came "
                f"from in an OriginGroup field, for its queue to list and redrive it, found "
                f"dead_letter({name!r}){on} without one; add one, like "
                f"origin_group: Annotated[str | None, OriginGroup()] = None"
            )
            raise DeclarationError(msg)
        return DeadLetter(group=name)
    parts = name.split(".")
    if len(parts) > 2 or not all(parts):
        msg = (
            f"{where or spec.label}: a dead letter table is named [schema.]table, found {name!r}; "
            f"give one table name, with at most one schema"
        )
        raise DeclarationError(msg)
    if len(parts) == 2:
        return DeadLetter(schema=parts[0], table=parts[1])
    return DeadLetter(table=parts[0])


def index_name(
    dialect: Dialect, spec: TableSpec, dest: DeadLetter | None = None, *, kind: str = "claim"
) -> str:
    """``<table>_claim`` (``kind``: ``unique``, ``<table>_unique``), within the dialect's
    identifier limit (cut, with a hash of the whole table name) and clear of the dead letter
    table's name (an index and a table share one namespace on PostgreSQL and SQLite, where IF
    NOT EXISTS would silently skip the second) and of the claim index's."""
    taken = {fold(spec.table)}
    if dest is not None and dest.table is not None:
        taken.add(fold(dest.table))
    if kind != "claim":
        taken.add(fold(index_name(dialect, spec, dest)))
    n = 1
    while True:
        suffix = f"_{kind}" if n == 1 else f"_{kind}_{n}"
        name = _fit(dialect, spec.table, suffix)
        if fold(name) not in taken:
            return name
        n += 1


def _fit(dialect: Dialect, table: str, suffix: str) -> str:
    name = table + suffix
    limit = dialect.identifier_limit
    if limit is None or dialect.identifier_length(name) <= limit:
        return name
    digest = hashlib.sha256(table.encode("utf-8")).hexdigest()[:8]
    tail = f"_{digest}{suffix}"
    head = table
    while head and dialect.identifier_length(head + tail) > limit:
        head = head[:-1]
    return head + tail


def unique_statements(dialect: Dialect, spec: TableSpec, dest: DeadLetter | None = None) -> str:
    """What gives a table made without it the unique index of its ``Unique`` field (the fix
    the startup check names): PostgreSQL and SQLite the index's own statement, MySQL an
    ``ALTER TABLE`` adding the generated column (where there is one) and the index."""
    assert spec.unique is not None
    if not dialect.ddl_rules.inline_index:
        return _unique_index(dialect, spec, dest)
    override = sql_types_of(spec.row_type).get(spec.unique.field)
    adds = [
        ("ADD COLUMN " if line.startswith(dialect.quote) else "ADD ") + line
        for line in _unique_lines(dialect, spec, dest, override)
    ]
    return f"ALTER TABLE {dialect.table(spec)} {', '.join(adds)}"


def _unique_index(dialect: Dialect, spec: TableSpec, dest: DeadLetter | None) -> str:
    """PostgreSQL, SQLite: the unique index on the key over the rows that hold it."""
    assert spec.unique is not None
    name = index_name(dialect, spec, dest, kind="unique")
    holds = dialect.unique_holds(spec)
    where = " WHERE " + " AND ".join(holds) if holds else ""
    return (
        f"CREATE UNIQUE INDEX IF NOT EXISTS {_index_target(dialect, spec, name)} "
        f"ON {_index_table(dialect, spec)} ({dialect.column(spec.unique)}){where}"
    )


def _unique_lines(
    dialect: Dialect, spec: TableSpec, dest: DeadLetter | None, override: SqlType | None
) -> list[str]:
    """MySQL, inside the CREATE TABLE: the generated column holding the key while its row
    holds it (NULL after; none where every row holds its key) and the unique index on it."""
    key = spec.unique
    assert key is not None
    name = dialect.quoted(index_name(dialect, spec, dest, kind="unique"))
    held = dialect.unique_held(spec)
    if held is None:
        return [f"UNIQUE INDEX {name} ({dialect.column(key)})"]
    sql_type = column_type(dialect.ddl_rules, spec, key, override, indexed=True)
    holds = " AND ".join(dialect.unique_holds(spec))
    return [
        f"{dialect.quoted(held)} {sql_type} GENERATED ALWAYS AS "
        f"(IF({holds}, {dialect.column(key)}, NULL)) STORED",
        f"UNIQUE INDEX {name} ({dialect.quoted(held)})",
    ]


def _index_target(dialect: Dialect, spec: TableSpec, name: str) -> str:
    if dialect.ddl_rules.schema_on_index:
        return dialect.qualified(name, spec.schema)
    return dialect.quoted(name)


def _index_table(dialect: Dialect, spec: TableSpec) -> str:
    if dialect.ddl_rules.schema_on_index:
        return dialect.quoted(spec.table)
    return dialect.table(spec)


def _create_table(dialect: Dialect, table: str, lines: list[str]) -> str:
    body = ",\n".join(f"    {line}" for line in lines)
    return f"CREATE TABLE IF NOT EXISTS {table} (\n{body}\n){dialect.ddl_rules.table_options}"


def _column(
    dialect: Dialect,
    rules: DdlRules,
    spec: TableSpec,
    col: ColumnSpec,
    override: SqlType | None,
    *,
    dead: bool,
) -> str:
    """One column's line. In the dead letter table the id is a plain primary key (the move
    writes it) and nothing is generated."""
    role = col.role
    # The origin compares as the group does (MySQL: byte for byte).
    indexed = role in ("id", "group", "origin_group", "unique")
    if dead and col.generated and role not in ("id", "attempt"):
        # The move copies every column; the dead letter table needs no default of its own.
        col = ColumnSpec(col.field, col.column, role, False, col.python_type)
    sql_type = column_type(rules, spec, col, override, indexed=indexed)
    name = dialect.column(col)
    if role == "id":
        if col.generated and not dead:
            return f"{name} {rules.generated_id.format(type=sql_type)}"
        return f"{name} {sql_type} PRIMARY KEY"
    if role == "attempt":
        return f"{name} {sql_type} NOT NULL DEFAULT 1"
    if role == "origin_group":
        return f"{name} {sql_type}"  # NULL while the row is not a dead letter
    if role == "priority":
        # The publish writes 0 when left out; the default serves hand-written inserts.
        return f"{name} {sql_type} NOT NULL DEFAULT 0"
    if role in ("locked_until", "processed_at", "dead_lettered_at", "progress"):
        # NULL while free / unfinished / not a dead letter / before the handler reports
        return f"{name} {sql_type}"
    if role == "headers":
        return f"{name} {sql_type}"  # NULL: no headers (the publish gave none)
    if role == "result":
        return f"{name} {sql_type}"  # NULL until the ack writes it
    if role == "retry_after":
        # Never NULL: a row without a time would never be due.
        default = f" DEFAULT {dialect.default_now}" if col.generated and override is None else ""
        return f"{name} {sql_type} NOT NULL{default}"
    null = "" if is_optional(col.python_type) else " NOT NULL"
    return f"{name} {sql_type}{null}"
