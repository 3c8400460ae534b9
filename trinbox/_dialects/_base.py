"""What every dialect renders, written once; dialects override the shapes that differ.

A dialect is pure: it turns a ``TableSpec`` into ``Statement`` records and never does I/O.
Statements are composed as ``Sql``, text and parameter slots (``P("id")``), and rendered once
into the dialect's placeholders (``_statement.py``): quoted names and literals are text, so no
character of a name becomes a parameter. Aliases and CTE names are chosen clear of every
declared name (``internal``). Parameter names used across dialects:

    group     the subscription's group        now        the claim's "now"
    limit     rows the claim may take          lease      the new lease expiry (the token)
    id        the row's id                     token      the lease the delivery holds
    retry_at  when a delayed retry is due      dest       the dead letter group
    key       a rendered advisory key          ids        the ids of a batch's rows
    delay     the delay of retry_at, in µs     lease_seconds  the lease's length
    tokens    a keeper round's tokens, by ids  id0, token0...  MySQL's round, a pair per row

On the database clock (``database_clock=True``) ``now`` and ``retry_at`` render as the
server's clock (``_clock.py``, the clock's methods below).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar
from uuid import UUID

from .._declare._group_names import GroupNames
from .._declare._limits import ClaimLimits
from .._declare._markers import Form, Isolation, Lease
from .._declare._spec import ColumnSpec, KeyColumn, KeyLiteral, TableSpec, check_name
from ..errors import DeclarationError, IdentifierTooLong, UnsupportedForm, UnsupportedIsolation
from ._clock import ServerClock
from ._columns import ColumnRules
from ._ddl_types import DdlRules
from ._statement import Frag, P, Param, ParamStyle, Sql, Statement, join, render

__all__ = ["BatchInsert", "DeadLetter", "Dialect", "UniqueInsert", "fold"]

_NOW = Param("now")
_RETRY_AT = Param("retry_at")


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Where spent rows go: another group of the same table, or another table."""

    group: str | None = None
    table: str | None = None
    schema: str | None = None

    @property
    def label(self) -> str:
        if self.group is not None:
            return self.group
        return f"{self.schema}.{self.table}" if self.schema else str(self.table)


@dataclass(frozen=True, slots=True)
class UniqueInsert:
    """A publish with a dedup key (``Dialect.unique_insert``). ``insert`` writes the row
    unless the key is held: with ``returns_id`` it returns the new row's id (no row: held);
    else (MySQL) a held key fails it with a duplicate key error, which the broker tells from
    another constraint's by ``holder``, and ``last_id`` reads a generated id. ``holder``
    reads the id of the row that holds the key."""

    insert: Statement
    holder: Statement
    returns_id: bool = True
    last_id: Statement | None = None


@dataclass(frozen=True, slots=True)
class BatchInsert:
    """The insert of one chunk of a batch publish (``Dialect.batch_insert``): ``head``, then
    ``row`` once per row (its text and slots, the rows joined by ``, ``), then ``tail``. With
    ``arrays`` (PostgreSQL) the whole statement is that one, each of its slots bound as the
    array of the rows' values, the same text for every chunk. ``returns``: the statement
    returns each new row's id (and key); else (MySQL) ``last_id`` reads the first generated id
    and the step between ids, and a held key fails the insert."""

    head: str
    row: Statement
    tail: str
    arrays: Statement | None = None
    returns: bool = True
    last_id: Statement | None = None


@dataclass(frozen=True)
class Dialect(ColumnRules):
    """SQL text of one database family. Subclasses set the class attributes and override the
    claim shapes; the settlement shapes below are the same everywhere. What the columns of a
    table must hold, and the catalog read that tells, are ``ColumnRules`` (``_columns.py``)."""

    name: ClassVar[str]
    style: ClassVar[ParamStyle]
    quote: ClassVar[str]
    identifier_limit: ClassVar[int | None]
    forms: ClassVar[tuple[type[Form], ...]]
    isolations: ClassVar[tuple[type[Isolation], ...]]
    # What the rendered CREATE TABLE writes (ddl.py).
    ddl_rules: ClassVar[DdlRules]
    # An insert that writes nothing, and says so in its row count, where the key exists:
    # the words before the table, and after the values.
    insert_if_absent: ClassVar[tuple[str, str]] = ("INSERT INTO", " ON CONFLICT DO NOTHING")
    # The server's clock as statements write it (_clock.py).
    server_clock: ClassVar[ServerClock]
    # The SQLite single writer serialises every claim of one subscription; the MySQL lease claim
    # (a transaction of several statements that locks the rows it reads) serialises only lease
    # claims: ``claims_one_at_a_time`` reads both.
    one_claim_at_a_time: ClassVar[bool] = False
    # Equality that takes two NULLs for equal (a limit's key may be NULL: one key of its own).
    null_safe_equal: ClassVar[str] = "IS NOT DISTINCT FROM"
    lease_claim_serial: ClassVar[bool] = False
    extra: dict[str, object] = field(default_factory=dict[str, object])
    # "Now" is the server's clock, written into the statements (_clock.py), not the host's.
    database_clock: bool = False

    def claims_one_at_a_time(self, spec: TableSpec) -> bool:
        """Whether a subscription to ``spec`` keeps one claim in flight (FIFO and keyed
        workers add their own reasons elsewhere): a FIFO group is claimed one row at a time."""
        return (
            self.one_claim_at_a_time
            or spec.fifo
            or (spec.form is Lease and self.lease_claim_serial)
        )

    # A select's row-lock suffix inside a transaction (a redrive's read of its rows); ""
    # where one writer at a time locks nothing per row.
    lock_suffix: ClassVar[str] = " FOR UPDATE"
    skip_locked_suffix: ClassVar[str] = ""
    """What a select of rows to delete adds to pass over rows another transaction holds
    (PostgreSQL's ``FOR UPDATE SKIP LOCKED``; none where the delete cannot select them so)."""
    # What an insert of explicit ids into a generated id column needs (a redrive's copy).
    overriding_identity: ClassVar[str] = ""

    # The statement that reads the server's version at startup (MySQL's floor), if any.
    version_query: ClassVar[str | None] = None

    def check_server(self, version: str) -> None:
        """Refuse a server older than the dialect supports (``ServerTooOld``)."""

    def check_ddl_server(self, ddl: Sequence[str], version: str) -> None:
        """Refuse a server that cannot run this DDL (``ServerTooOld``): ``create_tables``
        asks before it runs a statement."""

    # -- naming ---------------------------------------------------------------------------

    def quoted(self, name: str) -> str:
        """``name`` as an identifier: in the dialect's quotes, its own quotes doubled."""
        return f"{self.quote}{name.replace(self.quote, self.quote * 2)}{self.quote}"

    def table(self, spec: TableSpec) -> str:
        return self.qualified(spec.table, spec.schema)

    def qualified(self, table: str, schema: str | None) -> str:
        return f"{self.quoted(schema)}.{self.quoted(table)}" if schema else self.quoted(table)

    def column(self, col: ColumnSpec | None) -> str:
        """The quoted name of a column the spec has (``None``: a role the form needs)."""
        assert col is not None
        return self.quoted(col.column)

    def internal(self, spec: TableSpec, name: str, *also: str | None) -> str:
        """The name of an alias or CTE the statements of ``spec`` introduce: ``name`` itself,
        or ``name_2``, ``name_3``... when a declared name could be taken for it (a column
        ``__lock`` beside the alias ``__lock`` makes ORDER BY ambiguous, or silently orders
        by the wrong one); ``also`` names more to keep clear of. Names compare folded, wider
        than any server's own comparison."""
        names = (spec.table, spec.schema, *(c.column for c in spec.columns), *also)
        taken = {fold(n) for n in names if n is not None}
        found, n = name, 1
        while fold(found) in taken:
            n += 1
            found = f"{name}_{n}"
        return found

    # -- checks -----------------------------------------------------------------------------

    def check(self, spec: TableSpec, dead_letter: DeadLetter | None = None) -> None:
        """Refuse what this dialect cannot serve, before anything runs."""
        if spec.form not in self.forms:
            served = " or ".join(f.__name__ for f in self.forms)
            msg = (
                f"{spec.label}: {self.name} cannot serve the {spec.form.__name__} form "
                f"(it serves {served}); {self._form_fix(spec.form)}"
            )
            raise UnsupportedForm(msg)
        if spec.isolation not in self.isolations:
            opens = ", ".join(o.__name__ for o in self.isolations)
            msg = (
                f"{spec.label}: {self.name} opens no transaction at {spec.isolation.__name__} "
                f"(it opens {opens}); {self._isolation_fix(spec.isolation)}"
            )
            raise UnsupportedIsolation(msg)
        self.check_names(spec, dead_letter)
        if spec.fifo:
            self.check_fifo(spec)

    def check_transactional(self, spec: TableSpec, *, where: str) -> None:
        """Refuse a table whose handlers this dialect cannot run inside the delivery's
        transaction (``transactional()``; PostgreSQL's lease form above read committed)."""

    def check_fifo(self, spec: TableSpec) -> None:
        """Refuse a FIFO table this dialect cannot guard (MySQL: row lock at SERIALIZABLE)."""

    def check_names(self, spec: TableSpec, dead_letter: DeadLetter | None = None) -> None:
        """Refuse a name this dialect's server cannot hold (too long, or a character or shape
        it refuses), naming what was found; the class statement refused what no server holds."""
        names = [("table", spec.table), *(("column", c.column) for c in spec.columns)]
        if spec.schema:
            names.append(("schema", spec.schema))
        if dead_letter is not None and dead_letter.table is not None:
            names.append(("dead letter table", dead_letter.table))
            if dead_letter.schema:
                names.append(("dead letter schema", dead_letter.schema))
        for what, name in names:
            check_name(spec.label, what, name)
            self.check_identifier(name, spec.label)
            self.check_characters(name, what, spec.label)

    def check_identifier(self, name: str, where: str) -> None:
        limit = self.identifier_limit
        if limit is not None and self.identifier_length(name) > limit:
            msg = (
                f"{where}: {self.name} identifiers are at most {limit} "
                f"{self.identifier_unit}, found {name!r} ({self.identifier_length(name)}); "
                f"use a shorter name"
            )
            raise IdentifierTooLong(msg)

    def check_characters(self, name: str, what: str, where: str) -> None:
        """Dialect rules on the characters of a ``what`` (``table``, ``column``, ``schema``,
        ``dead letter table``...) named ``name``; none here."""

    identifier_unit: ClassVar[str] = "characters"

    def identifier_length(self, name: str) -> int:
        return len(name)

    def _form_fix(self, form: type[Form]) -> str:
        return "declare Inbox[Lease] with a LockedUntil field, or Inbox[Advisory]"

    def _isolation_fix(self, isolation: type[Isolation]) -> str:
        return "declare one of those as the table's isolation level"

    # -- statements (composed into plans by plans.py) --------------------------------------

    def every_group_claim(
        self, spec: TableSpec, claim: tuple[Statement, ...], skip: str | None
    ) -> tuple[Statement, ...]:
        """The claim of a subscription over every group of a FIFO table (but ``skip``, its
        dead letter group): each head is claimed with the claim of a subscription to its
        group, after ``every_group_heads`` (SQLite, one writer, overrides this with one claim
        over every group)."""
        return claim

    def every_group_heads(self, spec: TableSpec, skip: str | None) -> Statement | None:
        """The read of the groups whose head is due, before each head's claim."""
        return self.heads(spec, skip)

    def render(self, event: str, sql: Frag) -> Statement:
        """``sql`` as the statement of ``event``, in this dialect's placeholders (on the
        database clock with the server's now)."""
        return render(event, self.on_server_clock(sql), self.style)

    def select_list(self, spec: TableSpec, *, attempt_before: bool = False) -> str:
        """Every column in declaration order; with ``attempt_before`` the attempt reads one
        less (the claim counted it, the delivery reports the value before)."""
        cols: list[str] = []
        for col in spec.columns:
            if attempt_before and col.role == "attempt":
                cols.append(f"{self.attempt_before(col)} AS {self.column(col)}")
            else:
                cols.append(self.column(col))
        return ", ".join(cols)

    def attempt_before(self, col: ColumnSpec) -> str:
        return f"{self.column(col)} - 1"

    def claimable(
        self, spec: TableSpec, *, prefix: str = "", groups: GroupNames | None = None
    ) -> list[Frag]:
        """Conditions of a due, unfinished row of the subscription's group (or of the groups
        ``groups`` names)."""
        conds: list[Frag] = []
        if spec.group is not None and groups is not None:
            conds.extend(self.named_groups(spec, groups, prefix=prefix))
        elif spec.group is not None:
            conds.append(prefix + self.column(spec.group) + " = " + P("group"))
        if spec.retry_after is not None:
            conds.append(prefix + self.column(spec.retry_after) + " <= " + P("now"))
        if spec.processed_at is not None:
            conds.append(f"{prefix}{self.column(spec.processed_at)} IS NULL")
        return conds

    def named_groups(self, spec: TableSpec, groups: GroupNames, *, prefix: str = "") -> list[str]:
        """The conditions of a row of the groups ``groups`` names, their names written as
        literals: they are fixed when the subscription's plan is built. A prefix compares the
        name's first characters (``substr``, which every dialect counts in characters, where
        ``LIKE`` would need its wildcards escaped and ignores case on SQLite)."""
        col = prefix + self.column(spec.group)
        either: list[str] = []
        if groups.exact:
            either.append(f"{col} IN ({', '.join(self.literal(n) for n in groups.exact)})")
        either.extend(
            f"substr({col}, 1, {len(start)}) = {self.literal(start)}" for start in groups.prefixes
        )
        conds = (
            ["(" + " OR ".join(either) + ")" if len(either) > 1 else either[0]] if either else []
        )
        conds.extend(f"{col} <> {self.literal(skip)}" for skip in groups.skip)
        return conds

    def lease_free(self, spec: TableSpec, *, prefix: str = "") -> Sql:
        col = prefix + self.column(spec.locked_until)
        return "(" + col + " IS NULL OR " + col + " <= " + P("now") + ")"

    def order_by(self, spec: TableSpec, *, prefix: str = "") -> str:
        """The claim's order: priority (smaller first), due time, id; the claim index's."""
        keys: list[str] = []
        if spec.priority is not None:
            keys.append(f"{prefix}{self.column(spec.priority)}")
        if spec.retry_after is not None:
            keys.append(f"{prefix}{self.column(spec.retry_after)}")
        keys.append(f"{prefix}{self.column(spec.id)}")
        return ", ".join(keys)

    @staticmethod
    def where(conds: Sequence[Frag]) -> Sql:
        return " WHERE " + join(" AND ", conds) if conds else Sql()

    def by_id(self, spec: TableSpec, *, token: bool) -> Sql:
        """``WHERE id = ?``, conditioned on the lease token in the lease form."""
        conds: list[Frag] = [self.column(spec.id) + " = " + P("id")]
        if token:
            conds.append(self.column(spec.locked_until) + " = " + P("token"))
        return self.where(conds)

    def finish(self, spec: TableSpec, *, token: bool) -> Statement:
        """Ack and drop: mark processed or delete (lease: only while the token holds)."""
        t = self.table(spec)
        if spec.processed_at is not None:
            sets: list[Frag] = [self.column(spec.processed_at) + " = " + P("now")]
            if spec.result is not None:
                sets.append(self.column(spec.result) + " = " + self.result_slot())
            if token:
                sets.append(f"{self.column(spec.locked_until)} = NULL")
            return self.render(
                "ack", "UPDATE " + t + " SET " + join(", ", sets) + self.by_id(spec, token=token)
            )
        return self.render("ack", "DELETE FROM " + t + self.by_id(spec, token=token))

    def update(
        self, event: str, spec: TableSpec, sets: Sequence[Frag], *, token: bool
    ) -> Statement:
        if token:
            sets = [*sets, f"{self.column(spec.locked_until)} = NULL"]
        return self.render(
            event,
            "UPDATE "
            + self.table(spec)
            + " SET "
            + join(", ", sets)
            + self.by_id(spec, token=token),
        )

    def result_slot(self) -> Sql:
        """The ack's value of the Result field: the result's JSON text (PostgreSQL casts it to
        the column's jsonb)."""
        return P("result")

    def bump(self, spec: TableSpec) -> list[Frag]:
        """The row lock form counts the attempt when it settles a retry."""
        if spec.attempt is None:
            return []
        return [f"{self.column(spec.attempt)} = {self.column(spec.attempt)} + 1"]

    def retry_after_statement(
        self, spec: TableSpec, *, token: bool, count: bool
    ) -> Statement | None:
        if spec.retry_after is None:
            return None
        sets: list[Frag] = [self.column(spec.retry_after) + " = " + P("retry_at")]
        if count:
            sets += self.bump(spec)
        return self.update("retry_after", spec, sets, token=token)

    def snooze_statement(
        self, spec: TableSpec, *, token: bool, give_back: bool
    ) -> Statement | None:
        """A snooze: the row due at ``retry_at``, its attempt given back where the claim
        counted it (``give_back``), so the delivery spends none; ``None`` without a RetryAfter
        field (the runtime refuses the outcome there)."""
        if spec.retry_after is None:
            return None
        sets: list[Frag] = [self.column(spec.retry_after) + " = " + P("retry_at")]
        if give_back:
            sets += self.give_back(spec)
        return self.update("snooze", spec, sets, token=token)

    def give_back(self, spec: TableSpec) -> list[Frag]:
        """The attempt the claim counted, given back (a snooze spends none)."""
        if spec.attempt is None:
            return []
        return [f"{self.column(spec.attempt)} = {self.column(spec.attempt)} - 1"]

    def dead_letter_statements(
        self, spec: TableSpec, dead_letter: DeadLetter | None, *, token: bool
    ) -> tuple[Statement, ...]:
        if dead_letter is None:
            return ()
        if dead_letter.group is not None:
            if spec.group is None:
                msg = (
                    f"{spec.label}: a dead letter group moves rows within a table's group "
                    f"column, found no Group field; add one or name a dead letter table"
                )
                raise DeclarationError(msg)
            sets: list[Frag] = []
            if spec.origin_group is not None:
                # First: MySQL assigns left to right, each reading the values set before it.
                sets.append(f"{self.column(spec.origin_group)} = {self.column(spec.group)}")
            sets.append(self.column(spec.group) + " = " + P("dest"))
            if spec.dead_lettered_at is not None:
                sets.append(self.column(spec.dead_lettered_at) + " = " + P("now"))
            return (self.update("dead_letter", spec, sets, token=token),)
        return self.move_to_table(spec, dead_letter, token=token)

    def move_to_table(
        self, spec: TableSpec, dead_letter: DeadLetter, *, token: bool
    ) -> tuple[Statement, ...]:
        """Copy the row into the dead letter table, then delete it: two statements that the
        form runs in one transaction (PostgreSQL overrides this with one statement)."""
        t = self.table(spec)
        dest = self.qualified(str(dead_letter.table), dead_letter.schema)
        cols = ", ".join(self.column(c) for c in spec.columns)
        copy = self.render(
            "dead_letter",
            f"INSERT INTO {dest} ({cols}) SELECT "
            + self.dead_letter_values(spec)
            + f" FROM {t}"
            + self.by_id(spec, token=token),
        )
        delete = self.render("dead_letter", "DELETE FROM " + t + self.by_id(spec, token=token))
        return (copy, delete)

    def dead_letter_values(self, spec: TableSpec) -> Frag:
        """What a move into a dead letter table copies of each column: the row's own value,
        but no lease, and the move's now in a ``DeadLetteredAt`` column."""
        values: list[Frag] = []
        for c in spec.columns:
            if c.role == "locked_until":
                values.append("NULL")
            elif c.role == "dead_lettered_at":
                values.append(P("now"))
            else:
                values.append(self.column(c))
        return join(", ", values)

    def insert(self, spec: TableSpec) -> Statement:
        """The publish: every writable column, each bound under its column's name."""
        return self.render("insert", self.insert_sql(spec))

    def insert_sql(self, spec: TableSpec) -> Frag:
        """The publish's parts, before rendering (``insert_statement`` renders them for the
        user's own driver)."""
        self.check_names(spec)
        cols = spec.insert_columns
        t = self.table(spec)
        if not cols:
            return self.insert_defaults(t)
        names = ", ".join(self.column(c) for c in cols)
        values = join(", ", (self.insert_slot(spec, c) for c in cols))
        return f"INSERT INTO {t} ({names}) VALUES (" + values + ")"

    # -- dedup keys (Unique()) ----------------------------------------------------------------
    #
    # A row holds its key while it is unfinished: not marked processed (ProcessedAt NULL) and
    # not a dead letter in a group of its table (OriginGroup NULL; a dead letter table takes
    # the row out of the table). PostgreSQL and SQLite enforce it with a partial unique index
    # on the key over those rows; MySQL and MariaDB, without partial indexes, with a unique
    # index on a generated column holding the key while the row holds it (NULL after), which
    # ``unique_held`` names. A table whose rows always hold their key (ack deletes, no dead
    # letter group) indexes the key column itself.

    def unique_holds(self, spec: TableSpec) -> list[str]:
        """The conditions of a row that holds its key (none: every row of the table)."""
        conds: list[str] = []
        if spec.processed_at is not None:
            conds.append(f"{self.column(spec.processed_at)} IS NULL")
        if spec.origin_group is not None:
            conds.append(f"{self.column(spec.origin_group)} IS NULL")
        return conds

    def unique_held(self, spec: TableSpec) -> str | None:
        """The generated column the unique index is on, where there is one (MySQL's, when
        some rows let their key go); ``None``: the index is on the key column itself."""
        return None

    def unique_insert(self, spec: TableSpec) -> UniqueInsert:
        """A publish with a dedup key: the insert that writes the row unless an unfinished
        row holds the key, and the read of the row that holds it. PostgreSQL and SQLite:
        ``ON CONFLICT (key) WHERE ... DO NOTHING RETURNING id``, a row back when it wrote one
        (a conflict on any other constraint, the primary key, raises as a plain insert's)."""
        return UniqueInsert(
            self.render("insert", self.unique_insert_sql(spec)), self.unique_holder(spec)
        )

    def unique_insert_sql(self, spec: TableSpec) -> Frag:
        """The insert of a publish with a dedup key, before rendering (``insert_statement``
        renders it for the user's own driver): a row back with its id when it wrote one."""
        return self.insert_sql(spec) + self.unique_suffix(spec)

    def unique_suffix(self, spec: TableSpec) -> str:
        """What the insert of a publish with a dedup key adds to the plain insert."""
        return self.unique_conflict(spec) + f" {self.column(spec.id)}"

    def unique_conflict(self, spec: TableSpec) -> str:
        """What follows an insert that writes nothing where an unfinished row holds the key,
        up to its ``RETURNING`` (the returned columns follow)."""
        holds = self.unique_holds(spec)
        target = f" ({self.column(spec.unique)})"
        if holds:
            target += " WHERE " + " AND ".join(holds)
        return f" ON CONFLICT{target} DO NOTHING RETURNING"

    def unique_holder(self, spec: TableSpec) -> Statement:
        """The id of the row that holds the publish's key (its value in the key column's
        slot), through the unique index."""
        key = self.column(spec.unique)
        held = self.unique_held(spec)
        conds: list[Frag]
        if held is not None:
            conds = [self.quoted(held) + " = " + P(self.slot_of(spec.unique))]
        else:
            conds = [key + " = " + P(self.slot_of(spec.unique)), *self.unique_holds(spec)]
        return self.render(
            "holder", f"SELECT {self.column(spec.id)} FROM {self.table(spec)}" + self.where(conds)
        )

    # -- batch publish (publish_many) ----------------------------------------------------------
    #
    # A batch writes its rows chunk by chunk, one statement each: multi-row VALUES, the row's
    # part repeated (PostgreSQL binds one array per slot instead, ``Postgres.batch_insert``).
    # The statement returns each new row's id and key, and a chunk's rows are inserted in the
    # order given, so that the generated ids rise in that order: the broker matches the
    # returned rows to the chunk's by key and by rising id, whatever order they come back in.

    # Parameters a statement may bind (None: no limit the protocol sets); SQLite's is the
    # running library's (``SQLITE_MAX_VARIABLE_NUMBER``), read when a broker first needs it.
    parameter_limit: ClassVar[int | None] = None
    # The statement that reads the largest statement the server takes, in bytes (MySQL's
    # max_allowed_packet), if there is one.
    packet_limit_query: ClassVar[str | None] = None
    # Whether ``batch_insert`` takes the columns' types from the catalog (``columns_query``).
    batch_types: ClassVar[bool] = False

    def batch_insert(
        self, spec: TableSpec, *, keyed: bool, types: Mapping[str, str] | None = None
    ) -> BatchInsert:
        """The insert of a chunk of a batch publish: with ``keyed``, one that skips a row
        whose key an unfinished row holds (or an earlier row of the chunk); ``types``, the
        columns' types as the catalog has them (PostgreSQL's arrays)."""
        self.check_names(spec)
        cols = spec.insert_columns
        if not cols:
            msg = (
                f"publish_many into {spec.label}: a batch writes each row's fields, found a "
                f"table whose every field is generated; publish its rows one by one"
            )
            raise DeclarationError(msg)
        names = ", ".join(self.column(c) for c in cols)
        head = self.render("insert_many", f"INSERT INTO {self.table(spec)} ({names}) VALUES ")
        row = self.render("insert_many", self._batch_row(spec))
        back = self.column(spec.id)
        if spec.unique is not None:
            back += ", " + self.column(spec.unique)
        tail = (self.unique_conflict(spec) if keyed else " RETURNING") + f" {back}"
        return BatchInsert(head.sql, row, self.render("insert_many", tail).sql)

    def _batch_row(self, spec: TableSpec, suffix: str = "") -> Sql:
        """One row of a multi-row VALUES, each slot's name followed by ``suffix``."""
        slots: list[Frag] = []
        for col in spec.insert_columns:
            slot = self.insert_slot(spec, col)
            slots.append(_suffixed(slot, suffix) if suffix else slot)
        return "(" + join(", ", slots) + ")"

    def insert_many_sql(self, spec: TableSpec, count: int, *, keyed: bool) -> Frag:
        """``count`` rows in one insert for the user's own driver (``insert_many_statement``):
        row ``n``'s slots are its columns' followed by ``_n`` (from 1); with ``keyed``, the
        dedup of ``unique_insert_sql``."""
        self.batch_insert(spec, keyed=False)  # the names, and a table with fields to write
        cols = spec.insert_columns
        names = ", ".join(self.column(c) for c in cols)
        rows = join(", ", (self._batch_row(spec, f"_{n}") for n in range(1, count + 1)))
        tail = self.unique_suffix(spec) if keyed else ""
        return f"INSERT INTO {self.table(spec)} ({names}) VALUES " + rows + tail

    def batch_holders(self, spec: TableSpec, count: int) -> Statement:
        """The key and id of the rows that hold any of ``count`` keys (slots ``key0``...)."""
        held = self.unique_held(spec)
        column = self.quoted(held) if held is not None else self.column(spec.unique)
        keys = join(", ", (P(f"key{i}") for i in range(count)))
        conds: list[Frag] = [column + " IN (" + keys + ")"]
        if held is None:
            conds.extend(self.unique_holds(spec))
        return self.render(
            "holders",
            f"SELECT {column}, {self.column(spec.id)} FROM {self.table(spec)}" + self.where(conds),
        )

    def slot_of(self, col: ColumnSpec | None) -> str:
        """The parameter a publish binds ``col``'s value under: its column's name."""
        assert col is not None
        return col.column

    def unique_index_query(self, spec: TableSpec) -> Statement:
        """The catalog read of the table's unique indexes on one column: the column and the
        index's predicate (MySQL: the column's generation expression), ``NULL`` for none."""
        raise NotImplementedError

    def unique_index_found(self, spec: TableSpec, records: Sequence[Sequence[object]]) -> bool:
        """Whether one of the indexes read holds each key once over exactly the rows that
        hold their key: on the key column with the conditions of ``unique_holds`` as its
        predicate, or (MySQL) on the generated column holding the key under them. The text
        compares without quotes, parentheses or case (each server writes it its own way)."""
        key = spec.unique
        assert key is not None
        held = self.unique_held(spec)
        column = held if held is not None else key.column
        want = {_normal(c) for c in self.unique_holds(spec)}
        for name, text in records:
            found = _str(name)
            if (
                (found.casefold() != column.casefold())
                if self.folds_column_names
                else (found != column)
            ):
                continue
            normal = _normal(_str(text)) if text else ""
            if held is not None:
                # if <conditions>,<key>,null
                tail = f",{_normal(self.quoted(key.column))},null"
                if not (normal.startswith("if ") and normal.endswith(tail)):
                    continue
                normal = normal[3 : -len(tail)]
            got: set[str] = {c for c in normal.split(" and ") if c} if normal else set()
            if got == want:
                return True
        return False

    # Error codes of a deadlock a publish with a dedup key retries on a connection of its own
    # (MySQL's gap locks on the unique index under REPEATABLE READ).
    unique_deadlocks: ClassVar[tuple[str, ...]] = ()

    def driver_value(self, value: object) -> object:
        """``value`` as another driver of this database binds it into the column as trinbox's
        own driver writes it (``insert_statement``); the same conversion as the driver's own,
        written again since dialects never import drivers. The DDL's JSON columns take a
        ``dict`` or ``list`` as its JSON text, its UUID columns a UUID as text (every
        driver binds text into them; none binds a dict)."""
        if isinstance(value, dict | list):
            return json.dumps(value)
        if isinstance(value, UUID):
            return str(value)
        return value

    def headers_json(self, headers: Mapping[str, str]) -> str:
        """Headers as the Headers column's JSON text: one object, its names sorted, compact,
        other than ASCII written as itself. PostgreSQL's jsonb and MySQL's JSON keep a normal
        form of their own; SQLite keeps the text as written, so that equal headers are equal
        text there too (and ``insert_statement`` binds the same text for another driver)."""
        return json.dumps(headers, sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    def insert_defaults(self, table: str) -> str:
        return f"INSERT INTO {table} DEFAULT VALUES"

    def delete_first(
        self, table: str, where: Sql, order: str, limit: int, *, skip_locked: bool = False
    ) -> Sql:
        """A DELETE of the first ``limit`` rows of ``table`` that match ``where``, by the
        column ``order`` (unique among them): a short statement to repeat (tick pruning,
        retention). ``skip_locked``: rows another transaction holds are passed over where
        the dialect can (``skip_locked_suffix``)."""
        lock = self.skip_locked_suffix if skip_locked else ""
        return (
            f"DELETE FROM {table} WHERE {order} IN (SELECT {order} FROM {table} WHERE "
            + where
            + f" ORDER BY {order} LIMIT {limit}{lock}) AND "
            + where
        )

    def prune_begin(self) -> Statement | None:
        """What runs before each retention delete on its connection (MySQL: the level of
        the one-statement transaction that follows); none elsewhere."""
        return None

    def begin(self, spec: TableSpec) -> Statement:
        return self.render("begin", "BEGIN")

    def notify_statement(self) -> Statement | None:
        """Announce a published row to listeners (PostgreSQL's NOTIFY); ``None`` elsewhere."""
        return None

    def lease_claim_begin(self) -> Statement:
        """The transaction of a claim that selects and then stamps (MySQL's lease claim)."""
        return self.render("begin", "BEGIN")

    def plain_begin(self) -> Statement:
        """A transaction at the default level: dead letter moves, user transactions."""
        return self.render("begin", "BEGIN")

    def redrive_begin(self) -> Statement:
        """The transaction of a redrive (``trinbox dead-letters``): it reads, then writes."""
        return self.plain_begin()

    @property
    def default_now(self) -> str:
        """The DDL's default of a generated RetryAfter: the one now, as a column default."""
        return self.server_clock.now

    def key_expression(self, spec: TableSpec) -> str:
        """The advisory key, rendered by the database from the template."""
        parts: list[str] = []
        for part in spec.key:
            if isinstance(part, KeyLiteral):
                parts.append(self.literal(part.text))
            else:
                assert isinstance(part, KeyColumn)
                parts.append(self.key_column(self.quoted(part.column)))
        return self.concat(parts) if parts else "''"

    def literal(self, text: str) -> str:
        """A string literal: quotes doubled (MySQL also doubles backslashes)."""
        return "'" + text.replace("'", "''") + "'"

    def key_column(self, column: str) -> str:
        return f"COALESCE(CAST({column} AS TEXT), '')"

    def concat(self, parts: Sequence[str]) -> str:
        return " || ".join(parts)

    # -- forms (dialects override the claim shapes) ----------------------------------------------

    def lease_claim(
        self, spec: TableSpec, groups: GroupNames | None = None
    ) -> tuple[Statement, ...]:
        """The lease claim of the subscription's group, or of the groups ``groups`` names."""
        raise NotImplementedError

    def limited_lease_claim(
        self,
        spec: TableSpec,
        limits: ClaimLimits,
        *,
        every_group: bool = False,
        skip: str | None = None,
    ) -> tuple[Statement, ...]:
        """The lease claim under ``InboxQueue.limit`` (``_limited.py`` chooses the rows), in
        the shape of ``lease_claim``; run behind ``limit_lock``."""
        raise NotImplementedError

    def limited_row_lock_claim(self, spec: TableSpec, limits: ClaimLimits) -> tuple[Statement, ...]:
        """The row lock claim under ``InboxQueue.limit``, run after the claim's begin: each
        row takes a slot of its key, a lock that never waits. PostgreSQL: one statement in
        the shape of ``row_lock_claim``, the rows it locked (transaction locks,
        ``_slots.py``); MySQL: the slots each key took (session locks,
        ``_session_slots.py``), whose rows ``slot_rows`` and ``slot_lock`` then lock."""
        raise NotImplementedError

    def slot_rows(self, spec: TableSpec, limits: ClaimLimits) -> Statement | None:
        """The candidate ids of a key (``key``) the limited row lock claim took slots of;
        ``None`` where the claim's statement locks its rows itself (PostgreSQL)."""
        return None

    def slot_lock(self, spec: TableSpec) -> Statement | None:
        """The lock of one candidate (``id``) of a key the limited row lock claim took slots
        of, its row if taken; ``None`` as ``slot_rows``."""
        return None

    def slot_release(self) -> Statement | None:
        """The release of the limited row lock claim's slots, run on its connection once its
        transaction has ended (MySQL's session locks); ``None`` where they end with it."""
        return None

    def limited_advisory(
        self, spec: TableSpec, limits: ClaimLimits
    ) -> tuple[Statement, Statement | None, Statement | None]:
        """The advisory form under ``InboxQueue.limit`` (``_advisory_slots.py``): its
        candidates, key slots and unlock, each row holding slots of its limit key as session
        locks beside its key's; where the process keeps the keys (SQLite) the candidates only,
        the process keeping the slots with them."""
        raise NotImplementedError

    def limited_head_claim(self, spec: TableSpec, limits: ClaimLimits) -> Statement:
        """The row lock claim of a FIFO group's head under ``InboxQueue.limit``, in the shape
        of ``head_claim`` (one statement after the group's guard, the head it locked): the
        head takes a slot of its key, a lock its transaction holds (PostgreSQL's,
        ``_slots.py``). Refused elsewhere for now."""
        msg = (
            f"{spec.label}: .limit() beside Group(fifo=True) on an Inbox[RowLock] table takes a "
            f"slot of the head's key as a transaction lock after the group's guard, which "
            f"{self.name} does not do for now, found {limits.label}; declare the table "
            f"Inbox[Lease] (limits count live leases there, beside FIFO groups too) or serve it "
            f"from PostgreSQL"
        )
        raise UnsupportedForm(msg)

    def limit_lock(self, spec: TableSpec) -> Statement | None:
        """What serializes the limited claims of ``spec``'s table across processes, run first
        on the claim's connection: a transaction lock inside ``limited_claim_begin``
        (PostgreSQL), a session lock before it (MySQL, let go by ``limit_unlock``); none where
        one writer at a time serializes every claim (SQLite)."""
        return None

    def limit_unlock(self, spec: TableSpec) -> Statement | None:
        """The release of a session ``limit_lock`` (MySQL), after the claim's commit."""
        return None

    # -- rates (InboxQueue.limit(rate=...), _rated.py) -------------------------------------------

    def epoch_us(self, time: Frag) -> Frag:
        """``time`` (a stored time, or the now slot) in whole microseconds since the epoch."""
        return "CAST(EXTRACT(EPOCH FROM CAST(" + time + " AS TIMESTAMPTZ)) * 1000000 AS BIGINT)"

    def greatest(self, a: Frag, b: Frag) -> Frag:
        """The greater of two non-NULL integers."""
        return "GREATEST(" + a + ", " + b + ")"

    def int_div(self, a: Frag, b: Frag) -> Frag:
        """Integer division of non-negative integers, rounded down."""
        return "(" + a + ") / " + b

    def rate_key_text(self, column: str) -> str:
        """A rate row's key of a key column's value: ``'v'`` and its text, ``'n'`` for NULL."""
        return f"COALESCE('v' || CAST({column} AS TEXT), 'n')"

    def rate_upsert(self, name: str, select: Frag, tat: Callable[[str], Frag]) -> Frag:
        """Insert the rate row ``select`` reads into the rate table ``name``, or, where its key
        is there, set its time to ``tat`` of the time stored."""
        alias = self.quoted("__r")
        return (
            f"INSERT INTO {name} AS {alias} (tbl, grp, rate_key, tat) "
            + select
            + " ON CONFLICT (tbl, grp, rate_key) DO UPDATE SET tat = "
            + tat(f"{alias}.tat")
        )

    def limited_claim_begin(self) -> Statement:
        """The transaction of a limited claim: READ COMMITTED, so each statement reads what
        the claims before it committed."""
        return self.lease_claim_begin()

    def fifo_lease_claim(self, spec: TableSpec) -> tuple[Statement, ...]:
        """The lease claim of a FIFO group's head ("FIFO groups" below), in the shape of
        ``lease_claim``."""
        raise NotImplementedError

    def fifo_guard(self, spec: TableSpec) -> Statement | None:
        """The FIFO group guard ("FIFO groups" below); none where one writer at a time is the
        guard."""
        return None

    def lease_extend(
        self, spec: TableSpec, count: int, *, progress: bool = False
    ) -> tuple[Statement, ...]:
        """The lease keeper's round over ``count`` deliveries, in one statement: every lease
        its token still holds moves to the new expiry (``lease``; on the database clock the
        server's now plus ``lease_seconds``), and the ids it moved come back (on the database
        clock each with the token the server wrote). The ids and their tokens are bound as
        two lists, ``ids`` and ``tokens``, in the same order, so the text is the same for
        every round. MySQL overrides it (no RETURNING).

        ``progress`` (a table with a ``Progress`` column): the same statement also writes
        each row's reported progress, bound as a third list in the same order, ``progress``,
        where NULL keeps the column as it is (``progress_sets``)."""
        locked = self.column(spec.locked_until)
        sets: Frag = f"{locked} = " + self.lease_at()
        if progress:
            sets = sets + ", " + self.progress_sets(spec)
        return (
            self.render(
                "extend",
                f"UPDATE {self.table(spec)} SET "
                + sets
                + " WHERE "
                + self.lease_pairs(spec)
                + f" RETURNING {self.column(spec.id)}"
                + self.token_column(spec, stored=True),
            ),
        )

    def lease_pairs(self, spec: TableSpec) -> Sql:
        """Rows whose (id, lease) is one of the pairs of the ``ids`` and ``tokens`` lists."""
        raise NotImplementedError

    def progress_sets(self, spec: TableSpec) -> Frag:
        """The extension's write of the ``Progress`` column: the value of the row's id in the
        ``progress`` list (beside ``ids``), or the column's own where that value is NULL."""
        raise NotImplementedError

    def lease_batch(self, spec: TableSpec) -> tuple[Statement, ...]:
        """Settlements of many rows in one statement each (PostgreSQL, SQLite); none where
        an UPDATE cannot return the rows it changed (MySQL)."""
        return ()

    def lease_batch_where(self, spec: TableSpec, in_ids: Sql) -> tuple[Statement, ...]:
        """Ack, retry and retry_after for every row of a claim in one statement: the rows
        whose lease the token still holds are settled, and their ids returned (a row left out
        lost its lease). ``in_ids`` tests the id against the ``ids`` parameter."""
        t = self.table(spec)
        ident = self.column(spec.id)
        locked = self.column(spec.locked_until)
        where = f" WHERE {ident} " + in_ids + f" AND {locked} = " + P("token")
        returning = f" RETURNING {ident}"
        free = f"{locked} = NULL"
        if spec.processed_at is not None:
            done: Sql = self.column(spec.processed_at) + " = " + P("now")
            if spec.result is not None:
                done = done + ", " + self.column(spec.result) + " = " + self.result_slot()
            ack = f"UPDATE {t} SET " + done + f", {free}" + where
        else:
            ack = "DELETE FROM " + t + where
        found = [
            self.render("ack", ack + returning),
            self.render("retry", f"UPDATE {t} SET {free}" + where + returning),
        ]
        if spec.retry_after is not None:
            later = self.column(spec.retry_after) + " = " + P("retry_at")
            found.append(
                self.render(
                    "retry_after", f"UPDATE {t} SET " + later + f", {free}" + where + returning
                )
            )
            back = join(", ", [later, *self.give_back(spec), free])
            found.append(self.render("snooze", f"UPDATE {t} SET " + back + where + returning))
        return tuple(found)

    def advisory_candidates(self, spec: TableSpec) -> Statement:
        raise NotImplementedError

    def advisory_take(self, spec: TableSpec) -> tuple[Statement, ...]:
        """Take the row while it is still claimable, counting the attempt (one statement with
        RETURNING; MySQL overrides with update + select)."""
        t = self.table(spec)
        conds = [self.column(spec.id) + " = " + P("id"), *self.claimable(spec)]
        if spec.attempt is None:
            select = f"SELECT {self.select_list(spec)} FROM {t}" + self.where(conds)
            return (self.render("take", select),)
        attempt = self.column(spec.attempt)
        return (
            self.render(
                "take",
                f"UPDATE {t} SET {attempt} = {attempt} + 1"
                + self.where(conds)
                + f" RETURNING {self.select_list(spec, attempt_before=True)}",
            ),
        )

    def key_free(self, spec: TableSpec) -> Frag:
        """A condition on a row of the advisory form: no session holds its key now (a cancel
        of a queued row, ``trinbox._dialects.cancels``). It holds the key itself until the
        statement ends where it can (PostgreSQL), or relies on the take being guarded on the
        row being claimable (MySQL); SQLite binds the keys this process holds (``held``)."""
        raise NotImplementedError

    def advisory_lock(self, spec: TableSpec) -> Statement | None:
        return None

    def advisory_unlock(self, spec: TableSpec) -> Statement | None:
        return None

    def row_lock_claim(self, spec: TableSpec) -> Statement:
        t = self.table(spec)
        return self.render(
            "claim",
            f"SELECT {self.select_list(spec)} FROM {t}"
            + self.where(self.claimable(spec))
            + f" ORDER BY {self.order_by(spec)} LIMIT "
            + P("limit")
            + " FOR UPDATE SKIP LOCKED",
        )

    # -- custom claims (InboxQueue.custom_claim) --------------------------------------------

    def fetch_by_ids(self, spec: TableSpec) -> Statement | None:
        """The rows of a custom claim's ids (the ``ids`` list), every column in declaration
        order, read in the claim's transaction; ``None`` where no statement binds a list of
        ids (MySQL, SQLite: the queue brings its fetch). PostgreSQL overrides it."""
        return None

    def custom_claim_begin(self) -> Statement:
        """The transaction of a custom lease claim, which reads (the queue's claim, the fetch)
        and then stamps: a lease claim's (MySQL: READ COMMITTED)."""
        return self.lease_claim_begin()

    def lease_stamp_by_id(self, spec: TableSpec) -> Statement:
        """A custom lease claim's stamp of one claimed row (the lease, the attempt counted),
        while the row is claimable and its lease free: a row the stamp does not change drops
        out of the claim."""
        conds = [
            self.column(spec.id) + " = " + P("id"),
            *self.claimable(spec),
            self.lease_free(spec),
        ]
        return self.render(
            "stamp",
            f"UPDATE {self.table(spec)} SET "
            + self.lease_stamp(spec, lease=P("lease"))
            + self.where(conds),
        )

    def lease_token_read(self) -> Statement | None:
        """On the database clock, the lease a custom claim's stamps write, read from the
        server once per claim (so every stamp writes the one token the form keeps); none on
        the host clock, whose token the host makes."""
        if not self.database_clock:
            return None
        return self.render("lease", "SELECT " + self.lease_at())

    # -- the server's clock (_clock.py) ---------------------------------------------------

    def on_server_clock(self, sql: Frag) -> Frag:
        """``sql`` with its ``now`` and ``retry_at`` slots written as the server's clock, on a
        dialect of the database clock; as it is on the host clock."""
        if not self.database_clock or isinstance(sql, str):
            return sql
        if _NOW not in sql.parts and _RETRY_AT not in sql.parts:
            return sql
        clock = self.server_clock
        parts: list[str | Param | Sql] = []
        for part in sql.parts:
            if part == _NOW:
                parts.append(clock.now)
            elif part == _RETRY_AT:
                parts.append(clock.due(P("delay")))
            else:
                parts.append(part)
        return Sql(*parts)

    def lease_at(self) -> Sql:
        """What a lease claim writes into the lease column: the host's token (``lease``), or
        the server's now plus ``lease_seconds``."""
        if not self.database_clock:
            return P("lease")
        return self.server_clock.expiry(P("lease_seconds"))

    def lease_stamp(self, spec: TableSpec, *, lease: Sql, row: str = "") -> Sql:
        """A lease claim's SET list: the lease column gets ``lease``, and the attempt (read
        from ``row``, an alias of the table, when the update names one) is counted."""
        sets: list[Frag] = [self.column(spec.locked_until) + " = " + lease]
        if spec.attempt is not None:
            attempt = self.column(spec.attempt)
            source = f"{row}.{attempt}" if row else attempt
            sets.append(f"{attempt} = {source} + 1")
        return join(", ", sets)

    def token_column(self, spec: TableSpec, *, stored: bool = False) -> Sql:
        """The lease claim's last column on the database clock, the token it wrote: the lease
        column itself where the claim returns the row after its stamp (``stored``, SQLite's
        RETURNING), else the expiry again (the same value within one statement). Nothing on
        the host clock, whose token the host made."""
        if not self.database_clock:
            return Sql()
        name = self.quoted(self.internal(spec, "__token"))
        value = Sql(self.column(spec.locked_until)) if stored else self.lease_at()
        return ", " + value + " AS " + name

    def delay_slot(self, spec: TableSpec) -> str:
        """The publish's slot of the delay in microseconds, named clear of the columns'
        slots."""
        return self.internal(spec, "delay_us")

    def insert_slot(self, spec: TableSpec, col: ColumnSpec) -> Sql:
        """A publish's value of ``col``: its slot; on the database clock the RetryAfter field
        is the given value or else the server's now plus the delay."""
        slot = P(col.column)
        if not self.database_clock or col.role != "retry_after":
            return slot
        due = self.server_clock.due(P(self.delay_slot(spec)))
        return "COALESCE(" + slot + ", " + due + ")"

    # -- FIFO groups --------------------------------------------------------------------------
    #
    # A FIFO group (``Group(fifo=True)``, docs/reference.md) is claimed at its **head**, its
    # first unfinished row in the group's order, and only while the head is due and (lease
    # form) no row of the group is in work: nothing is claimed while the head is in work or
    # not yet due, not the row behind it nor a row that enters ahead of it later. The group's
    # order is priority, then id (a head whose retry is delayed stays the head); with
    # ``delayed_rows_move_behind`` it is the claim's order, priority, due time, id.
    #
    # The guard (``fifo_guard``) runs first in the claim's transaction, so claimers on other
    # connections, brokers or processes keep the order: 1 when this transaction holds the
    # group, 0 when another one does (the claim then takes nothing and rolls back).
    # PostgreSQL: a transaction-level advisory lock on ``'<schema.table>:' || group``;
    # MySQL/MariaDB: the count of the group's unfinished rows equals the count this
    # transaction can lock; SQLite: none, one writer at a time. The row lock form holds the
    # guard until the delivery settles, the lease form until the claim commits (the lease
    # holds the group from then on).
    #
    # A subscription over every group (``every_group()``) reads the groups whose head is due
    # (``heads``), in the order of their heads, then claims each as a subscription to that
    # group does, its guard first; SQLite claims the heads of several groups in one
    # statement.

    def fifo_unfinished(self, spec: TableSpec) -> list[Frag]:
        """The group's rows not finished yet: due or not, in work or not."""
        conds: list[Frag] = [self.column(spec.group) + " = " + P("group")]
        if spec.processed_at is not None:
            conds.append(f"{self.column(spec.processed_at)} IS NULL")
        return conds

    def fifo_order(self, spec: TableSpec, *, prefix: str = "") -> str:
        """A FIFO group's order: priority (smaller first), then id; with
        ``delayed_rows_move_behind``, the claim's order (priority, due time, id)."""
        if spec.delayed_rows_move_behind:
            return self.order_by(spec, prefix=prefix)
        keys = [] if spec.priority is None else [f"{prefix}{self.column(spec.priority)}"]
        return ", ".join([*keys, f"{prefix}{self.column(spec.id)}"])

    def fifo_head(self, spec: TableSpec) -> list[Frag]:
        """``id`` is the group's head, and the head is due. The row itself is of the group and
        unfinished too: at READ COMMITTED a row another transaction changed after this
        statement's snapshot is locked as it is now, and only these outer conditions are
        checked again on it (the head's select ran on the snapshot). Without them, a head
        acked or moved to its dead letter group just as this claim locks it would be claimed
        again."""
        t = self.table(spec)
        head = (
            f"SELECT {self.column(spec.id)} FROM {t}"
            + self.where(self.fifo_unfinished(spec))
            + f" ORDER BY {self.fifo_order(spec)} LIMIT 1"
        )
        is_head = self.column(spec.id) + " = (" + head + ")"
        conds: list[Frag] = [is_head, *self.fifo_unfinished(spec)]
        if spec.retry_after is not None:
            conds.append(self.column(spec.retry_after) + " <= " + P("now"))
        return conds

    def fifo_lease_head(self, spec: TableSpec) -> list[Frag]:
        """The head, due, its lease free, and no row of the group in work (a row that entered
        ahead of the head in work is the head now: the head in work still holds the group)."""
        t = self.table(spec)
        work = self.internal(spec, "__work")
        busy = (
            f"SELECT 1 FROM {t} AS {work} WHERE {work}.{self.column(spec.group)} = "
            + P("group")
            + f" AND {work}.{self.column(spec.locked_until)} > "
            + P("now")
        )
        return [*self.fifo_head(spec), self.lease_free(spec), "NOT EXISTS (" + busy + ")"]

    def every_head(self, spec: TableSpec, skip: str | None) -> tuple[str, Sql, list[Frag], str]:
        """Every group's head that is due, while (lease form) no row of its group is in work:
        the alias of the head rows; the ``FROM`` of the table's groups but ``skip`` (the dead
        letter group; ``DISTINCT``, one pass over the claim index), each joined to its head;
        the conditions of a head that may be claimed (its ``WHERE``); and the heads' order."""
        t = self.table(spec)
        ident, group = self.column(spec.id), self.column(spec.group)
        groups, name = self.internal(spec, "__groups"), self.internal(spec, "__group")
        row, first = self.internal(spec, "__head"), self.internal(spec, "__first")
        # The groups with an unfinished row, but the dead letter group.
        which = [] if spec.processed_at is None else [f"{self.column(spec.processed_at)} IS NULL"]
        if skip is not None:
            which.append(f"{group} <> {self.literal(skip)}")
        # The group's first unfinished row in the group's order.
        first_row = (
            f"SELECT {first}.{ident} FROM {t} AS {first} WHERE {first}.{group} = {groups}.{name}"
        )
        if spec.processed_at is not None:
            first_row += f" AND {first}.{self.column(spec.processed_at)} IS NULL"
        first_row += f" ORDER BY {self.fifo_order(spec, prefix=f'{first}.')} LIMIT 1"
        source = (
            f" FROM (SELECT DISTINCT {group} AS {name} FROM {t}"
            + self.where(which)
            + f") AS {groups} JOIN {t} AS {row} ON {row}.{ident} = ({first_row})"
        )
        conds: list[Frag] = []
        if spec.retry_after is not None:
            conds.append(f"{row}.{self.column(spec.retry_after)} <= " + P("now"))
        if spec.form is Lease:
            work = self.internal(spec, "__work")
            conds.append(
                f"NOT EXISTS (SELECT 1 FROM {t} AS {work} WHERE {work}.{group} = {groups}.{name} "
                f"AND {work}.{self.column(spec.locked_until)} > " + P("now") + ")"
            )
        return row, source, conds, self.fifo_order(spec, prefix=f"{row}.")

    def heads(self, spec: TableSpec, skip: str | None = None) -> Statement:
        """The groups but ``skip`` whose head is due and (lease form) has no row of its group
        in work, in the order of their heads, ``limit`` at most: what a subscription over
        every group reads before it claims each group's head. It locks nothing (each claim
        does)."""
        row, source, conds, order = self.every_head(spec, skip)
        return self.render(
            "heads",
            f"SELECT {row}.{self.column(spec.group)}"
            + source
            + self.where(conds)
            + f" ORDER BY {order} LIMIT "
            + P("limit"),
        )

    def head_claim(self, spec: TableSpec) -> Statement:
        """Row lock (PostgreSQL, MySQL): lock the group's head while it is due."""
        return self.render(
            "claim",
            f"SELECT {self.select_list(spec)} FROM {self.table(spec)}"
            + self.where(self.fifo_head(spec))
            + " FOR UPDATE SKIP LOCKED",
        )

    def lease_head_select(self, spec: TableSpec, token: Sql | None = None) -> Sql:
        """Lease (PostgreSQL's CTE, MySQL's select): the locking select of the head while no
        row of the group is in work; ``token``, MySQL's on the database clock, the expiry its
        stamp writes, read from the server as the select's last column."""
        return (
            f"SELECT {self.select_list(spec)}"
            + (token or Sql())
            + f" FROM {self.table(spec)}"
            + self.where(self.fifo_lease_head(spec))
            + " FOR UPDATE SKIP LOCKED"
        )

    # -- the row lock form's count at claim (_count_at_claim.py) ----------------------------

    def count_and_relock(self, spec: TableSpec) -> tuple[Statement, ...]:
        """The count of the attempt (its own committed transaction), then the relock of the
        counted row by id in the delivery's transaction, reading the attempt as it was before
        the count."""
        t = self.table(spec)
        attempt = self.column(spec.attempt)
        count = self.render(
            "count", f"UPDATE {t} SET {attempt} = {attempt} + 1" + self.by_id(spec, token=False)
        )
        conds = [self.column(spec.id) + " = " + P("id"), *self.claimable(spec)]
        relock = self.render(
            "relock",
            f"SELECT {self.select_list(spec, attempt_before=True)} FROM {t}"
            + self.where(conds)
            + " FOR UPDATE SKIP LOCKED",
        )
        return (count, relock)

    def count_guard(self, *, unlock: bool) -> Statement:
        """Take (waiting) or let go of the session lock named by ``key`` that keeps counting
        claims of one queue apart; taking it returns ``GUARD_TAKEN`` once held. Only the
        dialects of the row lock form have one."""
        msg = f"{self.name} has no row lock form, so no count at claim"
        raise AssertionError(msg)


def _suffixed(sql: Frag, suffix: str) -> Frag:
    """``sql`` with ``suffix`` after the name of each of its slots."""
    if isinstance(sql, str):
        return sql
    return Sql(*(Param(p.name + suffix) if isinstance(p, Param) else p for p in sql.parts))


def _str(value: object) -> str:
    """A catalog's text (MySQL's drivers may give bytes)."""
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _normal(text: str) -> str:
    """SQL text as a comparison key: no quotes or parentheses, one space, no case."""
    plain = re.sub(r"[\"`]", "", text).casefold()
    plain = re.sub(r"[()]", " ", plain)
    plain = re.sub(r"\s*,\s*", ",", plain)
    return re.sub(r"\s+", " ", plain).strip()


def fold(name: str) -> str:
    """A comparison key wider than any server's own for names (MariaDB's accent- and
    case-insensitive one, SQLite's ASCII case, trailing spaces padded away)."""
    decomposed = unicodedata.normalize("NFKD", name)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold().rstrip()
