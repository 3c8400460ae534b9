"""The compiled description of a queue table, read by dialects, forms and the runtime.

Both ways of declaring a table, the ``Inbox`` class statement and the manual ``InboxSpec``
builder, end in :func:`compile_spec`, so they share every rule and every message.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from ..errors import DeclarationError
from ._markers import FORMS, ISOLATIONS, Advisory, Default, Form, Isolation, Lease, RowLock
from ._roles import ROLE_CLASSES, ROLE_NAMES

__all__ = [
    "ColumnSpec",
    "FieldDecl",
    "KeyColumn",
    "KeyLiteral",
    "KeyPart",
    "TableSpec",
    "check_form",
    "check_name",
    "compile_spec",
    "parse_key_template",
]


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """One column: the field that holds it, its name in the table, its role (``""`` for data)."""

    field: str
    column: str
    role: str = ""
    generated: bool = False
    python_type: object = None


@dataclass(frozen=True, slots=True)
class KeyLiteral:
    """Literal text of an advisory lock key."""

    text: str


@dataclass(frozen=True, slots=True)
class KeyColumn:
    """A column whose value the database renders into an advisory lock key."""

    column: str


KeyPart = KeyLiteral | KeyColumn


@dataclass(frozen=True, slots=True)
class FieldDecl:
    """A field as declared, before the rules are checked."""

    field: str
    column: str
    roles: tuple[str, ...] = ()
    generated: bool = False
    python_type: object = None
    fifo: bool = False  # Group(fifo=True)
    delayed_rows_move_behind: bool = False  # Group(fifo=True, delayed_rows_move_behind=True)
    window: timedelta | None = None  # Unique(window=...)


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A queue table: its name, claim form, isolation level and columns by role."""

    table: str
    schema: str | None
    form: type[Form]
    isolation: type[Isolation]
    columns: tuple[ColumnSpec, ...]
    key: tuple[KeyPart, ...] = ()
    key_template: str = ""
    row_type: type | None = field(default=None, compare=False)
    # Group(fifo=True): each group's rows are handled one at a time, in order: Priority,
    # then id; with delayed_rows_move_behind, Priority, then RetryAfter, then id.
    fifo: bool = False
    delayed_rows_move_behind: bool = False
    # Unique(window=...): the key holds the period of the row's due time too.
    unique_window: timedelta | None = None
    # Columns by role, looked up on every delivery.
    _by_role: dict[str, ColumnSpec] = field(init=False, repr=False, compare=False)
    _insert: tuple[ColumnSpec, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_role: dict[str, ColumnSpec] = {}
        for col in self.columns:
            if col.role:
                by_role.setdefault(col.role, col)
        object.__setattr__(self, "_by_role", by_role)
        # Read by every publish, once per row of a batch: made once.
        roles = [
            c
            for c in self.columns
            if c.role and not c.generated and c.role not in ("origin_group", "result")
        ]
        roles.sort(key=lambda c: ROLE_NAMES.index(c.role))
        data = (c for c in self.columns if not c.role and not c.generated)
        object.__setattr__(self, "_insert", (*roles, *data))

    def role(self, role: str) -> ColumnSpec | None:
        return self._by_role.get(role)

    @property
    def id(self) -> ColumnSpec:
        col = self.role("id")
        assert col is not None  # compile_spec guarantees it
        return col

    @property
    def group(self) -> ColumnSpec | None:
        return self.role("group")

    @property
    def origin_group(self) -> ColumnSpec | None:
        return self.role("origin_group")

    @property
    def priority(self) -> ColumnSpec | None:
        return self.role("priority")

    @property
    def retry_after(self) -> ColumnSpec | None:
        return self.role("retry_after")

    @property
    def attempt(self) -> ColumnSpec | None:
        return self.role("attempt")

    @property
    def locked_until(self) -> ColumnSpec | None:
        return self.role("locked_until")

    @property
    def processed_at(self) -> ColumnSpec | None:
        return self.role("processed_at")

    @property
    def dead_lettered_at(self) -> ColumnSpec | None:
        return self.role("dead_lettered_at")

    @property
    def progress(self) -> ColumnSpec | None:
        return self.role("progress")

    @property
    def payload(self) -> ColumnSpec | None:
        return self.role("payload")

    @property
    def headers(self) -> ColumnSpec | None:
        return self.role("headers")

    @property
    def unique(self) -> ColumnSpec | None:
        return self.role("unique")

    @property
    def result(self) -> ColumnSpec | None:
        return self.role("result")

    @property
    def data(self) -> tuple[ColumnSpec, ...]:
        return tuple(c for c in self.columns if not c.role)

    @property
    def insert_columns(self) -> tuple[ColumnSpec, ...]:
        """Every column the generated insert writes: roles first, then data columns. The
        OriginGroup is the dead letter step's to write, the Result the ack's: NULL before."""
        return self._insert

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table

    @property
    def label(self) -> str:
        """How errors name the table: ``jobs`` or ``app.jobs`` with the row class."""
        row = f" ({self.row_type.__qualname__})" if self.row_type is not None else ""
        return f"{self.qualified_name}{row}"


_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def check_name(where: str, what: str, text: str) -> None:
    """Refuse a name (or key literal) no database holds: one with a NUL character, or one
    that is not text (a lone surrogate has no UTF-8 encoding). ``what`` says which name it
    is in the message: ``table``, ``column of field 'id'``, ``lock key literal``..."""
    if "\x00" in text:
        msg = (
            f"{where}: a name or key literal holds no NUL character (no database takes one), "
            f"found one in the {what} {text!r}; remove it"
        )
        raise DeclarationError(msg)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        found = text[exc.start]
        msg = (
            f"{where}: a name or key literal is text that encodes as UTF-8, found the lone "
            f"surrogate {found!r} in the {what} {text!r}; write the character it stands for, "
            f"or remove it"
        )
        raise DeclarationError(msg) from None


def parse_key_template(
    template: str, columns_by_field: dict[str, str], where: str
) -> tuple[KeyPart, ...]:
    """Split ``"jobs-{tenant}"`` into literal text and key columns, checking every brace."""
    parts: list[KeyPart] = []
    pos = 0
    for match in _PLACEHOLDER.finditer(template):
        literal = template[pos : match.start()]
        _check_braces(literal, template, where)
        if literal:
            parts.append(KeyLiteral(literal))
        name = match.group(1).strip()
        if not name:
            msg = (
                f"{where}: a lock key placeholder names a field, found empty braces in "
                f"advisory_lock={template!r}; write the field's name inside them, like "
                f"'{{id}}'"
            )
            raise DeclarationError(msg)
        if name not in columns_by_field:
            known = ", ".join(sorted(columns_by_field)) or "none"
            msg = (
                f"{where}: a lock key placeholder names a field of the row, found "
                f"{{{name}}} in advisory_lock={template!r} and no field {name!r} "
                f"(fields: {known}); name one of them"
            )
            raise DeclarationError(msg)
        parts.append(KeyColumn(columns_by_field[name]))
        pos = match.end()
    tail = template[pos:]
    _check_braces(tail, template, where)
    if tail:
        parts.append(KeyLiteral(tail))
    return tuple(parts)


def _check_braces(literal: str, template: str, where: str) -> None:
    if "{" in literal:
        msg = (
            f"{where}: every '{{' of a lock key opens a placeholder closed by '}}', found an "
            f"unclosed '{{' in advisory_lock={template!r}; close it or remove it"
        )
        raise DeclarationError(msg)
    if "}" in literal:
        msg = (
            f"{where}: every '}}' of a lock key closes a placeholder, found a '}}' without "
            f"'{{' in advisory_lock={template!r}; remove it or open the placeholder"
        )
        raise DeclarationError(msg)


def compile_spec(
    *,
    where: str,
    table: str | None,
    schema: str | None,
    form: object,
    isolation: object,
    fields: Sequence[FieldDecl],
    advisory_lock: str | None,
    key: Sequence[KeyPart] | None = None,
    row_type: type | None = None,
) -> TableSpec:
    """Check a declaration against every rule and compile it, or raise ``DeclarationError``.

    The advisory key comes as the class statement's ``advisory_lock`` template, or as the
    manual builder's parts (``key``), whose literals may hold any text."""
    _check_table(where, table, schema)
    assert table is not None
    form_type = check_form(where, form)
    isolation_type = _check_isolation(where, isolation)
    columns = _check_fields(where, fields)
    fifo = any(decl.fifo for decl in fields)
    behind = any(decl.delayed_rows_move_behind for decl in fields)
    window = next((decl.window for decl in fields if decl.window is not None), None)
    spec = TableSpec(
        table=table,
        schema=schema,
        form=form_type,
        isolation=isolation_type,
        columns=columns,
        row_type=row_type,
        fifo=fifo,
        delayed_rows_move_behind=behind,
        unique_window=window,
    )
    _check_form_columns(where, spec, advisory_lock is not None or key is not None)
    _check_fifo_order(where, spec, fields)
    if advisory_lock is not None:
        by_field = {c.field: c.column for c in columns}
        parts = parse_key_template(advisory_lock, by_field, where)
        template = advisory_lock
    elif key is not None:
        parts = _check_key_parts(where, key, columns)
        by_column = {c.column: c.field for c in columns}
        template = "".join(
            p.text if isinstance(p, KeyLiteral) else "{" + by_column[p.column] + "}" for p in parts
        )
    else:
        return spec
    for part in parts:
        if isinstance(part, KeyLiteral):
            check_name(where, "lock key literal", part.text)
    return TableSpec(
        table=table,
        schema=schema,
        form=form_type,
        isolation=isolation_type,
        columns=columns,
        key=parts,
        key_template=template,
        row_type=row_type,
        fifo=fifo,
        delayed_rows_move_behind=behind,
        unique_window=window,
    )


def _check_key_parts(
    where: str, key: Sequence[KeyPart], columns: Sequence[ColumnSpec]
) -> tuple[KeyPart, ...]:
    names = [c.column for c in columns]
    for part in key:
        if isinstance(part, KeyColumn) and part.column not in names:
            msg = (
                f"{where}: an advisory key column is a column of the table, found "
                f"KeyColumn({part.column!r}) and no column {part.column!r} (columns: "
                f"{', '.join(names)}); name one of them"
            )
            raise DeclarationError(msg)
    return tuple(key)


def _check_table(where: str, table: str | None, schema: str | None) -> None:
    if table is None:
        msg = (
            f"{where}: a queue table names its table, found no table=; "
            f'add it to the class statement, like class Job(Inbox[Lease], table="jobs")'
        )
        raise DeclarationError(msg)
    if not table:
        msg = f"{where}: table= names the table, found {table!r}; give a non-empty name"
        raise DeclarationError(msg)
    if "." in table:
        head, _, tail = table.rpartition(".")
        msg = (
            f"{where}: table= holds the table's name alone, found a dot in {table!r}; "
            f"name the schema with schema=: table={tail!r}, schema={head!r}"
        )
        raise DeclarationError(msg)
    if schema is not None and not schema:
        msg = (
            f"{where}: schema= names the table's schema, found {schema!r}; give a non-empty "
            f"name or leave schema= out"
        )
        raise DeclarationError(msg)
    if schema is not None and "." in schema:
        msg = (
            f"{where}: schema= holds the schema's name alone, found a dot in {schema!r}; "
            f"name only the schema (a database name cannot be given)"
        )
        raise DeclarationError(msg)
    check_name(where, "table", table)
    if schema is not None:
        check_name(where, "schema", schema)


def check_form(where: str, form: object) -> type[Form]:
    if form in FORMS:
        assert isinstance(form, type)
        return form
    _refuse_union(where, "claim form", form, "Inbox[Lease]")
    msg = (
        f"{where}: the claim form is the type argument of Inbox, found {_name(form)}; "
        f"write Inbox[RowLock], Inbox[Lease] or Inbox[Advisory]"
    )
    raise DeclarationError(msg)


def _check_isolation(where: str, isolation: object) -> type[Isolation]:
    if isolation in ISOLATIONS:
        assert isinstance(isolation, type)
        return isolation
    _refuse_union(where, "isolation level", isolation, "Inbox[Lease, Serializable]")
    names = ", ".join(o.__name__ for o in ISOLATIONS)
    msg = (
        f"{where}: the second type argument of Inbox is an isolation level or SQLite mode, "
        f"found {_name(isolation)}; use one of {names}"
    )
    raise DeclarationError(msg)


def _check_fields(where: str, fields: Sequence[FieldDecl]) -> tuple[ColumnSpec, ...]:
    columns: list[ColumnSpec] = []
    role_owner: dict[str, str] = {}
    column_owner: dict[str, str] = {}
    for decl in fields:
        if len(decl.roles) > 1:
            names = [ROLE_CLASSES[r] for r in decl.roles]
            if len(set(names)) == 1:
                msg = (
                    f"{where}: a field takes its role once, found {names[0]}() "
                    f"{len(names)} times on {decl.field!r}; keep one"
                )
            else:
                msg = (
                    f"{where}: a field plays one role, found field {decl.field!r} with "
                    f"{' and '.join(names)}; keep one and give the other its own field"
                )
            raise DeclarationError(msg)
        role = decl.roles[0] if decl.roles else ""
        if not decl.column:
            msg = (
                f"{where}: a column rename names a column, found Column('') on "
                f"{decl.field!r}; give the column's name or drop Column(..)"
            )
            raise DeclarationError(msg)
        check_name(where, f"column of field {decl.field!r}", decl.column)
        if role and role in role_owner:
            msg = (
                f"{where}: each role is played by at most one field, found {ROLE_CLASSES[role]} "
                f"on both {role_owner[role]!r} and {decl.field!r}; keep it on one of them"
            )
            raise DeclarationError(msg)
        if decl.column in column_owner:
            msg = (
                f"{where}: each column is named once, found column {decl.column!r} for both "
                f"fields {column_owner[decl.column]!r} and {decl.field!r}; rename one of them "
                f"with Column(..)"
            )
            raise DeclarationError(msg)
        if role == "priority":
            _check_priority(where, decl)
        if role == "headers":
            _check_headers(where, decl)
        if role == "unique":
            _check_unique(where, decl)
        if role == "result" and decl.generated:
            msg = (
                f"{where}: a Result field is written by the ack (HandlerOutcome.ack(result)), "
                f"NULL until then, found Result(generated=True) on {decl.field!r}; drop "
                f"generated=True"
            )
            raise DeclarationError(msg)
        if role == "origin_group" and decl.generated:
            msg = (
                f"{where}: an OriginGroup field is written by the move into a dead letter "
                f"group (NULL until then), found OriginGroup(generated=True) on "
                f"{decl.field!r}; drop generated=True"
            )
            raise DeclarationError(msg)
        if role:
            role_owner[role] = decl.field
        column_owner[decl.column] = decl.field
        columns.append(
            ColumnSpec(
                field=decl.field,
                column=decl.column,
                role=role,
                generated=decl.generated,
                python_type=decl.python_type,
            )
        )
    if "id" not in role_owner:
        msg = (
            f"{where}: a queue table has exactly one id field, found none; mark it, like "
            f"id: Annotated[int, Id(generated=True)]"
        )
        raise DeclarationError(msg)
    return tuple(columns)


def _check_fifo_order(where: str, spec: TableSpec, fields: Sequence[FieldDecl]) -> None:
    """``delayed_rows_move_behind`` orders a FIFO group by its due time: it needs both."""
    if not spec.delayed_rows_move_behind:
        return
    field = next(decl.field for decl in fields if decl.delayed_rows_move_behind)
    if not spec.fifo:
        msg = (
            f"{where}: delayed_rows_move_behind orders the rows of a FIFO group, found "
            f"Group(delayed_rows_move_behind=True) on {field!r} without fifo=True; declare "
            f"Group(fifo=True, delayed_rows_move_behind=True), or drop it"
        )
        raise DeclarationError(msg)
    if spec.retry_after is None:
        msg = (
            f"{where}: delayed_rows_move_behind orders a FIFO group by each row's due time, "
            f"its RetryAfter field, found none; add one, like retry_after: "
            f"Annotated[datetime, RetryAfter()], or drop delayed_rows_move_behind=True"
        )
        raise DeclarationError(msg)


def _check_priority(where: str, decl: FieldDecl) -> None:
    """A priority is a plain int the publish writes (0 when left out): NULL would sort first on
    MySQL and SQLite and last on PostgreSQL, and no database default is needed."""
    hint = decl.python_type
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    if hint is not int:
        found = hint.__qualname__ if isinstance(hint, type) else repr(hint).replace("typing.", "")
        msg = (
            f"{where}: a Priority field is an int (the claim takes smaller first; a publish "
            f"that leaves it out writes 0), found {decl.field!r} of type {found}; declare "
            f"{decl.field}: Annotated[int, Priority()]"
        )
        raise DeclarationError(msg)
    if decl.generated:
        msg = (
            f"{where}: a Priority field is written by the publish (0 when left out), found "
            f"Priority(generated=True) on {decl.field!r}; drop generated=True"
        )
        raise DeclarationError(msg)


def _check_headers(where: str, decl: FieldDecl) -> None:
    """Headers are names and values of text, one JSON object, written by the publish alone:
    a row built in Python gives them as a ``dict[str, str]``, and NULL holds none."""
    hint = decl.python_type
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) is not dict or typing.get_args(hint) != (str, str):
        found = hint.__qualname__ if isinstance(hint, type) else repr(hint).replace("typing.", "")
        msg = (
            f"{where}: a Headers field holds names and values of text, found {decl.field!r} "
            f"of type {found}; declare {decl.field}: Annotated[dict[str, str], Headers()]"
        )
        raise DeclarationError(msg)
    if decl.generated:
        msg = (
            f"{where}: a Headers field is written by the publish (publish(..., headers=...)), "
            f"found Headers(generated=True) on {decl.field!r}; drop generated=True"
        )
        raise DeclarationError(msg)


def _check_unique(where: str, decl: FieldDecl) -> None:
    """A dedup key is text that may be NULL (a row published without one dedups nothing),
    written by the publish alone (``unique=``); a window is a whole number of seconds."""
    hint = decl.python_type
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    members = typing.get_args(hint)
    optional_str = typing.get_origin(hint) in (typing.Union, types.UnionType) and set(members) == {
        str,
        type(None),
    }
    if not optional_str:
        found = hint.__qualname__ if isinstance(hint, type) else repr(hint).replace("typing.", "")
        msg = (
            f"{where}: a Unique field holds a dedup key of text, NULL for a row that dedups "
            f"nothing, found {decl.field!r} of type {found}; declare {decl.field}: "
            f"Annotated[str | None, Unique()] = None"
        )
        raise DeclarationError(msg)
    if decl.generated:
        msg = (
            f"{where}: a Unique field is written by the publish (publish(..., unique=...)), "
            f"found Unique(generated=True) on {decl.field!r}; drop generated=True"
        )
        raise DeclarationError(msg)
    window = decl.window
    if window is None:
        return
    if not isinstance(window, timedelta):  # pyright: ignore[reportUnnecessaryIsInstance]
        msg = (
            f"{where}: a Unique window is a timedelta, found {type(window).__name__} "
            f"{window!r} on {decl.field!r}; write Unique(window=timedelta(hours=1))"
        )
        raise DeclarationError(msg)
    if window <= timedelta(0) or window % timedelta(seconds=1):
        msg = (
            f"{where}: a Unique window is a positive whole number of seconds (each key is "
            f"held once per period of that length), found {window} on {decl.field!r}; "
            f"write Unique(window=timedelta(seconds=...)) with whole seconds"
        )
        raise DeclarationError(msg)


def _check_form_columns(where: str, spec: TableSpec, has_key: bool) -> None:
    form = spec.form
    result = spec.result
    if result is not None and spec.processed_at is None:
        msg = (
            f"{where}: a Result field is read after the row's ack, so the row is kept, found "
            f"Result on {result.field!r} of a table without a ProcessedAt field (an ack "
            f"deletes its row there); add one, like processed_at: Annotated[datetime | None, "
            f"ProcessedAt()]"
        )
        raise DeclarationError(msg)
    origin = spec.origin_group
    if origin is not None and spec.group is None:
        msg = (
            f"{where}: an OriginGroup field keeps the group a dead letter came from, found "
            f"OriginGroup on {origin.field!r} of a table without a Group field (its dead "
            f"letters move to a table, which keeps every column); add a Group field or drop "
            f"the OriginGroup field"
        )
        raise DeclarationError(msg)
    has_lease = spec.locked_until is not None
    if form is Lease and not has_lease:
        msg = (
            f"{where}: the lease form writes its expiry into a LockedUntil field, found none; "
            f"add one, like locked_until: Annotated[datetime | None, LockedUntil()]"
        )
        raise DeclarationError(msg)
    if form is Lease and has_key:
        msg = (
            f"{where}: advisory_lock= selects the advisory form, found it on an Inbox[Lease] "
            f"table; drop advisory_lock= or declare Inbox[Advisory]"
        )
        raise DeclarationError(msg)
    if spec.fifo and form is Advisory:
        group = spec.group.field if spec.group is not None else "group"
        msg = (
            f"{where}: a FIFO group is served by the row lock and lease forms, found "
            f"Group(fifo=True) on {group!r} beside the advisory key of an Inbox[Advisory] "
            f"table (the advisory form orders rows through its key); use a key on the group "
            f"column instead: drop fifo=True and put {{{group}}} in advisory_lock="
        )
        raise DeclarationError(msg)
    if form is Advisory:
        if not has_key:
            msg = (
                f"{where}: the advisory form holds each row by a lock on its key, found no "
                f'advisory_lock=; add one, like advisory_lock="{spec.table}-{{id}}"'
            )
            raise DeclarationError(msg)
        if has_lease:
            msg = (
                f"{where}: the advisory form holds rows by their key, not a lease, found a "
                f"LockedUntil field on an Inbox[Advisory] table; drop the LockedUntil field "
                f"(to order a group, put the group's field in the key)"
            )
            raise DeclarationError(msg)
    if form is RowLock:
        if has_lease:
            msg = (
                f"{where}: a LockedUntil field selects the lease form, found one on an "
                f"Inbox[RowLock] table; declare Inbox[Lease] or drop the field"
            )
            raise DeclarationError(msg)
        if has_key:
            msg = (
                f"{where}: advisory_lock= selects the advisory form, found it on an "
                f"Inbox[RowLock] table; declare Inbox[Advisory] or drop advisory_lock="
            )
            raise DeclarationError(msg)


def _refuse_union(where: str, what: str, found: object, example: str) -> None:
    """A union type argument (``Inbox[Lease | Advisory]``) names no single form or isolation
    level."""
    members = typing.get_args(found)
    if typing.get_origin(found) not in (typing.Union, types.UnionType) or not members:
        return
    names = " | ".join(_name(member) for member in members)
    msg = (
        f"{where}: a table has one {what}, found the union {names} as a type argument of "
        f"Inbox; name one, like {example} (declare a row class per {what})"
    )
    raise DeclarationError(msg)


def _name(obj: object) -> str:
    if obj is Default:
        return "Default"
    if isinstance(obj, type):
        return obj.__qualname__
    return repr(obj)


def unknown_keywords(where: str, given: Iterable[str], accepted: Sequence[str]) -> None:
    extra = sorted(set(given) - set(accepted))
    if extra:
        takes = ", ".join(f"{name}=" for name in accepted)
        found = ", ".join(f"{name}=" for name in extra)
        msg = (
            f"{where}: the class statement takes the keywords {takes}, found {found}; "
            f"remove or correct {'it' if len(extra) == 1 else 'them'}"
        )
        raise DeclarationError(msg)
