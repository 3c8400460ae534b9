"""MySQL 8.0.1+ and MariaDB 10.6+: all three forms; ``%s`` placeholders, backtick quoting,
identifiers of at most 64 characters.

Transactions: ``begin`` is ``SET TRANSACTION ISOLATION LEVEL <L>``, which sets the level of the
*next* transaction only; the driver follows it with ``START TRANSACTION`` on the same
connection. A table without a declared level opens at READ COMMITTED (at REPEATABLE READ an
unfilled claim gap-locks the table's end and blocks a handler's insert into its own queue).

The lease claim is a transaction of several statements at READ COMMITTED whatever the table
declares (``lease_claim_begin``): the locking select, then one stamp per selected row;
a row the stamp leaves unchanged drops out of the claim. It locks the rows it reads, so a
subscription keeps one lease claim in flight (``lease_claim_serial``).

The advisory form locks a server-wide name with ``GET_LOCK``: the table's database, a dot and
the key, or the key's SHA-256 when that name is empty or longer than 64 characters.

The ``format`` style is interpolated by the client (PyMySQL ``query % args``), so every ``%``
of the text itself (names and literals included) is written ``%%`` when the statement is
rendered: the driver always passes a tuple of arguments, an empty one too, so that ``%%``
reads as ``%``.

Names: at most 64 characters of the Basic Multilingual Plane, not ending in whitespace, and a
table or schema name does not begin with ``#mysql50#`` (MariaDB reads the rest as a file name);
``check_characters`` refuses the others before anything runs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
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
    Form,
    Isolation,
    Lease,
    ReadCommitted,
    ReadUncommitted,
    RepeatableRead,
    RowLock,
    Serializable,
)
from .._declare._spec import KeyColumn, KeyLiteral, TableSpec
from ..errors import DeclarationError, FifoAtSerializable, ServerTooOld, UnsupportedForm
from ._advisory_slots import mysql_candidates, mysql_key_slots, mysql_unlock
from ._base import BatchInsert, Dialect, UniqueInsert
from ._clock import ServerClock
from ._columns import FoundColumn, Retype, default_value
from ._count_at_claim import GUARD_WAIT_SECONDS
from ._ddl_types import DdlRules
from ._limited import TAKE, limited_ids
from ._session_slots import RELEASE, slot_lock, slot_rows, slot_take
from ._statement import Frag, P, ParamStyle, Sql, Statement, join

__all__ = ["MySqlDialect"]

_LEVELS: dict[type[Isolation], str] = {
    Default: "READ COMMITTED",
    ReadUncommitted: "READ UNCOMMITTED",
    ReadCommitted: "READ COMMITTED",
    RepeatableRead: "REPEATABLE READ",
    Serializable: "SERIALIZABLE",
}

# SKIP LOCKED arrived in MySQL 8.0.1; MariaDB 10.6 has it too.
MYSQL_FLOOR = (8, 0, 1)
# An expression default (the generated RetryAfter's UTC_TIMESTAMP) arrived in MySQL 8.0.13;
# MariaDB has had them since 10.2.
MYSQL_EXPRESSION_DEFAULTS = (8, 0, 13)
MARIADB_FLOOR = (10, 6, 0)
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)")

# GET_LOCK refuses longer names (and an empty one).
_LOCK_NAME_LIMIT = 64
# How long a limited claim waits for the table's limit lock (held only for another claim's
# statements; a dead holder's session ends and frees it) before it takes nothing this time.
LIMIT_WAIT_SECONDS = 10
# The advisory form's slot series under a limit: MySQL's default cte_max_recursion_depth.
_SLOT_SERIES_LIMIT = 1000

# A name may not end in ASCII whitespace (the server tests its last character); MariaDB reads a
# table name with this prefix as a raw file name.
_TRAILING = frozenset(" \t\n\v\f\r")
_MYSQL50 = "#mysql50#"


# Column types by DATA_TYPE. A time of any precision: the lease token is whole seconds
# (lease_expiry), and the session's time zone is UTC, so TIMESTAMP reads back what was written.
# BINARY(n) is left out of the bytes: it pads a payload with zero bytes.
_TIMES = frozenset({"datetime", "timestamp"})
_INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
_BYTES = frozenset({"varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
# MariaDB's JSON is LONGTEXT (with a JSON_VALID check); TINYTEXT and CHAR are too short.
_JSON_TYPES = frozenset({"json", "varchar", "text", "mediumtext", "longtext"})
_TYPES: dict[Retype, str] = {
    "time": "DATETIME(6)",
    "count": "INT",
    "bytes": "LONGBLOB",
    "json": "JSON",
}
# Defaults of the session's local time (MariaDB's catalog writes current_timestamp(6),
# MySQL's CURRENT_TIMESTAMP(6)).
_SESSION_NOW = re.compile(
    r"^(current_timestamp|now|localtime|localtimestamp|sysdate)\b", re.IGNORECASE
)

# UTC_TIMESTAMP is UTC whatever the session's time_zone (NOW() would follow it); it is read
# once per statement, so its three reads in the clock below agree.
_NOW = "UTC_TIMESTAMP(6)"
# The DDL's now: CURRENT_TIMESTAMP(6) would be the session's local time, and a row written
# from a session at +05:00 would fall due five hours late (at -05:00, early, ahead of rows
# already queued). An expression default, in the parentheses MySQL asks for (MySQL 8.0.13+;
# MariaDB takes them too).
UTC_DEFAULT = f"({_NOW})"

# Times are DATETIME(6), naive UTC: whole seconds would hold the lease token, the fractions
# keep retry_after and processed_at to the microsecond. Text in an index or a primary key is
# VARCHAR(191): 191 utf8mb4 characters fit every InnoDB row format's index key; it compares
# byte for byte (utf8mb4_bin), so that group names and ids differing in case stay apart.
_DDL = DdlRules(
    key="mysql",
    types={
        bool: "BOOLEAN",
        int: "BIGINT",
        float: "DOUBLE",
        Decimal: "DECIMAL(38, 10)",
        str: "TEXT",
        bytes: "LONGBLOB",
        datetime: "DATETIME(6)",
        date: "DATE",
        UUID: "CHAR(36)",
        dict: "JSON",
    },
    indexed_text="VARCHAR(191) COLLATE utf8mb4_bin",
    time="DATETIME(6)",
    count="INT",
    payload="LONGBLOB",
    generated_id="{type} AUTO_INCREMENT PRIMARY KEY",
    integer_id="BIGINT",
    partial_indexes=False,
    inline_index=True,
    table_options=" ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
)


# The expiry is rounded up to the next whole second: a DATETIME without fractions then stores
# the token exactly.
_FRACTION = f"MICROSECOND({_NOW})"
_CLOCK = ServerClock(
    now=_NOW,
    due=lambda d: f"({_NOW} + INTERVAL " + d + " MICROSECOND)",
    expiry=lambda s: (
        f"({_NOW} - INTERVAL {_FRACTION} MICROSECOND + INTERVAL ("
        + s
        + f" + ({_FRACTION} > 0)) SECOND)"
    ),
    age=f"TIMESTAMPDIFF(MICROSECOND, {{t}}, {_NOW}) / 1000000",
)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class MySqlDialect(Dialect):
    name: ClassVar[str] = "MySQL"
    style: ClassVar[ParamStyle] = "format"
    quote: ClassVar[str] = "`"
    identifier_limit: ClassVar[int | None] = 64
    forms: ClassVar[tuple[type[Form], ...]] = (RowLock, Lease, Advisory)
    isolations: ClassVar[tuple[type[Isolation], ...]] = (
        Default,
        ReadUncommitted,
        ReadCommitted,
        RepeatableRead,
        Serializable,
    )
    lease_claim_serial: ClassVar[bool] = True
    null_safe_equal: ClassVar[str] = "<=>"
    ddl_rules: ClassVar[DdlRules] = _DDL
    insert_if_absent: ClassVar[tuple[str, str]] = ("INSERT IGNORE INTO", "")
    server_clock: ClassVar[ServerClock] = _CLOCK
    version_query: ClassVar[str | None] = "SELECT VERSION()"
    time_rule: ClassVar[str] = (
        "on MySQL and MariaDB a DATETIME or TIMESTAMP (whole seconds hold the lease token; "
        "DATETIME(6) keeps the fractions of the other times)"
    )
    count_rule: ClassVar[str] = "on MySQL and MariaDB an integer type (TINYINT to BIGINT)"
    bytes_rule: ClassVar[str] = (
        "on MySQL and MariaDB a BLOB type or VARBINARY (BINARY pads it with zero bytes)"
    )
    json_rule: ClassVar[str] = (
        "on MySQL and MariaDB JSON or a text type (VARCHAR, TEXT, MEDIUMTEXT, LONGTEXT)"
    )
    missing_codes: ClassVar[dict[str, str]] = {
        "1146": "table",  # ER_NO_SUCH_TABLE
        "1049": "table",  # ER_BAD_DB_ERROR (the schema)
        "1054": "column",  # ER_BAD_FIELD_ERROR
    }

    def check_server(self, version: str) -> None:
        """MySQL 8.0.1+ or MariaDB 10.6+, read from ``SELECT VERSION()``."""
        found = _VERSION.match(version)
        mariadb = "mariadb" in version.lower()
        floor = MARIADB_FLOOR if mariadb else MYSQL_FLOOR
        required = ("MariaDB " if mariadb else "MySQL ") + ".".join(map(str, floor))
        if found is None or tuple(int(part) for part in found.groups()) < floor:
            msg = (
                f"trinbox needs MySQL 8.0.1+ or MariaDB 10.6+ (FOR UPDATE SKIP LOCKED), found "
                f"server version {version!r}; upgrade the server to {required} or later"
            )
            raise ServerTooOld(msg, server=version, required=required)

    def check_ddl_server(self, ddl: Sequence[str], version: str) -> None:
        """The generated RetryAfter's default is an expression, which MySQL takes from 8.0.13
        on (MariaDB from 10.2): an older MySQL is refused before a statement runs, not with
        the server's syntax error halfway."""
        found = _VERSION.match(version)
        if "mariadb" in version.lower() or found is None:
            return
        if tuple(int(part) for part in found.groups()) >= MYSQL_EXPRESSION_DEFAULTS:
            return
        if not any(UTC_DEFAULT in statement for statement in ddl):
            return
        required = "MySQL " + ".".join(map(str, MYSQL_EXPRESSION_DEFAULTS))
        msg = (
            f"create_tables writes a generated RetryAfter column with DEFAULT {UTC_DEFAULT} "
            f"(the due time in UTC, whatever the writing session's time zone), an expression "
            f"default MySQL takes from 8.0.13 on, found server version {version!r}; upgrade "
            f"the server to {required} or later, or declare RetryAfter() without "
            f"generated=True (the publish then writes the due time)"
        )
        raise ServerTooOld(msg, server=version, required=required)

    def check_characters(self, name: str, what: str, where: str) -> None:
        """Names of the Basic Multilingual Plane, not ending in whitespace; no table or
        schema name beginning with ``#mysql50#``."""
        beyond = next((ch for ch in name if ord(ch) > 0xFFFF), None)
        if beyond is not None:
            msg = (
                f"{where}: MySQL and MariaDB names hold characters up to U+FFFF only, found "
                f"{beyond!r} (U+{ord(beyond):X}) in the {what} {name!r}; use a name without it"
            )
            raise DeclarationError(msg)
        if name[-1:] in _TRAILING:
            msg = (
                f"{where}: MySQL and MariaDB names do not end in whitespace, found the {what} "
                f"{name!r}; drop the trailing {name[-1]!r}"
            )
            raise DeclarationError(msg)
        if "column" not in what and name.startswith(_MYSQL50):
            msg = (
                f"{where}: MariaDB reads a table or schema name beginning with {_MYSQL50!r} "
                f"as a file name, found the {what} {name!r}; use a name without that prefix"
            )
            raise DeclarationError(msg)

    def literal(self, text: str) -> str:
        # A backslash escapes in MySQL string literals (unless NO_BACKSLASH_ESCAPES).
        return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"

    def begin(self, spec: TableSpec) -> Statement:
        return self.render("begin", f"SET TRANSACTION ISOLATION LEVEL {_LEVELS[spec.isolation]}")

    def driver_value(self, value: object) -> object:
        # DATETIME(6) holds naive UTC; PyMySQL writes an aware datetime's wall clock as is.
        if isinstance(value, datetime) and value.tzinfo is not None:
            return value.astimezone(UTC).replace(tzinfo=None)
        return super().driver_value(value)

    @property
    def default_now(self) -> str:
        return UTC_DEFAULT

    # A deadlock on the unique index (gap locks under REPEATABLE READ), retried by a publish
    # on a connection of its own.
    unique_deadlocks: ClassVar[tuple[str, ...]] = ("1213",)

    def unique_held(self, spec: TableSpec) -> str | None:
        """``<key>_unfinished``: a stored generated column holding the key while the row
        holds it (NULL after), the unique index's column; within the 64 characters of a name
        (cut, with a hash of the whole) and clear of the declared columns."""
        if not self.unique_holds(spec):
            return None
        key = spec.unique
        assert key is not None
        suffix = "_unfinished"
        name = key.column + suffix
        limit = self.identifier_limit or 64
        if self.identifier_length(name) > limit:
            digest = hashlib.sha256(key.column.encode("utf-8")).hexdigest()[:8]
            head = key.column[: limit - len(suffix) - 9]
            name = f"{head}_{digest}{suffix}"
        return self.internal(spec, name)

    def unique_insert(self, spec: TableSpec) -> UniqueInsert:
        """A plain insert, which a held key fails with a duplicate key error (an error that
        leaves a transaction open on MySQL); the generated id read after it."""
        return UniqueInsert(
            self.insert(spec),
            self.unique_holder(spec),
            returns_id=False,
            last_id=self.render("last_id", "SELECT LAST_INSERT_ID()"),
        )

    def unique_insert_sql(self, spec: TableSpec) -> Frag:
        """``ON DUPLICATE KEY UPDATE id = id``: a held key changes nothing, and the driver
        reports 0 rows affected (1 with CLIENT_FOUND_ROWS, which counts matched rows)."""
        return self.insert_sql(spec) + self.unique_suffix(spec)

    def unique_suffix(self, spec: TableSpec) -> str:
        ident = self.column(spec.id)
        return f" ON DUPLICATE KEY UPDATE {ident} = {ident}"

    packet_limit_query: ClassVar[str | None] = "SELECT @@max_allowed_packet"

    def batch_insert(
        self, spec: TableSpec, *, keyed: bool, types: Mapping[str, str] | None = None
    ) -> BatchInsert:
        """A plain multi-row insert, which a held key fails with a duplicate key error (the
        broker writes only the rows whose keys it read free); no ``RETURNING``: the first
        generated id and ``auto_increment_increment``, the step between the ids of one
        insert (InnoDB reserves a multi-row insert's ids at once, in every lock mode)."""
        plain = super().batch_insert(spec, keyed=False)
        return BatchInsert(
            plain.head,
            plain.row,
            "",
            returns=False,
            last_id=self.render("last_id", "SELECT LAST_INSERT_ID(), @@auto_increment_increment"),
        )

    def insert_defaults(self, table: str) -> str:
        return f"INSERT INTO {table} () VALUES ()"

    def delete_first(
        self, table: str, where: Sql, order: str, limit: int, *, skip_locked: bool = False
    ) -> Sql:
        # MySQL takes no LIMIT in an IN subquery, and no subquery of the table it deletes
        # from; its DELETE takes ORDER BY and LIMIT itself, and no SKIP LOCKED.
        return f"DELETE FROM {table} WHERE " + where + f" ORDER BY {order} LIMIT {limit}"

    def prune_begin(self) -> Statement:
        """A retention delete runs at READ COMMITTED: InnoDB then keeps locks on the rows it
        deletes only, not on every row its scan passed (REPEATABLE READ's next-key locks,
        which would hold publishes and claims up)."""
        return self.render("begin", f"SET TRANSACTION ISOLATION LEVEL {_LEVELS[ReadCommitted]}")

    def key_column(self, column: str) -> str:
        return f"COALESCE(CAST({column} AS CHAR), '')"

    def lock_name(self, spec: TableSpec) -> str:
        """The ``GET_LOCK`` name of a row's key: ``database.key`` lower-cased database first,
        as is when 1 to 64 characters long, else its SHA-256 in hex (64 characters)."""
        database = "DATABASE()" if spec.schema is None else self.literal(spec.schema)
        parts = [f"LOWER({database})", "'.'"]
        for part in spec.key:
            if isinstance(part, KeyLiteral):
                parts.append(self.literal(part.text))
            else:
                assert isinstance(part, KeyColumn)
                parts.append(self.key_column(self.quoted(part.column)))
        name = f"CONCAT_WS('', {', '.join(parts)})"
        return (
            f"IF(CHAR_LENGTH({name}) BETWEEN 1 AND {_LOCK_NAME_LIMIT}, {name}, SHA2({name}, 256))"
        )

    def key_expression(self, spec: TableSpec) -> str:
        return self.lock_name(spec)

    def lease_claim_begin(self) -> Statement:
        """The lease claim runs at READ COMMITTED whatever the table declares."""
        return self.render("begin", f"SET TRANSACTION ISOLATION LEVEL {_LEVELS[ReadCommitted]}")

    def plain_begin(self) -> Statement:
        return self.render("begin", f"SET TRANSACTION ISOLATION LEVEL {_LEVELS[Default]}")

    # -- lease ------------------------------------------------------------------------------

    def lease_claim(
        self, spec: TableSpec, groups: GroupNames | None = None
    ) -> tuple[Statement, ...]:
        """Two statements of one READ COMMITTED transaction: the locking select of the first
        due rows, then per selected row the stamp (lease and attempt), conditioned on the
        lease being free still; a row the stamp did not change drops out of the claim."""
        t = self.table(spec)
        conds = [*self.claimable(spec, groups=groups), self.lease_free(spec)]
        select = self.render(
            "claim",
            f"SELECT {self.select_list(spec)}"
            + self.token_column(spec)
            + f" FROM {t}"
            + self.where(conds)
            + f" ORDER BY {self.order_by(spec)} LIMIT "
            + P("limit")
            + " FOR UPDATE SKIP LOCKED",
        )
        stamp = self.render(
            "stamp",
            f"UPDATE {t} SET "
            + self.lease_stamp(spec, lease=P("lease"))
            + f" WHERE {self.column(spec.id)} = "
            + P("id")
            + " AND "
            + self.lease_free(spec),
        )
        return (select, stamp)

    def limited_lease_claim(
        self,
        spec: TableSpec,
        limits: ClaimLimits,
        *,
        every_group: bool = False,
        skip: str | None = None,
    ) -> tuple[Statement, ...]:
        """As ``lease_claim``, the select a consistent read of the rows ``_limited.py`` chose
        (a locking read with SKIP LOCKED could skip live leases as it counts them): under
        ``limit_lock`` no other limited claim stamps meanwhile, and each stamp still takes
        its row only while its lease is free."""
        t = self.table(spec)
        ident = self.column(spec.id)
        select = self.render(
            "claim",
            "WITH "
            + limited_ids(self, spec, limits, every_group=every_group, skip=skip)
            + f" SELECT {self.select_list(spec)}"
            + self.token_column(spec)
            + f" FROM {t} WHERE {ident} IN (SELECT {ident} FROM {self.internal(spec, TAKE)})"
            + f" ORDER BY {self.order_by(spec)}",
        )
        return (select, self.lease_claim(spec)[1])

    def limited_row_lock_claim(self, spec: TableSpec, limits: ClaimLimits) -> tuple[Statement, ...]:
        """The slots each key took, named session locks taken with ``GET_LOCK(name, 0)``
        (and the queue's first, under a whole limit): ``_session_slots.py``."""
        return tuple(self.render("claim", sql) for sql in slot_take(self, spec, limits))

    def slot_rows(self, spec: TableSpec, limits: ClaimLimits) -> Statement | None:
        return self.render("claim", slot_rows(self, spec, limits))

    def slot_lock(self, spec: TableSpec) -> Statement | None:
        return self.render("claim", slot_lock(self, spec))

    def slot_release(self) -> Statement | None:
        return self.render("release", RELEASE)

    def epoch_us(self, time: Frag) -> Frag:
        return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + time + ")"

    def int_div(self, a: Frag, b: Frag) -> Frag:
        return "(" + a + ") DIV " + b

    def rate_key_text(self, column: str) -> str:
        """Past 190 characters, ``'h'`` and the key's SHA-256 (the key column holds 191)."""
        text = f"CAST({column} AS CHAR)"
        return (
            f"COALESCE(IF(CHAR_LENGTH({text}) > 190, CONCAT('h', SHA2({text}, 256)), "
            f"CONCAT('v', {text})), 'n')"
        )

    def rate_upsert(self, name: str, select: Frag, tat: Callable[[str], Frag]) -> Frag:
        return (
            f"INSERT INTO {name} (tbl, grp, rate_key, tat) "
            + select
            + " ON DUPLICATE KEY UPDATE tat = "
            + tat(f"{name}.tat")
        )

    def limited_advisory(
        self, spec: TableSpec, limits: ClaimLimits
    ) -> tuple[Statement, Statement | None, Statement | None]:
        """Slots as ``GET_LOCK(name, 0)`` session locks beside the key's
        (``_advisory_slots.py``). Their series are recursive CTEs, which MySQL bounds by
        ``cte_max_recursion_depth`` (1000 by default): a larger limit is refused."""
        top = max(n for n in (limits.per_key, limits.whole) if n is not None)
        if top > _SLOT_SERIES_LIMIT:
            msg = (
                f"{spec.label}: .limit() on an Inbox[Advisory] table tries its slots in "
                f"recursive CTEs, which MySQL stops past cte_max_recursion_depth (1000 by "
                f"default), found {limits.label}; pass a concurrency of at most "
                f"{_SLOT_SERIES_LIMIT}, or declare the table Inbox[Lease]"
            )
            raise UnsupportedForm(msg)
        return (
            self.render("candidates", mysql_candidates(self, spec, limits)),
            self.render("key_slots", mysql_key_slots(self, spec, limits)),
            self.render("unlock", mysql_unlock(self, spec, limits)),
        )

    def limit_name(self, spec: TableSpec) -> str:
        """The ``GET_LOCK`` name of a table's limited claims: ``database.trinbox_limit:table``,
        as is when at most 64 characters long, else its SHA-256 in hex."""
        database = "DATABASE()" if spec.schema is None else self.literal(spec.schema)
        name = (
            f"CONCAT_WS('', LOWER({database}), '.', {self.literal('trinbox_limit:' + spec.table)})"
        )
        return f"IF(CHAR_LENGTH({name}) <= {_LOCK_NAME_LIMIT}, {name}, SHA2({name}, 256))"

    def limit_lock(self, spec: TableSpec) -> Statement | None:
        """A session lock, waited for up to ``LIMIT_WAIT_SECONDS``: 1 once held, 0 when the
        wait ran out (the claim then takes nothing)."""
        return self.render(
            "lock",
            f"SELECT CAST(COALESCE(GET_LOCK({self.limit_name(spec)}, {LIMIT_WAIT_SECONDS}), 0) "
            "AS SIGNED)",
        )

    def limit_unlock(self, spec: TableSpec) -> Statement | None:
        return self.render(
            "unlock",
            f"SELECT CAST(COALESCE(RELEASE_LOCK({self.limit_name(spec)}), 0) AS SIGNED)",
        )

    def fifo_lease_claim(self, spec: TableSpec) -> tuple[Statement, ...]:
        """The lease claim of the head: the locking select, then the form's own stamp."""
        select = self.render("claim", self.lease_head_select(spec, self.token_column(spec)))
        return (select, self.lease_claim(spec)[1])

    def lease_extend(
        self, spec: TableSpec, count: int, *, progress: bool = False
    ) -> tuple[Statement, ...]:
        """No RETURNING, so two statements of one READ COMMITTED transaction: the locking
        select of the rows whose lease their token still holds (on the database clock with
        the new expiry, read from the server), then the update of those rows, locked since,
        to the new expiry (``lease``). One (id, token) pair of slots per row, ``id0``,
        ``token0``...: MySQL has no array to bind (PyMySQL writes the values into the text).
        ``progress``: the update also writes each row's ``progress0``..., NULL keeping the
        column as it is."""
        t = self.table(spec)
        ident = self.column(spec.id)
        locked = self.column(spec.locked_until)
        pairs = join(", ", ("(" + P(f"id{i}") + ", " + P(f"token{i}") + ")" for i in range(count)))
        held = f" WHERE ({ident}, {locked}) IN (" + pairs + ")"
        select = self.render(
            "extend",
            f"SELECT {ident}" + self.token_column(spec) + f" FROM {t}" + held + " FOR UPDATE",
        )
        sets: Frag = f"{locked} = " + P("lease")
        if progress:
            assert spec.progress is not None
            col = self.column(spec.progress)
            cases = join(
                " ",
                (
                    "WHEN " + P(f"id{i}") + " THEN COALESCE(" + P(f"progress{i}") + f", {col})"
                    for i in range(count)
                ),
            )
            sets = sets + f", {col} = CASE {ident} " + cases + f" ELSE {col} END"
        update = self.render("extend", f"UPDATE {t} SET " + sets + held)
        return (select, update)

    def fifo_guard(self, spec: TableSpec) -> Statement | None:
        """1 when this transaction could lock every unfinished row of the group (no other
        transaction holds one), 0 otherwise."""
        t = self.table(spec)
        where = self.where(self.fifo_unfinished(spec))
        guard = self.internal(spec, "__guard")
        return self.render(
            "guard",
            f"SELECT CAST((SELECT COUNT(*) FROM {t}"
            + where
            + f") = (SELECT COUNT(*) FROM (SELECT {self.column(spec.id)} FROM {t}"
            + where
            + f" FOR UPDATE SKIP LOCKED) AS {guard}) AS SIGNED)",
        )

    def check_fifo(self, spec: TableSpec) -> None:
        """A row lock FIFO table at SERIALIZABLE is refused. There a plain read locks what it
        reads, so the guard's count waits on the row another claim holds until it settles."""
        if spec.form is not RowLock or spec.isolation is not Serializable:
            return
        msg = (
            f"{spec.label}: a FIFO group's guard counts its rows without locking them, which "
            f"MySQL and MariaDB do not do at SERIALIZABLE, found a row lock FIFO table at "
            f"Serializable (the guard would wait for every delivery in work to settle); "
            f"declare Inbox[RowLock, ReadCommitted] (or leave the isolation level out), or use "
            f"Inbox[Lease]"
        )
        raise FifoAtSerializable(msg)

    def count_guard(self, *, unlock: bool) -> Statement:
        # Lock names are the server's: the database's name goes in; SHA2 keeps 64 characters.
        name = "SHA2(CONCAT_WS('.', DATABASE(), " + P("key") + "), 256)"
        if unlock:
            return self.render("unlock", "SELECT RELEASE_LOCK(" + name + ")")
        return self.render("lock", "SELECT GET_LOCK(" + name + f", {GUARD_WAIT_SECONDS})")

    # -- advisory ---------------------------------------------------------------------------

    def advisory_candidates(self, spec: TableSpec) -> Statement:
        """The first due rows in claim order whose lock name no session holds."""
        t = self.table(spec)
        name = self.lock_name(spec)
        lock = self.quoted(self.internal(spec, "__lock"))
        conds = [*self.claimable(spec), f"IS_USED_LOCK({name}) IS NULL"]
        return self.render(
            "candidates",
            f"SELECT {self.column(spec.id)}, {name} AS {lock} FROM {t}"
            + self.where(conds)
            + f" ORDER BY {self.order_by(spec)} LIMIT "
            + P("limit"),
        )

    def advisory_take(self, spec: TableSpec) -> tuple[Statement, ...]:
        """No RETURNING: count the attempt while the row is still claimable, then read the row
        with the attempt as it was. The update's row count says whether the row was taken
        (0: another holder settled it; unlock and go on)."""
        if spec.attempt is None:
            return super().advisory_take(spec)
        t = self.table(spec)
        ident = self.column(spec.id)
        attempt = self.column(spec.attempt)
        conds = [ident + " = " + P("id"), *self.claimable(spec)]
        return (
            self.render("take", f"UPDATE {t} SET {attempt} = {attempt} + 1" + self.where(conds)),
            self.render(
                "take",
                f"SELECT {self.select_list(spec, attempt_before=True)} FROM {t} "
                f"WHERE {ident} = " + P("id"),
            ),
        )

    def key_free(self, spec: TableSpec) -> Frag:
        # No lock taken: a claim that locks the key after this check takes the row only
        # while it is claimable (advisory_take), which the cancel's update has ended.
        return f"IS_USED_LOCK({self.lock_name(spec)}) IS NULL"

    def advisory_lock(self, spec: TableSpec) -> Statement | None:
        return self.render(
            "lock", "SELECT CAST(COALESCE(GET_LOCK(" + P("key") + ", 0), 0) AS SIGNED)"
        )

    def advisory_unlock(self, spec: TableSpec) -> Statement | None:
        return self.render(
            "unlock", "SELECT CAST(COALESCE(RELEASE_LOCK(" + P("key") + "), 0) AS SIGNED)"
        )

    # -- the catalog ------------------------------------------------------------------------

    def unique_index_query(self, spec: TableSpec) -> Statement:
        """The table's unique indexes on one column: the column and its generation
        expression (empty for a column that is not generated)."""
        database = "DATABASE()" if spec.schema is None else self.literal(spec.schema)
        return self.render(
            "unique_index",
            "SELECT s.COLUMN_NAME, c.GENERATION_EXPRESSION FROM information_schema.STATISTICS "
            "AS s JOIN information_schema.COLUMNS AS c ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND "
            "c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME "
            f"WHERE s.TABLE_SCHEMA = {database} AND s.TABLE_NAME = {self.literal(spec.table)} "
            "AND s.NON_UNIQUE = 0 AND NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS "
            "AS o WHERE o.TABLE_SCHEMA = s.TABLE_SCHEMA AND o.TABLE_NAME = s.TABLE_NAME AND "
            "o.INDEX_NAME = s.INDEX_NAME AND o.SEQ_IN_INDEX > 1)",
        )

    def columns_query(self, spec: TableSpec) -> Statement:
        """Each column of the table: its table's name as stored, name, column type, default,
        nullable, extra (AUTO_INCREMENT, ON UPDATE ...). The name compares
        as the catalog's collation does (without case, on most servers); ``read_columns``
        keeps the exact table when several match."""
        database = "DATABASE()" if spec.schema is None else self.literal(spec.schema)
        return self.render(
            "columns",
            "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, COLUMN_DEFAULT, "
            "IS_NULLABLE, EXTRA FROM information_schema.COLUMNS "
            f"WHERE TABLE_SCHEMA = {database} AND TABLE_NAME = {self.literal(spec.table)} "
            "ORDER BY ORDINAL_POSITION",
        )

    def read_columns(
        self, spec: TableSpec, records: Sequence[Sequence[object]]
    ) -> list[FoundColumn]:
        rows = [tuple(_text(v) if v is not None else None for v in r) for r in records]
        if any(r[0] == spec.table for r in rows):
            rows = [r for r in rows if r[0] == spec.table]
        found: list[FoundColumn] = []
        for _table, name, column_type, default, nullable, extra in rows:
            # MariaDB writes DEFAULT NULL as the text NULL (default_value reads it as none).
            extra = (extra or "").lower()
            found.append(
                FoundColumn(
                    name=str(name),
                    type=str(column_type),
                    default=default,
                    nullable=nullable == "YES",
                    generated="auto_increment" in extra,
                    updates_itself="on update" in extra,
                )
            )
        return found

    def _data_type(self, found: FoundColumn) -> str:
        return found.type.split("(")[0].split()[0].lower()

    def holds_time(self, found: FoundColumn) -> bool:
        return self._data_type(found) in _TIMES

    def holds_count(self, found: FoundColumn) -> bool:
        return self._data_type(found) in _INTEGERS

    def holds_bytes(self, found: FoundColumn) -> bool:
        return self._data_type(found) in _BYTES

    def holds_json(self, found: FoundColumn) -> bool:
        return self._data_type(found) in _JSON_TYPES

    def retype(self, spec: TableSpec, found: FoundColumn, to: Retype) -> str:
        null = "NULL" if found.nullable else "NOT NULL"
        new = _TYPES.get(to, found.type.upper())
        return (
            f"change its type: ALTER TABLE {self.table(spec)} MODIFY {self.quoted(found.name)} "
            f"{new} {null}"
        )

    def set_default(self, spec: TableSpec, found: FoundColumn) -> str:
        return (
            f"set it: ALTER TABLE {self.table(spec)} ALTER COLUMN {self.quoted(found.name)} "
            "SET DEFAULT 1"
        )

    def utc_default_fix(self, spec: TableSpec, found: FoundColumn) -> str | None:
        """A DATETIME defaulting to CURRENT_TIMESTAMP (or NOW(), LOCALTIMESTAMP...) holds the
        session's local time; a TIMESTAMP stores the instant, whatever the session's zone."""
        value = default_value(found.default)
        if self._data_type(found) != "datetime" or value is None:
            return None
        if not _SESSION_NOW.match(value):
            return None
        null = "NULL" if found.nullable else "NOT NULL"
        return (
            f"make it UTC: ALTER TABLE {self.table(spec)} MODIFY {self.quoted(found.name)} "
            f"{found.type.upper()} {null} DEFAULT {UTC_DEFAULT}"
        )

    def allow_null(self, spec: TableSpec, found: FoundColumn) -> str:
        return (
            f"allow NULL: ALTER TABLE {self.table(spec)} MODIFY {self.quoted(found.name)} "
            f"{found.type.upper()} NULL"
        )
