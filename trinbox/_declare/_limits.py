"""Limits on a queue's claims (``InboxQueue.limit``): at most N rows in work per key, and at
most N in work for the whole queue, counted across every process from the leases themselves.

Pure data and its rules: the queue checks a declaration here, the dialects render the limited
claim from it (trinbox._dialects, ``limited_lease_claim``). Nothing here is a counter: the
claim counts live leases (a row of the queue, unfinished, its lease in the future) under a
lock that serializes the claims of the table, so a crashed owner's rows stop counting when
their leases end.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import DeclarationError
from ._markers import Lease
from ._rates import Rate, Rates
from ._spec import ColumnSpec, TableSpec

__all__ = ["ClaimLimits", "add_limit"]


@dataclass(frozen=True, slots=True)
class ClaimLimits:
    """``key``: the column whose value is a limit's key, with ``per_key`` rows in work per
    value at most; ``whole``: at most that many rows in work for the whole queue. Either may be
    absent, not both. ``key_rate``: at most so many starts per period per key (``key`` set);
    ``whole_rate``: for the whole queue; ``rates``: the table keeping their state (set with
    either)."""

    key: ColumnSpec | None = None
    per_key: int | None = None
    whole: int | None = None
    key_rate: Rate | None = None
    whole_rate: Rate | None = None
    rates: Rates | None = None

    @property
    def label(self) -> str:
        """The limits as declared, for messages."""
        found: list[str] = []
        if self.key is not None and self.per_key is not None:
            found.append(f".limit(key={self.key.field!r}, concurrency={self.per_key})")
        if self.whole is not None:
            found.append(f".limit(concurrency={self.whole})")
        if self.key is not None and self.key_rate is not None:
            found.append(f".limit(key={self.key.field!r}, rate={self.key_rate!r})")
        if self.whole_rate is not None:
            found.append(f".limit(rate={self.whole_rate!r})")
        return "".join(found)

    @property
    def rated(self) -> bool:
        """Whether a rate is declared (per key or for the whole queue)."""
        return self.key_rate is not None or self.whole_rate is not None


def add_limit(
    spec: TableSpec,
    found: ClaimLimits | None,
    *,
    key: object,
    concurrency: object,
    fifo: bool,
    custom: bool,
    rate: object = None,
    rates: object = None,
) -> ClaimLimits:
    """``found`` with the limits of ``.limit(key=key, concurrency=concurrency, rate=rate,
    rates=rates)`` added, after their rules; each refusal names the rule, what was found and
    the fix. One call may declare a concurrency and a rate together (of the same key)."""
    args = [] if key is None else [f"key={key!r}"]
    if concurrency is not None:
        args.append(f"concurrency={concurrency!r}")
    if rate is not None:
        args.append(f"rate={rate!r}")
    if rates is not None:
        args.append(f"rates={rates!r}")
    call = f".limit({', '.join(args)})"
    if concurrency is None and rate is None:
        msg = (
            f"{spec.label}: a limit lets one row or more be in work at once, or starts so many "
            f"per period, found {call}; pass concurrency=N with an int N >= 1, or "
            f"rate=Rate(n, per=timedelta(...)) with rates=Rates(...)"
        )
        raise ValueError(msg)
    limits = found
    if rate is not None:
        limits = _add_rate(spec, limits, key=key, rate=rate, rates=rates, call=call)
    elif rates is not None:
        msg = (
            f"{spec.label}: rates= names the table of a rate, found {call} without one; pass "
            f"rate=Rate(n, per=timedelta(...)) too, or drop rates="
        )
        raise TypeError(msg)
    if concurrency is not None:
        limits = _add_concurrency(
            spec, limits, key=key, concurrency=concurrency, fifo=fifo, custom=custom, call=call
        )
    assert limits is not None
    _check_beside(spec, call, fifo=fifo, custom=custom, rated=limits.rated)
    return limits


def _add_rate(
    spec: TableSpec,
    found: ClaimLimits | None,
    *,
    key: object,
    rate: object,
    rates: object,
    call: str,
) -> ClaimLimits:
    """``found`` with the rate of ``call`` added, after its rules."""
    if not isinstance(rate, Rate):
        msg = (
            f"{spec.label}: a limit's rate is a trinbox.Rate, found {call} "
            f"({type(rate).__name__}); pass rate=Rate(100, per=timedelta(seconds=10)), say"
        )
        raise TypeError(msg)
    if not isinstance(rates, Rates):
        msg = (
            f"{spec.label}: a rate keeps each key's state in a rate table, found {call} "
            f"without one; pass rates=Rates('app_rates') (and create it: "
            f"broker.create_tables(rates) or trinbox schema)"
        )
        raise TypeError(msg)
    _check_form(spec, call)
    limits = found if found is not None else ClaimLimits()
    if limits.rates is not None and limits.rates != rates:
        msg = (
            f"{spec.label}: a queue keeps its rates in one rate table, found {call} after "
            f"rates={limits.rates!r}; pass the same Rates to both"
        )
        raise DeclarationError(msg)
    if key is None:
        if limits.whole_rate is not None:
            msg = (
                f"{spec.label}: a queue takes one rate for the whole queue, found "
                f".limit(rate={limits.whole_rate!r}) and then {call}; keep one of them"
            )
            raise DeclarationError(msg)
        return replace(limits, whole_rate=rate, rates=rates)
    column = _key_column(spec, key, call)
    if limits.key_rate is not None:
        msg = (
            f"{spec.label}: a queue takes one per-key rate, found "
            f".limit(key={limits.key.field if limits.key else None!r}, "
            f"rate={limits.key_rate!r}) and then {call}; keep one of them"
        )
        raise DeclarationError(msg)
    _check_same_key(spec, limits, column, call)
    return replace(limits, key=column, key_rate=rate, rates=rates)


def _check_same_key(spec: TableSpec, limits: ClaimLimits, column: ColumnSpec, call: str) -> None:
    """A queue's per-key limits share one key: its concurrency and its rate."""
    if limits.key is not None and limits.key != column:
        msg = (
            f"{spec.label}: a queue's per-key limits share one key, found {limits.label} and "
            f"then {call}; pass key={limits.key.field!r} to both"
        )
        raise DeclarationError(msg)


def _check_form(spec: TableSpec, call: str) -> None:
    """A rate is spent by the lease form's claim only, for now: in a short transaction behind
    the table's limit lock. A row lock claim's transaction lasts its handlers' run, so the
    rate rows it wrote would stay locked, and an advisory claim takes no lock to spend under."""
    if spec.form is not Lease:
        msg = (
            f"{spec.label}: a rate is supported for now on Inbox[Lease] tables only (its "
            f"starts are spent in the claim's short transaction, behind the table's limit "
            f"lock), found {call} on an Inbox[{spec.form.__name__}] table; declare the table "
            f"Inbox[Lease] with a LockedUntil field, or limit its concurrency instead "
            f"(.limit(key=..., concurrency=N))"
        )
        raise DeclarationError(msg)


def _check_beside(spec: TableSpec, call: str, *, fifo: bool, custom: bool, rated: bool) -> None:
    """Limits are claimed beside no custom claim; beside FIFO groups, a concurrency only, for
    now."""
    if custom:
        msg = (
            f"{spec.label}: .limit() is supported for now beside no .custom_claim() (the "
            f"limit lives in trinbox's claim), found {call}; drop one of them"
        )
        raise DeclarationError(msg)
    if fifo and rated:
        msg = (
            f"{spec.label}: a rate is supported for now beside no Group(fifo=True) (a rate's "
            f"state is kept per group of a queue, and a FIFO table's limits span its groups), "
            f"found {call}; limit the concurrency there (.limit(key=..., concurrency=N)), or "
            f"drop the rate or fifo=True"
        )
        raise DeclarationError(msg)


def _add_concurrency(
    spec: TableSpec,
    found: ClaimLimits | None,
    *,
    key: object,
    concurrency: object,
    fifo: bool,
    custom: bool,
    call: str,
) -> ClaimLimits:
    """``found`` with the concurrency of ``call`` added, after its rules."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        msg = (
            f"{spec.label}: a limit lets one row or more be in work at once, found {call}; "
            f"pass concurrency=N with an int N >= 1"
        )
        raise ValueError(msg)
    # Every form takes a concurrency: live leases counted, slots of a row lock claim's
    # transaction, slots as session locks beside an advisory key's (where the dialect has
    # them: trinbox._dialects, ``limited_row_lock_claim``, ``limited_advisory``).
    _check_beside(spec, call, fifo=fifo, custom=custom, rated=found is not None and found.rated)
    limits = found if found is not None else ClaimLimits()
    if key is None:
        if limits.whole is not None:
            msg = (
                f"{spec.label}: a queue takes one limit for the whole queue, found "
                f".limit(concurrency={limits.whole}) and then {call}; keep one of them"
            )
            raise DeclarationError(msg)
        return replace(limits, whole=concurrency)
    column = _key_column(spec, key, call)
    if limits.key is not None and limits.per_key is not None:
        msg = (
            f"{spec.label}: a queue takes one per-key limit for now, found "
            f".limit(key={limits.key.field!r}, concurrency={limits.per_key}) and then {call}; "
            f"keep one of them"
        )
        raise DeclarationError(msg)
    _check_same_key(spec, limits, column, call)
    return replace(limits, key=column, per_key=concurrency)


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
