"""PostgreSQL: all three forms; ``$n`` placeholders (a repeated name reuses its number),
double-quote quoting, identifiers of at most 63 bytes.

The lease claim is one autocommit statement (lock, stamp and read in one CTE); the advisory
form locks a 64-bit ``hashtextextended`` of the key (PostgreSQL 11 or later) on the session
that holds the delivery; a dead letter moves into its table in one statement.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

from .._declare._markers import (
    Advisory,
    Default,
    Form,
    Lease,
    Opening,
    ReadCommitted,
    ReadUncommitted,
    RepeatableRead,
    RowLock,
    Serializable,
)
from .._declare._spec import ColumnSpec, TableSpec
from ._base import DeadLetter, Dialect
from ._columns import FoundColumn, Retype
from ._statement import Frag, P, ParamStyle, Statement, join

__all__ = ["PostgresDialect"]

_LEVELS: dict[type[Opening], str] = {
    ReadCommitted: "READ COMMITTED",
    RepeatableRead: "REPEATABLE READ",
    Serializable: "SERIALIZABLE",
}


# format_type() of a time with its zone, at any precision: the lease token is whole seconds.
_TIMESTAMPTZ = re.compile(r"^timestamp(\(\d+\))? with time zone$")
_INTEGERS = frozenset({"smallint", "integer", "bigint"})
_TYPES: dict[Retype, str] = {"time": "timestamptz", "count": "integer", "bytes": "bytea"}


@dataclass(frozen=True)
class PostgresDialect(Dialect):
    name: ClassVar[str] = "PostgreSQL"
    style: ClassVar[ParamStyle] = "dollar"
    quote: ClassVar[str] = '"'
    identifier_limit: ClassVar[int | None] = 63
    identifier_unit: ClassVar[str] = "bytes"
    forms: ClassVar[tuple[type[Form], ...]] = (RowLock, Lease, Advisory)
    openings: ClassVar[tuple[type[Opening], ...]] = (
        Default,
        ReadCommitted,
        RepeatableRead,
        Serializable,
    )

    folds_column_names: ClassVar[bool] = False
    time_rule: ClassVar[str] = "on PostgreSQL a timestamp with time zone (timestamptz)"
    count_rule: ClassVar[str] = "on PostgreSQL an integer type (smallint, integer or bigint)"
    bytes_rule: ClassVar[str] = "on PostgreSQL bytea"
    missing_codes: ClassVar[dict[str, str]] = {
        "42P01": "table",  # undefined_table
        "3F000": "table",  # invalid_schema_name
        "42703": "column",  # undefined_column
    }

    def identifier_length(self, name: str) -> int:
        """PostgreSQL truncates names past NAMEDATALEN - 1 bytes of their UTF-8 encoding."""
        return len(name.encode("utf-8"))

    def _opening_fix(self, opening: type[Opening]) -> str:
        if opening is ReadUncommitted:
            return (
                "PostgreSQL runs READ UNCOMMITTED as READ COMMITTED; declare ReadCommitted "
                "(or leave the opening out)"
            )
        return super()._opening_fix(opening)

    def driver_value(self, value: object) -> object:
        # timestamptz takes aware datetimes; a naive one is UTC (psycopg would read it in the
        # session's TimeZone).
        if isinstance(value, datetime) and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    def notify_statement(self) -> Statement:
        return self.r("notify", "SELECT pg_notify(" + P("channel") + ", " + P("group") + ")")

    def begin(self, spec: TableSpec) -> Statement:
        if spec.opening is Default:
            return self.r("begin", "BEGIN")
        return self.r("begin", f"BEGIN ISOLATION LEVEL {_LEVELS[spec.opening]}")

    def attempt_before(self, col: ColumnSpec) -> str:
        # ``smallint - 1`` is an integer: the attempt reads as ``int`` whatever the column's
        # own integer type (the dialect does not know it).
        return f"({self.c(col)} - 1)"

    def key_column(self, column: str) -> str:
        return f"COALESCE({column}::text, '')"

    def concat(self, parts: Sequence[str]) -> str:
        return f"concat({', '.join(parts)})"

    def lease_claim(self, spec: TableSpec) -> tuple[Statement, ...]:
        """One statement: lock the first due rows, stamp them with the lease (counting the
        attempt), and return them as they were before the stamp, in claim order."""
        t = self.table(spec)
        ident = self.c(spec.id)
        claimed = self.internal(spec, "__claimed")
        stamped = self.internal(spec, "__stamped")
        row = self.internal(spec, "__row")
        sets: list[Frag] = [self.c(spec.locked_until) + " = " + P("lease")]
        if spec.attempt is not None:
            attempt = self.c(spec.attempt)
            sets.append(f"{attempt} = {row}.{attempt} + 1")
        conds = [*self.claimable(spec), self.lease_free(spec)]
        order = self.order_by(spec)
        return (
            self.r(
                "claim",
                f"WITH {claimed} AS (SELECT {self.select_list(spec)} FROM {t}"
                + self.where(conds)
                + f" ORDER BY {order} LIMIT "
                + P("limit")
                + " FOR UPDATE SKIP LOCKED), "
                + f"{stamped} AS (UPDATE {t} AS {row} SET "
                + join(", ", sets)
                + f" FROM {claimed} WHERE {row}.{ident} = {claimed}.{ident}) "
                + f"SELECT * FROM {claimed} ORDER BY {order}",
            ),
        )

    def lease_batch(self, spec: TableSpec) -> tuple[Statement, ...]:
        return self.lease_batch_where(spec, "= ANY(" + P("ids") + ")")

    def advisory_candidates(self, spec: TableSpec) -> Statement:
        """The first due rows in claim order whose keys no other session holds. The shared
        transaction-level probe fails on a key held exclusively elsewhere and (autocommit)
        ends with the statement; ``OFFSET 0`` keeps the probe out of the inner select, so
        the limit counts only rows that passed it."""
        t = self.table(spec)
        ident = self.c(spec.id)
        lock = self.q(self.internal(spec, "__lock"))
        candidates = self.internal(spec, "__candidates")
        inner = (
            f"SELECT {ident}, {self.key_expression(spec)} AS {lock} FROM {t}"
            + self.where(self.claimable(spec))
            + f" ORDER BY {self.order_by(spec)} OFFSET 0"
        )
        return self.r(
            "candidates",
            f"SELECT {ident}, {lock} FROM (" + inner + f") AS {candidates} "
            f"WHERE pg_try_advisory_xact_lock_shared(hashtextextended({lock}, 0)) "
            "LIMIT " + P("limit"),
        )

    def advisory_lock(self, spec: TableSpec) -> Statement | None:
        return self.r(
            "lock",
            "SELECT pg_try_advisory_lock(hashtextextended(" + P("key") + ", 0))::int::bigint",
        )

    def advisory_unlock(self, spec: TableSpec) -> Statement | None:
        return self.r(
            "unlock",
            "SELECT pg_advisory_unlock(hashtextextended(" + P("key") + ", 0))::int::bigint",
        )

    def move_to_table(
        self, spec: TableSpec, dead_letter: DeadLetter, *, token: bool
    ) -> tuple[Statement, ...]:
        """One statement: delete the row (while the token holds, in the lease form) and insert
        what the delete returned, with the lease column cleared."""
        t = self.table(spec)
        dest = self.qualified(str(dead_letter.table), dead_letter.schema)
        cols = ", ".join(self.c(c) for c in spec.columns)
        values = ", ".join("NULL" if c.role == "locked_until" else self.c(c) for c in spec.columns)
        moved = self.internal(spec, "moved", dead_letter.table, dead_letter.schema)
        return (
            self.r(
                "dead_letter",
                f"WITH {moved} AS (DELETE FROM {t}"
                + self.by_id(spec, token=token)
                + f" RETURNING {cols}) INSERT INTO {dest} ({cols}) SELECT {values} FROM {moved}",
            ),
        )

    # -- the catalog ------------------------------------------------------------------------

    def columns_query(self, spec: TableSpec) -> Statement:
        """Each column of the table the statements name (resolved as they resolve it, by the
        search path): name, type (a domain's base type), default, nullable, identity. No row
        for a table that does not exist (the prepare names it)."""
        base = "CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END"
        mod = "CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END"
        return self.r(
            "columns",
            f"SELECT a.attname, format_type({base}, {mod}), pg_get_expr(d.adbin, d.adrelid), "
            "NOT a.attnotnull, a.attidentity <> '' FROM pg_attribute AS a "
            "JOIN pg_type AS t ON t.oid = a.atttypid "
            "LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
            f"WHERE a.attrelid = to_regclass({self.literal(self.table(spec))}) "
            "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        )

    def read_columns(
        self, spec: TableSpec, records: Sequence[Sequence[object]]
    ) -> list[FoundColumn]:
        return [
            FoundColumn(
                name=str(name),
                type=str(type_),
                default=None if default is None else str(default),
                nullable=bool(nullable),
                generated=bool(identity),
            )
            for name, type_, default, nullable, identity in records
        ]

    def holds_time(self, found: FoundColumn) -> bool:
        return _TIMESTAMPTZ.match(found.type) is not None

    def holds_count(self, found: FoundColumn) -> bool:
        return found.type in _INTEGERS

    def holds_bytes(self, found: FoundColumn) -> bool:
        return found.type == "bytea"

    def _alter(self, spec: TableSpec, found: FoundColumn, change: str) -> str:
        return f"ALTER TABLE {self.table(spec)} ALTER COLUMN {self.q(found.name)} {change}"

    def retype(self, spec: TableSpec, found: FoundColumn, to: Retype) -> str:
        return "change its type: " + self._alter(spec, found, f"TYPE {_TYPES.get(to, found.type)}")

    def set_default(self, spec: TableSpec, found: FoundColumn) -> str:
        return "set it: " + self._alter(spec, found, "SET DEFAULT 1")

    def allow_null(self, spec: TableSpec, found: FoundColumn) -> str:
        return "allow NULL: " + self._alter(spec, found, "DROP NOT NULL")
