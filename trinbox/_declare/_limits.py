"""Limits on a queue's claims (``InboxQueue.limit``): at most N rows in work per key, and at
most N in work for the whole queue, counted across every process from the leases themselves.

Pure data and its rules: the queue checks a declaration here, the dialects render the limited
claim from it (trinbox._dialects, ``limited_lease_claim``). Nothing here is a counter: the
claim counts live leases (a row of the queue, unfinished, its lease in the future) under a
lock that serializes the claims of the table, so a crashed owner's rows stop counting when
their leases end.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import DeclarationError
from ._markers import Lease, RowLock
from ._spec import ColumnSpec, TableSpec

__all__ = ["ClaimLimits", "add_limit"]


@dataclass(frozen=True, slots=True)
class ClaimLimits:
    """``key``: the column whose value is a limit's key, with ``per_key`` rows in work per
    value at most; ``whole``: at most that many rows in work for the whole queue. Either may be
    absent, not both."""

    key: ColumnSpec | None = None
    per_key: int | None = None
    whole: int | None = None

    @property
    def label(self) -> str:
        """The limits as declared, for messages."""
        found: list[str] = []
        if self.key is not None:
            found.append(f".limit(key={self.key.field!r}, concurrency={self.per_key})")
        if self.whole is not None:
            found.append(f".limit(concurrency={self.whole})")
        return "".join(found)


def add_limit(
    spec: TableSpec,
    found: ClaimLimits | None,
    *,
    key: object,
    concurrency: object,
    fifo: bool,
    custom: bool,
) -> ClaimLimits:
    """``found`` with the limit ``.limit(key=key, concurrency=concurrency)`` added, after its
    rules; each refusal names the rule, what was found and the fix."""
    call = (
        f".limit(concurrency={concurrency!r})"
        if key is None
        else f".limit(key={key!r}, concurrency={concurrency!r})"
    )
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        msg = (
            f"{spec.label}: a limit lets one row or more be in work at once, found {call}; "
            f"pass concurrency=N with an int N >= 1"
        )
        raise ValueError(msg)
    if spec.form is not Lease and spec.form is not RowLock:
        msg = (
            f"{spec.label}: .limit() is supported for now on Inbox[Lease] tables (the claim "
            f"counts live leases) and Inbox[RowLock] tables on PostgreSQL (each row takes a "
            f"slot of its key, a lock of its transaction), found an "
            f"Inbox[{spec.form.__name__}] table (its rows are held by a session lock per "
            f"advisory key, which runs one row per key at a time already); declare the table "
            f"Inbox[Lease] with a LockedUntil field, or drop .limit()"
        )
        raise DeclarationError(msg)
    refused = None
    if fifo:
        refused = "Group(fifo=True) (a FIFO group runs one row at a time already)"
    elif custom:
        refused = ".custom_claim() (the limit lives in trinbox's claim)"
    if refused is not None:
        msg = (
            f"{spec.label}: .limit() is supported for now beside neither Group(fifo=True) "
            f"nor .custom_claim(), found {call} beside {refused}; drop one of them"
        )
        raise DeclarationError(msg)
    limits = found if found is not None else ClaimLimits()
    if key is None:
        if limits.whole is not None:
            msg = (
                f"{spec.label}: a queue takes one limit for the whole queue, found "
                f".limit(concurrency={limits.whole}) and then {call}; keep one of them"
            )
            raise DeclarationError(msg)
        return ClaimLimits(limits.key, limits.per_key, concurrency)
    column = _key_column(spec, key, call)
    if limits.key is not None:
        msg = (
            f"{spec.label}: a queue takes one per-key limit for now, found "
            f".limit(key={limits.key.field!r}, concurrency={limits.per_key}) and then {call}; "
            f"keep one of them"
        )
        raise DeclarationError(msg)
    return ClaimLimits(column, concurrency, limits.whole)


def _key_column(spec: TableSpec, key: object, call: str) -> ColumnSpec:
    """The column of the field ``key`` names: any field of the row but the lease's own."""
    fields = [c.field for c in spec.columns if c.role != "locked_until"]
    if not isinstance(key, str):
        msg = (
            f"{spec.label}: a limit's key is the name of a field of the row, found {call} "
            f"({type(key).__name__}); pass key= one of {', '.join(map(repr, fields))}"
        )
        raise TypeError(msg)
    for col in spec.columns:
        if col.field == key and col.role != "locked_until":
            return col
    msg = (
        f"{spec.label}: a limit's key is a field of the row, found {call} and no field "
        f"{key!r}; pass key= one of {', '.join(map(repr, fields))}"
    )
    raise DeclarationError(msg)
