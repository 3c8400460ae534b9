"""SQLite: lease and advisory forms; no row locks; ``?`` placeholders, backtick quoting.

The advisory form has no locks a session holds: the process keeps a registry of keys in work,
so the candidate select has no probe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .._declare._markers import (
    Advisory,
    Default,
    Deferred,
    Exclusive,
    Form,
    Immediate,
    Lease,
    Opening,
)
from .._declare._spec import TableSpec
from .._errors import DeclarationError
from ._base import Dialect
from ._statement import Frag, P, ParamStyle, Statement, join

__all__ = ["SqliteDialect"]

_BEGIN = {
    Default: "BEGIN",
    Deferred: "BEGIN DEFERRED",
    Immediate: "BEGIN IMMEDIATE",
    Exclusive: "BEGIN EXCLUSIVE",
}


@dataclass(frozen=True)
class SqliteDialect(Dialect):
    name: ClassVar[str] = "SQLite"
    style: ClassVar[ParamStyle] = "qmark"
    quote: ClassVar[str] = "`"
    identifier_limit: ClassVar[int | None] = None
    forms: ClassVar[tuple[type[Form], ...]] = (Lease, Advisory)
    openings: ClassVar[tuple[type[Opening], ...]] = (Default, Deferred, Immediate, Exclusive)
    one_claim_at_a_time: ClassVar[bool] = True

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
        return self.r("begin", _BEGIN[spec.opening])

    def key_column(self, column: str) -> str:
        return f"ifnull({column}, '')"

    def key_expression(self, spec: TableSpec) -> str:
        return f"CAST({super().key_expression(spec)} AS TEXT)"

    def lease_claim(self, spec: TableSpec) -> tuple[Statement, ...]:
        """One statement: stamp the lease on the first due rows and return them as they were
        before the stamp (attempt uncounted). Rows come back in no particular order."""
        t = self.table(spec)
        locked = self.c(spec.locked_until)
        sets: list[Frag] = [locked + " = " + P("lease")]
        if spec.attempt is not None:
            attempt = self.c(spec.attempt)
            sets.append(f"{attempt} = {attempt} + 1")
        conds = [*self.claimable(spec), self.lease_free(spec)]
        inner = (
            f"SELECT {self.c(spec.id)} FROM {t}"
            + self.where(conds)
            + f" ORDER BY {self.order_by(spec)} LIMIT "
            + P("limit")
        )
        return (
            self.r(
                "claim",
                f"UPDATE {t} SET "
                + join(", ", sets)
                + f" WHERE {self.c(spec.id)} IN ("
                + inner
                + f") RETURNING {self.select_list(spec, attempt_before=True)}",
            ),
        )

    def lease_batch(self, spec: TableSpec) -> tuple[Statement, ...]:
        # The ids travel as one JSON array: one statement text whatever the batch's size.
        return self.lease_batch_where(spec, "IN (SELECT value FROM json_each(" + P("ids") + "))")

    def advisory_candidates(self, spec: TableSpec) -> Statement:
        """The first due rows in claim order with their keys. No probe: the process registry
        knows the keys in work, and the select reads no further than ``limit``."""
        t = self.table(spec)
        lock = self.q(self.internal(spec, "__lock"))
        return self.r(
            "candidates",
            f"SELECT {self.c(spec.id)}, {self.key_expression(spec)} AS {lock} FROM {t}"
            + self.where(self.claimable(spec))
            + f" ORDER BY {self.order_by(spec)} LIMIT "
            + P("limit"),
        )
