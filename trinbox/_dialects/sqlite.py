"""SQLite: lease and advisory forms; no row locks; ``?`` placeholders, backtick quoting.

The advisory form has no locks a session holds: the process keeps a registry of keys in work,
and the candidate select passes over the keys it holds (bound as a JSON array).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import ClassVar
from uuid import UUID

from .._declare._group_names import GroupNames
from .._declare._limits import ClaimLimits
from .._declare._markers import (
    Advisory,
    Default,
    Deferred,
    Exclusive,
    Form,
    Immediate,
    Isolation,
    Lease,
)
from .._declare._spec import ColumnSpec, TableSpec
from ..errors import DeclarationError
from ._advisory_slots import sqlite_candidates
from ._base import Dialect
from ._clock import ServerClock
from ._columns import FoundColumn, Retype
from ._ddl_types import DdlRules
from ._limited import TAKE, limited_ids
from ._statement import Frag, P, ParamStyle, Sql, Statement

__all__ = ["SqliteDialect"]

_BEGIN: dict[type[Isolation], str] = {
    Default: "BEGIN",
    Deferred: "BEGIN DEFERRED",
    Immediate: "BEGIN IMMEDIATE",
    Exclusive: "BEGIN EXCLUSIVE",
}


_TYPES: dict[Retype, str] = {"time": "TEXT", "count": "INTEGER", "bytes": "BLOB", "json": "TEXT"}

# Times are the UTC text trinbox writes ("YYYY-MM-DD HH:MM:SS.ffffff"); the default of a
# generated RetryAfter writes the same shape (SQLite's %f has milliseconds).
_DDL = DdlRules(
    key="sqlite",
    types={
        bool: "INTEGER",
        int: "INTEGER",
        float: "REAL",
        Decimal: "NUMERIC",
        str: "TEXT",
        bytes: "BLOB",
        datetime: "TEXT",
        date: "TEXT",
        UUID: "TEXT",
        dict: "TEXT",
    },
    indexed_text="TEXT",
    time="TEXT",
    count="INTEGER",
    payload="BLOB",
    # The rowid: AUTOINCREMENT never hands out the id of a deleted (acked) row again.
    generated_id="{type} PRIMARY KEY AUTOINCREMENT",
    integer_id="INTEGER",
    schema_on_index=True,
)
# 'now' is read once per statement step (the claim's UPDATE stamps every row in its first step)
# and has milliseconds, padded to the six digits of the text trinbox writes.
_DAY = "%Y-%m-%d %H:%M"
_CLOCK = ServerClock(
    now=f"(strftime('{_DAY}:%f', 'now') || '000')",
    due=lambda d: (
        f"(strftime('{_DAY}:%f', 'now', '+' || (" + d + " / 1000000.0) || ' seconds') || '000')"
    ),
    # Whole seconds of now + lease + 0.999 s: the next whole second ('now' has ms).
    expiry=lambda s: (
        f"(strftime('{_DAY}:%S', 'now', '+' || "
        + s
        + " || ' seconds', '+0.999 seconds') || '.000000')"
    ),
    age="(julianday('now') - julianday({t})) * 86400.0",
)
# A STRICT table's options, after the column list: "STRICT", "WITHOUT ROWID", in any order.
_OPTIONS = re.compile(r"\)([^)]*)$")
_RECREATE = "(SQLite changes a column's declaration by recreating its table)"


def affinity(declared: str) -> str:
    """A declared type's affinity, by SQLite's rules (datatype3.html, 3.1)."""
    upper = declared.upper()
    if "INT" in upper:
        return "INTEGER"
    if "CHAR" in upper or "CLOB" in upper or "TEXT" in upper:
        return "TEXT"
    if "BLOB" in upper or not upper:
        return "BLOB"
    if "REAL" in upper or "FLOA" in upper or "DOUB" in upper:
        return "REAL"
    return "NUMERIC"


@dataclass(frozen=True)
class SqliteDialect(Dialect):
    name: ClassVar[str] = "SQLite"
    style: ClassVar[ParamStyle] = "qmark"
    quote: ClassVar[str] = "`"
    identifier_limit: ClassVar[int | None] = None
    forms: ClassVar[tuple[type[Form], ...]] = (Lease, Advisory)
    isolations: ClassVar[tuple[type[Isolation], ...]] = (Default, Deferred, Immediate, Exclusive)
    null_safe_equal: ClassVar[str] = "IS"
    one_claim_at_a_time: ClassVar[bool] = True
    ddl_rules: ClassVar[DdlRules] = _DDL
    insert_if_absent: ClassVar[tuple[str, str]] = ("INSERT OR IGNORE INTO", "")
    # SQLITE_MAX_VARIABLE_NUMBER's default from 3.32 on; a broker reads the running library's.
    parameter_limit: ClassVar[int | None] = 32766
    server_clock: ClassVar[ServerClock] = _CLOCK
    lock_suffix: ClassVar[str] = ""
    time_rule: ClassVar[str] = "in a STRICT SQLite table TEXT or ANY (trinbox writes times as text)"
    count_rule: ClassVar[str] = (
        "on SQLite a declared type of INTEGER or NUMERIC affinity, or none (in a STRICT table "
        "INT, INTEGER or ANY)"
    )
    bytes_rule: ClassVar[str] = "in a STRICT SQLite table BLOB or ANY"
    json_rule: ClassVar[str] = "in a STRICT SQLite table TEXT or ANY"

    def driver_value(self, value: object) -> object:
        # Times are UTC text that sorts as time ("2026-11-29 20:37:00.000000"), as trinbox's
        # sqlite3 driver writes them; sqlite3's own datetime adapter (deprecated) would add
        # the offset.
        if isinstance(value, datetime):
            if value.tzinfo is not None:
                value = value.astimezone(UTC).replace(tzinfo=None)
            return value.isoformat(" ", "microseconds")
        if isinstance(value, Decimal):
            return str(value)  # sqlite3 binds no Decimal; NUMERIC affinity reads the text
        return super().driver_value(value)

    def _form_fix(self, form: type[Form]) -> str:
        return (
            "SQLite has no row locks; declare Inbox[Lease] with a LockedUntil field, or "
            "Inbox[Advisory] with advisory_lock="
        )

    def check_characters(self, name: str, what: str, where: str) -> None:
        """SQLite reserves table names beginning with ``sqlite_`` (any case) for its own."""
        if "table" in what and name[:7].lower() == "sqlite_":
            msg = (
                f"{where}: SQLite reserves table names beginning with 'sqlite_' for its own "
                f"tables, found the {what} {name!r}; rename the table"
            )
            raise DeclarationError(msg)

    def begin(self, spec: TableSpec) -> Statement:
        return self.render("begin", _BEGIN[spec.isolation])

    def redrive_begin(self) -> Statement:
        # The write lock at BEGIN: a deferred transaction could not upgrade while a serving
        # app writes.
        return self.render("begin", "BEGIN IMMEDIATE")

    def custom_claim_begin(self) -> Statement:
        # As a redrive: the claim reads, then stamps.
        return self.render("begin", "BEGIN IMMEDIATE")

    def key_column(self, column: str) -> str:
        return f"ifnull({column}, '')"

    def key_expression(self, spec: TableSpec) -> str:
        return f"CAST({super().key_expression(spec)} AS TEXT)"

    def lease_claim(
        self, spec: TableSpec, groups: GroupNames | None = None
    ) -> tuple[Statement, ...]:
        """One statement: stamp the lease on the first due rows and return them as they were
        before the stamp (attempt uncounted). Rows come back in no particular order."""
        t = self.table(spec)
        conds = [*self.claimable(spec, groups=groups), self.lease_free(spec)]
        inner = (
            f"SELECT {self.column(spec.id)} FROM {t}"
            + self.where(conds)
            + f" ORDER BY {self.order_by(spec)} LIMIT "
            + P("limit")
        )
        return (
            self.render(
                "claim",
                f"UPDATE {t} SET "
                + self.lease_stamp(spec, lease=self.lease_at())
                + f" WHERE {self.column(spec.id)} IN ("
                + inner
                + f") RETURNING {self.select_list(spec, attempt_before=True)}"
                + self.token_column(spec, stored=True),
            ),
        )

    def epoch_us(self, time: Frag) -> Frag:
        # Times are text, "2026-11-29 20:37:00.000000": whole seconds, then the microseconds.
        return (
            "(CAST(strftime('%s', substr("
            + time
            + ", 1, 19)) AS INTEGER) * 1000000 + CAST(substr("
            + time
            + ", 21, 6) AS INTEGER))"
        )

    def greatest(self, a: Frag, b: Frag) -> Frag:
        return "MAX(" + a + ", " + b + ")"

    def limited_lease_claim(
        self,
        spec: TableSpec,
        limits: ClaimLimits,
        *,
        every_group: bool = False,
        skip: str | None = None,
    ) -> tuple[Statement, ...]:
        """One statement, as ``lease_claim``, over the ids ``_limited.py`` chose; the single
        writer serializes it with every other claim."""
        t = self.table(spec)
        ident = self.column(spec.id)
        return (
            self.render(
                "claim",
                "WITH "
                + limited_ids(self, spec, limits, every_group=every_group, skip=skip)
                + f" UPDATE {t} SET "
                + self.lease_stamp(spec, lease=self.lease_at())
                + f" WHERE {ident} IN (SELECT {ident} FROM {self.internal(spec, TAKE)})"
                + f" RETURNING {self.select_list(spec, attempt_before=True)}"
                + self.token_column(spec, stored=True),
            ),
        )

    def fifo_lease_claim(self, spec: TableSpec) -> tuple[Statement, ...]:
        """The lease claim of the head: one UPDATE ... RETURNING (the single writer is the
        guard)."""
        t = self.table(spec)
        return (
            self.render(
                "claim",
                f"UPDATE {t} SET "
                + self.lease_stamp(spec, lease=self.lease_at())
                + self.where(self.fifo_lease_head(spec))
                + f" RETURNING {self.select_list(spec, attempt_before=True)}"
                + self.token_column(spec, stored=True),
            ),
        )

    def every_group_claim(
        self, spec: TableSpec, claim: tuple[Statement, ...], skip: str | None
    ) -> tuple[Statement, ...]:
        """One writer: one UPDATE ... RETURNING stamps the heads of up to ``limit`` groups
        but ``skip`` at once (the single writer is every group's guard)."""
        row, source, conds, order = self.every_head(spec, skip)
        return (
            self.render(
                "claim",
                f"UPDATE {self.table(spec)} SET "
                + self.lease_stamp(spec, lease=self.lease_at())
                + f" WHERE {self.column(spec.id)} IN (SELECT {row}.{self.column(spec.id)}"
                + source
                + self.where(conds)
                + f" ORDER BY {order} LIMIT "
                + P("limit")
                + f") RETURNING {self.select_list(spec, attempt_before=True)}"
                + self.token_column(spec, stored=True),
            ),
        )

    def every_group_heads(self, spec: TableSpec, skip: str | None) -> Statement | None:
        return None

    def lease_batch(self, spec: TableSpec) -> tuple[Statement, ...]:
        # The ids travel as one JSON array: one statement text whatever the batch's size.
        return self.lease_batch_where(spec, "IN (SELECT value FROM json_each(" + P("ids") + "))")

    def lease_pairs(self, spec: TableSpec) -> Sql:
        """The pairs of two JSON arrays, joined by position; the id's own test finds the rows
        by the primary key."""
        ident = self.column(spec.id)
        locked = self.column(spec.locked_until)
        ids = self.quoted(self.internal(spec, "__ids"))
        leases = self.quoted(self.internal(spec, "__leases"))
        return (
            f"{ident} IN (SELECT value FROM json_each("
            + P("ids")
            + f")) AND ({ident}, {locked}) IN (SELECT {ids}.value, {leases}.value FROM json_each("
            + P("ids")
            + f") AS {ids} JOIN json_each("
            + P("tokens")
            + f") AS {leases} ON {leases}.key = {ids}.key)"
        )

    def progress_sets(self, spec: TableSpec) -> Frag:
        """The value at the id's position in the two JSON arrays. The row's id is named by
        its table: inside the subquery a bare ``id`` is json_each's own column."""
        assert spec.progress is not None
        col = self.column(spec.progress)
        ids = self.quoted(self.internal(spec, "__ids"))
        values = self.quoted(self.internal(spec, "__progress"))
        return (
            f"{col} = COALESCE((SELECT {values}.value FROM json_each("
            + P("ids")
            + f") AS {ids} JOIN json_each("
            + P("progress")
            + f") AS {values} ON {values}.key = {ids}.key WHERE {ids}.value = "
            + f"{self.table(spec)}.{self.column(spec.id)}), {col})"
        )

    def key_free(self, spec: TableSpec) -> Frag:
        # The keys in work are in this process's registry, bound as one JSON array.
        return (
            f"{self.key_expression(spec)} NOT IN (SELECT value FROM json_each(" + P("held") + "))"
        )

    def limited_advisory(
        self, spec: TableSpec, limits: ClaimLimits
    ) -> tuple[Statement, Statement | None, Statement | None]:
        """The candidates only: this process keeps each key's slots with its keys in work
        (``_advisory_slots.sqlite_candidates``); one process serves a file's keys."""
        return (self.render("candidates", sqlite_candidates(self, spec, limits)), None, None)

    def advisory_candidates(self, spec: TableSpec) -> Statement:
        """The first due rows in claim order with their keys, past the keys in work: the
        process registry knows them and binds them as one JSON array (``held``), so the
        select reads past a key in work as the reference's probe does
        (docs/reference.md#advisory-form)."""
        t = self.table(spec)
        lock = self.quoted(self.internal(spec, "__lock"))
        key = self.key_expression(spec)
        held = f"{key} NOT IN (SELECT value FROM json_each(" + P("held") + "))"
        return self.render(
            "candidates",
            f"SELECT {self.column(spec.id)}, {key} AS {lock} FROM {t}"
            + self.where([*self.claimable(spec), held])
            + f" ORDER BY {self.order_by(spec)} LIMIT "
            + P("limit"),
        )

    # -- the catalog ------------------------------------------------------------------------
    #
    # Declared types are advisory outside a STRICT table, and trinbox writes times as ISO 8601
    # text ("2024-05-01 12:00:00.000000"), which no affinity converts (it is no number): a
    # time column of any declared type (TEXT, DATETIME, DATE, INT, none) stores and compares
    # that text as text, so every declared type holds a time, and bytes stay bytes under every
    # affinity. A count is another matter: TEXT affinity stores an incremented attempt back
    # as text, REAL as a float; INTEGER, NUMERIC and none keep it an integer. A STRICT table
    # holds its declared types: times in TEXT or ANY, counts in INT, INTEGER or ANY, bytes in
    # BLOB or ANY. A generated id is the rowid (INTEGER PRIMARY KEY) or has a default: any
    # other primary key takes NULL when an insert leaves it out.

    def unique_index_query(self, spec: TableSpec) -> Statement:
        """The table's unique indexes on one column: the column and the predicate, the text
        after the WHERE of the index's CREATE statement (a partial index's)."""
        table = self.literal(spec.table)
        schema = "" if spec.schema is None else ", " + self.literal(spec.schema)
        master = (
            "sqlite_master" if spec.schema is None else f"{self.quoted(spec.schema)}.sqlite_master"
        )
        return self.render(
            "unique_index",
            "SELECT ii.name, CASE WHEN il.partial THEN substr(m.sql, instr(upper(m.sql), "
            "' WHERE ') + 7) END "
            f"FROM pragma_index_list({table}{schema}) AS il "
            f"JOIN pragma_index_info(il.name{schema}) AS ii "
            f"JOIN {master} AS m ON m.type = 'index' AND m.name = il.name "
            f'WHERE il."unique" AND (SELECT COUNT(*) FROM pragma_index_info(il.name{schema})) = 1',
        )

    def columns_query(self, spec: TableSpec) -> Statement:
        """Each column (name, declared type, default, NOT NULL, primary key position) with
        the table's CREATE statement (STRICT, WITHOUT ROWID)."""
        table = self.literal(spec.table)
        schema = "" if spec.schema is None else self.literal(spec.schema)
        master = (
            "sqlite_master" if spec.schema is None else f"{self.quoted(spec.schema)}.sqlite_master"
        )
        args = table if spec.schema is None else f"{table}, {schema}"
        return self.render(
            "columns",
            'SELECT c.name, c.type, c.dflt_value, c."notnull", c.pk, '
            f"(SELECT m.sql FROM {master} AS m WHERE m.type = 'table' "
            f"AND m.name = {table} COLLATE NOCASE) FROM pragma_table_info({args}) AS c",
        )

    def read_columns(
        self, spec: TableSpec, records: Sequence[Sequence[object]]
    ) -> list[FoundColumn]:
        create = next((str(r[5]) for r in records if r[5] is not None), "")
        options = _OPTIONS.search(create)
        words = options.group(1).upper() if options else ""
        strict = "STRICT" in words
        rowid = "ROWID" not in words
        keys = [r for r in records if isinstance(r[4], int) and r[4] > 0]
        found: list[FoundColumn] = []
        for name, declared, default, notnull, pk, _sql in records:
            alias = rowid and len(keys) == 1 and bool(pk) and str(declared).upper() == "INTEGER"
            found.append(
                FoundColumn(
                    name=str(name),
                    type=str(declared) or "(none)",
                    default=None if default is None else str(default),
                    nullable=not notnull,
                    generated=alias,
                    strict=strict,
                )
            )
        return found

    def _declared(self, found: FoundColumn) -> str:
        return "" if found.type == "(none)" else found.type.upper()

    def holds_time(self, found: FoundColumn) -> bool:
        return not found.strict or self._declared(found) in ("TEXT", "ANY")

    def holds_count(self, found: FoundColumn) -> bool:
        if found.strict:
            return self._declared(found) in ("INT", "INTEGER", "ANY")
        return affinity(self._declared(found)) in ("INTEGER", "NUMERIC", "BLOB")

    def holds_bytes(self, found: FoundColumn) -> bool:
        return not found.strict or self._declared(found) in ("BLOB", "ANY")

    def holds_json(self, found: FoundColumn) -> bool:
        return not found.strict or self._declared(found) in ("TEXT", "ANY")

    def retype(self, spec: TableSpec, found: FoundColumn, to: Retype) -> str:
        return f"declare {self.quoted(found.name)} {_TYPES.get(to, found.type)} {_RECREATE}"

    def set_default(self, spec: TableSpec, found: FoundColumn) -> str:
        return f"declare {self.quoted(found.name)} INTEGER NOT NULL DEFAULT 1 {_RECREATE}"

    def allow_null(self, spec: TableSpec, found: FoundColumn) -> str:
        return f"declare {self.quoted(found.name)} without NOT NULL {_RECREATE}"

    def generated_id_refusal(
        self, spec: TableSpec, col: ColumnSpec, found: FoundColumn, head: str
    ) -> str | None:
        if found.generated or found.default is not None:
            return None
        return (
            f"{head} is generated by the database, which SQLite does for the rowid (a column "
            f"declared INTEGER PRIMARY KEY), found column {found.name!r} of type {found.type} "
            f"that is not the rowid and has no default (an insert leaves it NULL); declare "
            f"{self.quoted(found.name)} INTEGER PRIMARY KEY {_RECREATE}"
        )

    def missing(self, code: str | None, message: str) -> str | None:
        if message.startswith(("no such table:", "unknown database")):
            return "table"
        if message.startswith("no such column:"):
            return "column"
        return None
