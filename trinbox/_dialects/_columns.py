"""What a table's role columns must hold, read from the catalog at startup (pure: the runtime
runs the dialect's catalog query, the dialect reads its answer into :class:`FoundColumn` and
:func:`column_refusal` judges it).

A prepared statement proves the names; the catalog proves the types. What each role needs:

* ``LockedUntil``, ``RetryAfter``, ``ProcessedAt``: a time the claim compares and writes as
  trinbox binds it (PostgreSQL ``timestamp with time zone``; MySQL/MariaDB ``DATETIME`` or
  ``TIMESTAMP`` of any precision, the lease token being whole seconds; SQLite any declared type,
  see ``sqlite.py``). ``LockedUntil`` and ``ProcessedAt`` are NULL while a row is free or
  unfinished, so they take NULL; none of them rewrites itself (MySQL ``ON UPDATE``).
* ``Attempt``: an integer with ``DEFAULT 1`` (a row's first delivery is attempt 1): any other
  default is refused, and no default at all where the publish leaves the column to the
  database (``Attempt(generated=True)``).
* ``Priority``: an integer (the publish writes it, 0 when left out: any default will do).
* ``Progress``: NULL until a handler reports, so it takes NULL (its type is not judged: any
  column that holds a fraction will do).
* ``OriginGroup``: NULL until the row moves into a dead letter group, so it takes NULL.
* ``Payload``: bytes (PostgreSQL ``bytea``, MySQL/MariaDB a BLOB or VARBINARY).
* ``Headers``: JSON text (PostgreSQL ``jsonb``, ``json`` or ``text``; MySQL ``JSON`` or a text
  type, MariaDB's ``JSON`` being ``LONGTEXT``; SQLite any declared type), taking NULL (a
  publish without headers writes NULL).
* A generated ``Id`` read as ``int``: an integer the database fills.

A column the catalog does not list (the prepare found it, so the read missed it, for want of a
privilege or by a name's case) is not judged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from .._declare._roles import ROLE_CLASSES
from .._declare._spec import ColumnSpec, TableSpec
from ._statement import Statement

__all__ = [
    "ColumnRules",
    "FoundColumn",
    "Retype",
    "column_refusal",
    "column_warnings",
    "default_value",
]

TIME_ROLES = ("locked_until", "retry_after", "processed_at", "dead_lettered_at")

# What the NULL of a cleared column means, by role.
_NULL_MEANS = {
    "locked_until": "NULL while the row is free (a release and a settlement write NULL)",
    "processed_at": "NULL until the row is finished (the publish writes NULL)",
    "dead_lettered_at": "NULL while the row is not a dead letter (the publish writes NULL)",
}


@dataclass(frozen=True, slots=True)
class FoundColumn:
    """A column as the catalog describes it."""

    name: str
    type: str  # in the catalog's own words, for messages: "date", "datetime(6)", "INT"
    default: str | None  # the default's text; None for none (DEFAULT NULL included)
    nullable: bool
    generated: bool = False  # filled by the database (identity, AUTO_INCREMENT, rowid)
    updates_itself: bool = False  # MySQL ON UPDATE CURRENT_TIMESTAMP
    strict: bool = False  # SQLite: the table is STRICT, its declared types hold


Retype = Literal["time", "count", "bytes", "json", "same"]
"""What a fix changes a column's type to: a time, a count, bytes, JSON text, or its own type
again (to drop an attribute such as ON UPDATE)."""


class ColumnRules:
    """What a dialect says about column types: the catalog query, how to read it, which types
    hold each kind of value, and the fixes (a dialect class overrides them all)."""

    # Whether the server compares column names without case (MySQL, SQLite).
    folds_column_names: ClassVar[bool] = True
    # What a time, a count, bytes and JSON text are on this dialect, for messages.
    time_rule: ClassVar[str] = ""
    count_rule: ClassVar[str] = ""
    bytes_rule: ClassVar[str] = ""
    json_rule: ClassVar[str] = ""
    # SQLSTATE or error number of a missing table (or schema) and of a missing column.
    missing_codes: ClassVar[dict[str, str]] = {}

    def columns_query(self, spec: TableSpec) -> Statement:
        """The catalog read of the table's columns (no parameters)."""
        raise NotImplementedError

    def read_columns(
        self, spec: TableSpec, records: Sequence[Sequence[object]]
    ) -> list[FoundColumn]:
        raise NotImplementedError

    def check_columns(self, spec: TableSpec, found: Sequence[FoundColumn]) -> str | None:
        return column_refusal(self, spec, found)

    def holds_time(self, found: FoundColumn) -> bool:
        raise NotImplementedError

    def holds_count(self, found: FoundColumn) -> bool:
        raise NotImplementedError

    def holds_bytes(self, found: FoundColumn) -> bool:
        raise NotImplementedError

    def holds_json(self, found: FoundColumn) -> bool:
        raise NotImplementedError

    def retype(self, spec: TableSpec, found: FoundColumn, to: Retype) -> str:
        """The fix that gives ``found`` the type of ``to``."""
        raise NotImplementedError

    def set_default(self, spec: TableSpec, found: FoundColumn) -> str:
        """The fix that gives the attempt column DEFAULT 1."""
        raise NotImplementedError

    def allow_null(self, spec: TableSpec, found: FoundColumn) -> str:
        raise NotImplementedError

    def utc_default_fix(self, spec: TableSpec, found: FoundColumn) -> str | None:
        """The fix of a time column whose default the server fills in the writing session's
        time zone (MySQL's CURRENT_TIMESTAMP into a DATETIME), or ``None`` for a default in
        UTC or none."""
        return None

    def generated_id_refusal(
        self, spec: TableSpec, col: ColumnSpec, found: FoundColumn, head: str
    ) -> str | None:
        """Why a generated id column cannot be one, or ``None``: one read as an int is an
        integer."""
        if col.python_type is not int or self.holds_count(found):
            return None
        return (
            f"{head} is generated by the database and read as an int, {self.count_rule}, "
            f"found column {found.name!r} of type {found.type}; {self.retype(spec, found, 'count')}"
        )

    def missing(self, code: str | None, message: str) -> str | None:
        """What a prepare failure says is missing: ``"table"``, ``"column"`` or ``None``."""
        return self.missing_codes.get(code or "")


_CAST = re.compile(r"::[a-z_ ]+(\[\])?$", re.IGNORECASE)


def default_value(text: str | None) -> str | None:
    """A default as its value's text: casts, parentheses and quotes taken off; ``None`` for no
    default and for ``DEFAULT NULL`` (``NULL::integer`` on PostgreSQL, ``NULL`` on MariaDB)."""
    if text is None:
        return None
    found = text.strip()
    while True:
        before = found
        found = _CAST.sub("", found).strip()
        if len(found) >= 2 and found[0] == "(" and found[-1] == ")":
            found = found[1:-1].strip()
        if len(found) >= 2 and found[0] == found[-1] == "'":
            found = found[1:-1].replace("''", "'")
        if found == before:
            break
    return None if found.upper() == "NULL" else found


def _is_one(value: str) -> bool:
    try:
        return int(value) == 1
    except ValueError:
        return False


def _lookup(found: Sequence[FoundColumn], column: str, fold: bool) -> FoundColumn | None:
    exact = next((f for f in found if f.name == column), None)
    if exact is not None or not fold:
        return exact
    return next((f for f in found if f.name.casefold() == column.casefold()), None)


def column_refusal(
    dialect: ColumnRules, spec: TableSpec, found: Sequence[FoundColumn]
) -> str | None:
    """Why the first role column of ``spec`` that cannot play its role cannot (the rule, what
    was found and the fix, without the subscription's name), or ``None`` when all can."""
    for col in spec.columns:
        have = _lookup(found, col.column, dialect.folds_column_names)
        if have is not None:
            problem = _refusal(dialect, spec, col, have)
            if problem is not None:
                return problem
    return None


def column_warnings(
    dialect: ColumnRules, spec: TableSpec, found: Sequence[FoundColumn]
) -> list[str]:
    """What the startup check reports without refusing (a table that serves trinbox's own
    writes as it is): a RetryAfter column whose default is the writing session's local time
    (trinbox's sessions run in UTC; another writer's rows relying on it fall due early or
    late, and in a FIFO or priority table jump ahead of rows already queued)."""
    due = spec.retry_after
    have = None if due is None else _lookup(found, due.column, dialect.folds_column_names)
    fix = None if have is None else dialect.utc_default_fix(spec, have)
    if have is None or fix is None:
        return []
    return [
        f"the RetryAfter column of {spec.label} is due at UTC times, found column "
        f"{have.name!r} of type {have.type} with DEFAULT {have.default}, which the server "
        f"fills in the writing session's time zone: a row inserted relying on it from a "
        f"session not at +00:00 falls due that many hours early or late (trinbox's own "
        f"sessions run at +00:00); {fix}"
    ]


def _refusal(d: ColumnRules, spec: TableSpec, col: ColumnSpec, have: FoundColumn) -> str | None:
    role = col.role
    if not role:
        return None
    head = f"the {ROLE_CLASSES[role]} column of {spec.label}"
    found = f"found column {have.name!r} of type {have.type}"
    if role in TIME_ROLES:
        if not d.holds_time(have):
            return f"{head} holds a time, {d.time_rule}, {found}; {d.retype(spec, have, 'time')}"
        if have.updates_itself:
            return (
                f"{head} is written by trinbox alone, found column {have.name!r} ON UPDATE "
                f"CURRENT_TIMESTAMP (every change to the row would rewrite it); "
                f"{d.retype(spec, have, 'same')}"
            )
        if role in _NULL_MEANS and not have.nullable:
            return (
                f"{head} is {_NULL_MEANS[role]}, found column {have.name!r} NOT NULL; "
                f"{d.allow_null(spec, have)}"
            )
        return None
    if role == "attempt":
        if not d.holds_count(have):
            return (
                f"{head} counts deliveries, {d.count_rule}, {found}; "
                f"{d.retype(spec, have, 'count')}"
            )
        return _attempt_default(d, spec, col, have, head)
    if role == "priority" and not d.holds_count(have):
        return (
            f"{head} orders the claim by an integer, {d.count_rule}, {found}; "
            f"{d.retype(spec, have, 'count')}"
        )
    if role == "origin_group" and not have.nullable:
        return (
            f"{head} is NULL until the row moves into a dead letter group (the publish "
            f"leaves it out, a redrive writes NULL), found column {have.name!r} NOT NULL; "
            f"{d.allow_null(spec, have)}"
        )
    if role == "progress" and not have.nullable:
        return (
            f"{head} is NULL until the row's handler reports its progress (the publish "
            f"leaves it out, a redrive writes NULL), found column {have.name!r} NOT NULL; "
            f"{d.allow_null(spec, have)}"
        )
    if role == "headers":
        if not d.holds_json(have):
            return (
                f"{head} holds the headers as one JSON object, {d.json_rule}, {found}; "
                f"{d.retype(spec, have, 'json')}"
            )
        if not have.nullable:
            return (
                f"{head} is NULL for a row published without headers, found column "
                f"{have.name!r} NOT NULL; {d.allow_null(spec, have)}"
            )
        return None
    if role == "result":
        if not d.holds_json(have):
            return (
                f"{head} holds the handler's result as JSON, {d.json_rule}, {found}; "
                f"{d.retype(spec, have, 'json')}"
            )
        if not have.nullable:
            return (
                f"{head} is NULL until the row's ack writes it, found column {have.name!r} "
                f"NOT NULL; {d.allow_null(spec, have)}"
            )
        return None
    if role == "payload" and not d.holds_bytes(have):
        return (
            f"{head} holds the message's bytes, {d.bytes_rule}, {found}; "
            f"{d.retype(spec, have, 'bytes')}"
        )
    if role == "id" and col.generated:
        return d.generated_id_refusal(spec, col, have, head)
    return None


def _attempt_default(
    d: ColumnRules, spec: TableSpec, col: ColumnSpec, have: FoundColumn, head: str
) -> str | None:
    value = default_value(have.default)
    rule = f"{head} counts a row's first delivery as attempt 1, so a row inserted without it"
    if value is not None and not _is_one(value):
        return (
            f"{rule} takes DEFAULT 1, found column {have.name!r} with DEFAULT {value} "
            f"(max_attempts would count from {value}); {d.set_default(spec, have)}"
        )
    if value is None and col.generated:
        return (
            f"{rule} takes DEFAULT 1, found column {have.name!r} with no default, and "
            f"Attempt(generated=True) leaves it to the database at publish; "
            f"{d.set_default(spec, have)}"
        )
    return None
