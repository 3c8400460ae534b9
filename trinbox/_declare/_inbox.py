"""The ``Inbox`` base class: a row class statement declares a queue table.

    class Job(Inbox[Lease], table="jobs"):
        id: Annotated[int, Id(generated=True)]
        locked_until: Annotated[datetime | None, LockedUntil()]
        payload: Annotated[bytes, Payload()]

The class statement checks the declaration (``compile_spec``) and turns the class into a
keyword-only dataclass; the compiled ``TableSpec`` is kept on ``__inbox_spec__``.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import TYPE_CHECKING, Any, ClassVar, Generic, cast, get_args, get_origin

from typing_extensions import TypeVar, dataclass_transform

from ..errors import DeclarationError
from ._manual import InboxSpec
from ._markers import (
    Advisory,
    Default,
    Deferred,
    Exclusive,
    Immediate,
    Lease,
    ReadCommitted,
    ReadUncommitted,
    RepeatableRead,
    RowLock,
    Serializable,
)
from ._roles import ROLE_CLASSES, Column, Group, Role, Unique
from ._spec import FieldDecl, TableSpec, check_form, compile_spec, unknown_keywords

__all__ = [
    "GENERATED",
    "Inbox",
    "declared_roles",
    "row_fields",
    "row_headers",
    "row_unique",
    "spec_of",
]

# Constrained: a table has one claim form and one isolation level, so ``Inbox[Lease | Advisory]``
# and
# ``Inbox[Lease, Default | Serializable]`` are type errors under mypy and pyright (and a
# DeclarationError at runtime). Signatures that take rows of several forms (a dialect's) name
# them by the protocol ``RowOf`` (_capabilities.py), whose parameters are bounds. O's default is
# the spelling users write: ``Inbox[Lease]``.
F = TypeVar("F", RowLock, Lease, Advisory, covariant=True)
O = TypeVar(  # noqa: E741
    "O",
    Default,
    ReadUncommitted,
    ReadCommitted,
    RepeatableRead,
    Serializable,
    Deferred,
    Immediate,
    Exclusive,
    covariant=True,
    default=Default,
)

_KEYWORDS = ("table", "schema", "advisory_lock", "spec")


@dataclass_transform(kw_only_default=True)
class Inbox(Generic[F, O]):
    """Base of a queue table's row class; the type arguments are its claim form and isolation level.

    ``Inbox[RowLock]`` claims with FOR UPDATE SKIP LOCKED held for the handler,
    ``Inbox[Lease]`` writes a lease expiry (needs a ``LockedUntil`` field), ``Inbox[Advisory]``
    holds each row by a lock on its key (needs ``advisory_lock=``). The second argument, an
    isolation level (``Serializable``...) or SQLite mode (``Immediate``...), is the isolation level
    of the transactions trinbox starts for the table; ``Default`` when left out.
    """

    if TYPE_CHECKING:
        # Declared for type checkers only: at runtime Inbox has no annotations, so
        # typing.get_type_hints over a row class never evaluates them (trinbox/__init__ sets
        # Inbox.__module__ to "trinbox", where TableSpec does not resolve).
        __inbox_spec__: ClassVar[TableSpec]

        # What _capabilities.RowOf reads: a row's form and isolation level, for the dialects' mounts
        # and publishing.
        def __trinbox_form__(self) -> tuple[F, O]: ...

        # Type checkers check a class statement's keywords against this signature (a misspelt
        # or mistyped keyword fails there); at runtime every keyword reaches _declare, which
        # refuses an unknown one with a message naming the keywords it takes.
        def __init_subclass__(
            cls,
            *,
            table: str | None = None,
            schema: str | None = None,
            advisory_lock: str | None = None,
            spec: InboxSpec[Any] | None = None,
        ) -> None: ...

    else:

        def __init_subclass__(cls, **keywords):
            if cls.__dict__.get("__trinbox_base__"):
                return  # a base of row classes (Outbox), declared by its subclasses
            _declare(cls, keywords)


def _declare(cls: type[Inbox[Any, Any]], keywords: dict[str, object]) -> None:
    where = f"class {cls.__qualname__}"
    unknown_keywords(where, keywords, _KEYWORDS)
    _check_keyword_types(where, keywords)
    form, isolation = _type_arguments(cls, where)
    manual = keywords.get("spec")
    if manual is not None:
        spec = _compile_manual(cls, where, manual, form, isolation, keywords)
    else:
        spec = compile_spec(
            where=where,
            table=cast("str | None", keywords.get("table")),
            schema=cast("str | None", keywords.get("schema")),
            form=form,
            isolation=isolation,
            fields=_field_decls(cls, where),
            advisory_lock=cast("str | None", keywords.get("advisory_lock")),
            row_type=cls,
        )
    cls.__inbox_spec__ = spec
    _default_generated(cls, spec)
    dataclasses.dataclass(kw_only=True)(cls)


class _Unfilled:
    """The value of a generated field that the database has not filled yet (one instance)."""

    def __init__(self) -> None:
        # Presents itself as what users import (trinbox/__init__ names exports the same way).
        self.__qualname__ = "GENERATED"

    def __repr__(self) -> str:
        return "trinbox.GENERATED"

    def __reduce__(self) -> str:
        return self.__qualname__


GENERATED: Any = _Unfilled()
"""The default of a generated field, for the type checker: ``id: Annotated[int,
Id(generated=True)] = GENERATED`` makes ``id`` optional in the row's constructor under mypy,
which reads no ``Annotated`` metadata. At runtime every generated field without a default gets
this one: a row built in Python holds ``GENERATED`` until the database fills the column (the
insert leaves generated columns out)."""


def _default_generated(cls: type, spec: TableSpec) -> None:
    """Give the class's own generated fields a default, so a row is built without them."""
    own = inspect.get_annotations(cls)
    for col in spec.columns:
        if col.generated and col.field in own and col.field not in cls.__dict__:
            setattr(cls, col.field, GENERATED)


def _check_keyword_types(where: str, keywords: dict[str, object]) -> None:
    for name in ("table", "schema", "advisory_lock"):
        value = keywords.get(name)
        if value is not None and not isinstance(value, str):
            example = {"advisory_lock": "'job-{id}'"}.get(name, "'jobs'")
            msg = (
                f"{where}: {name}= takes a string, found {type(value).__name__} {value!r}; "
                f"write {name}={example}"
            )
            raise DeclarationError(msg)


def spec_of(row_type: type[Any]) -> TableSpec:
    """The compiled table of a row class, or ``DeclarationError`` for anything else."""
    spec = getattr(row_type, "__inbox_spec__", None)
    if not isinstance(spec, TableSpec):
        msg = (
            f"a queue is declared by a subclass of Inbox, found {row_type!r}; declare "
            f"class Row(Inbox[Lease], table=...)"
        )
        raise DeclarationError(msg)
    return spec


def row_fields(row: Inbox[Any, Any], *, delay: bool = False) -> dict[str, object]:
    """The writable fields of a row instance by name, for ``publish_row``: generated fields
    are the database's, a delay replaces the row's ``RetryAfter`` value, and the ``Headers``
    field is the publish's headers (``row_headers``)."""
    spec = spec_of(type(row))
    fields = {c.field: getattr(row, c.field) for c in spec.insert_columns}
    if delay and spec.retry_after is not None:
        fields.pop(spec.retry_after.field, None)
    for taken in (spec.headers, spec.unique):
        if taken is not None:
            fields.pop(taken.field, None)
    return {name: value for name, value in fields.items() if value is not GENERATED}


def declared_roles(cls: type) -> set[str]:
    """The roles a class statement's annotations declare, before the rules are checked (a
    base of row classes words its own rules about them first)."""
    return {role for decl in _field_decls(cls, f"class {cls.__qualname__}") for role in decl.roles}


def row_headers(row: Inbox[Any, Any]) -> Any:
    """The headers a row instance publishes with: its ``Headers`` field's value, or ``None``."""
    found = spec_of(type(row)).headers
    return None if found is None else getattr(row, found.field)


def row_unique(row: Inbox[Any, Any]) -> object:
    """The dedup key a row instance publishes with: its ``Unique`` field's value, or ``None``
    (the key as given: a window's period is added by the publish)."""
    found = spec_of(type(row)).unique
    return None if found is None else cast("object", getattr(row, found.field))


def _type_arguments(cls: type, where: str) -> tuple[object, object]:
    for base in getattr(cls, "__orig_bases__", ()):
        if get_origin(base) is Inbox:
            args = get_args(base)
            return args[0], args[1] if len(args) > 1 else Default
    for base in cls.__mro__[1:]:
        spec = getattr(base, "__inbox_spec__", None)
        if isinstance(spec, TableSpec):
            return spec.form, spec.isolation
    msg = (
        f"{where}: the claim form is the type argument of Inbox, found plain Inbox; write "
        f"Inbox[RowLock], Inbox[Lease] or Inbox[Advisory]"
    )
    raise DeclarationError(msg)


def _field_decls(cls: type, where: str) -> list[FieldDecl]:
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except NameError as exc:
        msg = (
            f"{where}: field annotations are read when the class is created, found a name "
            f"that does not resolve ({exc}); import it at module level"
        )
        raise DeclarationError(msg) from exc
    own = _own_annotation_names(cls)
    decls: list[FieldDecl] = []
    for name, hint in hints.items():
        if name not in own or name.startswith("__"):
            continue
        roles, generated, column, python_type, is_classvar = _read_annotation(hint, where, name)
        group = _group_of(hint)
        unique = _unique_of(hint)
        if is_classvar:
            if roles or generated or column is not None:
                msg = (
                    f"{where}: a role or Column(..) belongs to a field with a column, found one "
                    f"on the ClassVar {name!r}; make it an instance field or drop the role"
                )
                raise DeclarationError(msg)
            continue
        decls.append(
            FieldDecl(
                field=name,
                column=name if column is None else column,
                roles=roles,
                generated=generated,
                python_type=python_type,
                fifo=group is not None and group.fifo,
                delayed_rows_move_behind=group is not None and group.delayed_rows_move_behind,
                window=None if unique is None else unique.window,
            )
        )
    return decls


def _group_of(hint: object) -> Group | None:
    """The field's ``Group``, if it has one."""
    if get_origin(hint) is not typing.Annotated:
        return None
    return next((meta for meta in get_args(hint)[1:] if isinstance(meta, Group)), None)


def _unique_of(hint: object) -> Unique | None:
    """The field's ``Unique``, if it has one."""
    if get_origin(hint) is not typing.Annotated:
        return None
    return next((meta for meta in get_args(hint)[1:] if isinstance(meta, Unique)), None)


def _own_annotation_names(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in reversed(cls.__mro__):
        if klass is Inbox or klass is object or klass is Generic:
            continue
        names.update(inspect.get_annotations(klass))
    return names


def _read_annotation(
    hint: object, where: str, name: str
) -> tuple[tuple[str, ...], bool, str | None, object, bool]:
    """Roles, generated flag, column rename, bare type, and whether it is a ClassVar."""
    if get_origin(hint) is ClassVar:
        inner = get_args(hint)
        found = _read_annotation(inner[0] if inner else Any, where, name)
        return found[0], found[1], found[2], found[3], True
    if get_origin(hint) is not typing.Annotated:
        return (), False, None, hint, False
    python_type, *metadata = get_args(hint)
    roles: list[str] = []
    generated = False
    column: str | None = None
    for meta in metadata:
        if isinstance(meta, Role):
            generated = generated or meta.generated
            if meta.role:
                roles.append(meta.role)
        elif isinstance(meta, Column):
            if column is not None:
                msg = (
                    f"{where}: a field has one column, found Column({column!r}) and "
                    f"Column({meta.name!r}) on {name!r}; keep one"
                )
                raise DeclarationError(msg)
            column = meta.name
        elif isinstance(meta, type) and issubclass(meta, Role | Column):
            call = "Column('name')" if meta is Column else f"{meta.__name__}()"
            msg = (
                f"{where}: a role is an instance in the annotation, found the class "
                f"{meta.__name__} on {name!r}; write {call}"
            )
            raise DeclarationError(msg)
    return tuple(roles), generated, column, python_type, False


def _compile_manual(
    cls: type,
    where: str,
    manual: object,
    form: object,
    isolation: object,
    keywords: dict[str, object],
) -> TableSpec:
    if not isinstance(manual, InboxSpec):
        msg = f"{where}: spec= takes an InboxSpec, found {manual!r}; build one with InboxSpec(..)"
        raise DeclarationError(msg)
    clashing = sorted(set(keywords) - {"spec"})
    if clashing:
        msg = (
            f"{where}: spec= describes the whole table, found it beside "
            f"{', '.join(f'{k}=' for k in clashing)}; declare those in the InboxSpec "
            f"(InboxSpec(table, id), .within(schema), .advisory([...]))"
        )
        raise DeclarationError(msg)
    if manual.form is not form:  # pyright: ignore[reportUnnecessaryComparison]
        wanted = check_form(where, form).__name__
        builder = {"Lease": " with .lease(..)", "Advisory": " with .advisory([...])"}
        msg = (
            f"{where}: the class's type argument names the spec's claim form, found an "
            f"InboxSpec of the {manual.form.__name__} form on Inbox[{wanted}]; declare "
            f"Inbox[{manual.form.__name__}] or build the spec{builder.get(wanted, '')} "
            f"for {wanted}"
        )
        raise DeclarationError(msg)
    decls = _field_decls(cls, where)
    for decl in decls:
        marks = [
            "Group(fifo=True)" if r == "group" and decl.fifo else ROLE_CLASSES[r] + "()"
            for r in decl.roles
        ]
        if decl.generated and not decl.roles:
            marks.append("Generated()")
        if decl.column != decl.field:
            marks.append(f"Column({decl.column!r})")
        if marks:
            msg = (
                f"{where}: spec= names every role and column, found {', '.join(marks)} on "
                f"field {decl.field!r}; drop it from the annotation and say it in the spec"
            )
            raise DeclarationError(msg)
    fields = {decl.field: decl.python_type for decl in decls}
    return manual.compile(where=where, fields=fields, isolation=isolation, row_type=cls)
