"""The manual spec builder: the same declaration as the class statement's roles, by hand.

    SPEC = (
        InboxSpec("video_jobs", "id", generated=True)
        .advisory([KeyLiteral("video_jobs-"), KeyColumn("channel")])
        .attempt("attempt", generated=True)
        .payload("payload")
    )

    class Transcode(Inbox[Advisory], spec=SPEC):
        id: int
        channel: str
        attempt: int
        payload: bytes

Each setter names a column; a field of the row class with that name holds it (``field=`` when
the names differ). Fields the spec does not name are data columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic

from typing_extensions import TypeVar

from .._util import evolve
from ..errors import DeclarationError
from ._markers import Advisory, Form, Lease, RowLock
from ._spec import FieldDecl, KeyColumn, KeyLiteral, KeyPart, TableSpec, compile_spec

__all__ = ["InboxSpec"]

F = TypeVar("F", bound=Form, default=RowLock)
G = TypeVar("G", bound=Form)


@dataclass(frozen=True, slots=True)
class _RoleColumn:
    role: str
    column: str
    field: str
    generated: bool
    fifo: bool = False
    delayed_rows_move_behind: bool = False
    window: timedelta | None = None


@dataclass(frozen=True, slots=True, init=False)
class InboxSpec(Generic[F]):
    """A queue table described by hand; its type argument is the claim form it selects."""

    table: str
    form: type[Form]
    schema: str | None
    roles: tuple[_RoleColumn, ...]
    key: tuple[KeyPart, ...] | None

    def __init__(
        self: InboxSpec[RowLock],
        table: str,
        id: str,
        *,
        generated: bool = False,
        field: str | None = None,
    ) -> None:
        object.__setattr__(self, "table", table)
        object.__setattr__(self, "form", RowLock)
        object.__setattr__(self, "schema", None)
        object.__setattr__(self, "roles", (_RoleColumn("id", id, field or id, generated),))
        object.__setattr__(self, "key", None)

    def within(self, schema: str) -> InboxSpec[F]:
        return evolve(self, schema=schema)

    def group(
        self,
        column: str,
        *,
        fifo: bool = False,
        delayed_rows_move_behind: bool = False,
        field: str | None = None,
    ) -> InboxSpec[F]:
        """The group column; ``fifo=True`` makes each group a FIFO group, and
        ``delayed_rows_move_behind=True`` orders it by due time (as ``Group(..)`` does)."""
        spec = self._role("group", column, field, generated=False)
        if not fifo and not delayed_rows_move_behind:
            return spec
        *rest, group = spec.roles
        marked = evolve(group, fifo=fifo, delayed_rows_move_behind=delayed_rows_move_behind)
        return evolve(spec, roles=(*rest, marked))

    def origin_group(self, column: str, *, field: str | None = None) -> InboxSpec[F]:
        """The column a dead letter keeps its group in (``OriginGroup()``)."""
        return self._role("origin_group", column, field, generated=False)

    def priority(self, column: str, *, field: str | None = None) -> InboxSpec[F]:
        return self._role("priority", column, field, generated=False)

    def retry_after(self, column: str, *, field: str | None = None) -> InboxSpec[F]:
        return self._role("retry_after", column, field, generated=False)

    def attempt(
        self, column: str, *, generated: bool = False, field: str | None = None
    ) -> InboxSpec[F]:
        return self._role("attempt", column, field, generated=generated)

    def processed_at(self, column: str, *, field: str | None = None) -> InboxSpec[F]:
        return self._role("processed_at", column, field, generated=False)

    def dead_lettered_at(self, column: str, *, field: str | None = None) -> InboxSpec[F]:
        """The column of the time a row became a dead letter (``DeadLetteredAt()``)."""
        return self._role("dead_lettered_at", column, field, generated=False)

    def progress(self, column: str, *, field: str | None = None) -> InboxSpec[F]:
        """The column of the handler's reported progress (``Progress()``)."""
        return self._role("progress", column, field, generated=False)

    def payload(self, column: str, *, field: str | None = None) -> InboxSpec[F]:
        return self._role("payload", column, field, generated=False)

    def headers(self, column: str, *, field: str | None = None) -> InboxSpec[F]:
        """The column of the message's headers (``Headers()``)."""
        return self._role("headers", column, field, generated=False)

    def unique(
        self, column: str, *, window: timedelta | None = None, field: str | None = None
    ) -> InboxSpec[F]:
        """The column of the dedup key (``Unique()``, ``Unique(window=...)``)."""
        spec = self._role("unique", column, field, generated=False)
        if window is None:
            return spec
        *rest, unique = spec.roles
        return evolve(spec, roles=(*rest, evolve(unique, window=window)))

    def lease(
        self: InboxSpec[RowLock], column: str, *, field: str | None = None
    ) -> InboxSpec[Lease]:
        spec: InboxSpec[RowLock] = self._role("locked_until", column, field, generated=False)
        return _with_form(spec, Lease)

    def advisory(self: InboxSpec[RowLock], parts: Sequence[KeyPart]) -> InboxSpec[Advisory]:
        if not parts or not all(isinstance(p, KeyLiteral | KeyColumn) for p in parts):
            msg = (
                f"InboxSpec({self.table!r}): an advisory key is a non-empty sequence of "
                f"KeyLiteral and KeyColumn parts, found {parts!r}; write "
                f"[KeyLiteral('{self.table}-'), KeyColumn('id')]"
            )
            raise DeclarationError(msg)
        spec = _with_form(self, Advisory)
        return evolve(spec, key=tuple(parts))

    def _role(self, role: str, column: str, field: str | None, *, generated: bool) -> InboxSpec[F]:
        if any(r.role == role for r in self.roles):
            msg = (
                f"InboxSpec({self.table!r}): each role is set once, found .{role}(..) given "
                f"twice; drop one of the calls"
            )
            raise DeclarationError(msg)
        return evolve(
            self, roles=(*self.roles, _RoleColumn(role, column, field or column, generated))
        )

    def compile(
        self, *, where: str, fields: Mapping[str, object], isolation: object, row_type: type | None
    ) -> TableSpec:
        """Check the spec with the same rules as the class statement. ``fields`` maps the row
        class's fields, in declaration order, to their types."""
        by_field: dict[str, _RoleColumn] = {}
        for role in self.roles:
            other = by_field.get(role.field)
            if other is not None:
                msg = (
                    f"{where}: a field plays one role, found field {role.field!r} named by "
                    f"{_setter(other.role)} and {_setter(role.role)}; give each role its own "
                    f"column"
                )
                raise DeclarationError(msg)
            by_field[role.field] = role
        missing = sorted(set(by_field) - set(fields))
        if missing:
            msg = (
                f"{where}: every column the spec names is a field of the row, found no field "
                f"{', '.join(map(repr, missing))}; add the field or pass field= to the setter"
            )
            raise DeclarationError(msg)
        decls: list[FieldDecl] = []
        for name, python_type in fields.items():
            rc = by_field.get(name)
            if rc is None:
                decls.append(FieldDecl(field=name, column=name, python_type=python_type))
            else:
                decls.append(
                    FieldDecl(
                        field=name,
                        column=rc.column,
                        roles=(rc.role,),
                        generated=rc.generated,
                        python_type=python_type,
                        fifo=rc.fifo,
                        delayed_rows_move_behind=rc.delayed_rows_move_behind,
                        window=rc.window,
                    )
                )
        return compile_spec(
            where=where,
            table=self.table,
            schema=self.schema,
            form=self.form,
            isolation=isolation,
            fields=decls,
            advisory_lock=None,
            key=self.key,
            row_type=row_type,
        )


def _setter(role: str) -> str:
    if role == "id":
        return "the id of InboxSpec(..)"
    return ".lease(..)" if role == "locked_until" else f".{role}(..)"


def _with_form(spec: InboxSpec[Any], form: type[G]) -> InboxSpec[G]:
    if spec.form is not RowLock:
        msg = (
            f"InboxSpec({spec.table!r}): a table has one claim form, found {spec.form.__name__} "
            f"and then {form.__name__}; keep one of .lease(..) and .advisory(..)"
        )
        raise DeclarationError(msg)
    changed: InboxSpec[G] = evolve(spec, form=form)
    return changed
