"""The statements of a rate (``InboxQueue.limit(rate=Rate(n, per=...), rates=...)``,
trinbox._declare._rates), written once for every dialect: GCRA over a rate table of
trinbox's own, one row per (table, group, key).

    tbl        the limited table's qualified name (part of the key)
    grp        the subscription's group, or ``''`` (part of the key)
    rate_key   ``'v'`` and the key's text, ``'n'`` for a NULL key, ``'w'`` for the whole
               queue's rate (part of the key)
    tat        the key's theoretical arrival time, in microseconds since the epoch on the
               broker's clock (the claim's ``now``: the host's token or the server's now)

A key may start ``floor(n * (now + per - max(tat, now)) / per)`` rows now (``n`` for a key with
no row: a burst of ``n``, then one every ``per / n``); its claim of ``s`` rows then writes
``tat = max(tat, now) + ceil(s * per / n)``, in the claim's transaction, behind the limit's
lock (``limit_lock``; SQLite's one writer), so two claims never spend the same start. The row is
a time, never a counter: nothing is given back, by a crash or otherwise (a rate counts
starts). Pure text, no I/O.

- ``rated_exprs``: the expressions the limited claim adds before its ``fits`` (``_limited.py``),
  ``rated_condition`` the condition its rows then meet, ``whole_rate_bound`` the bound on
  their place in claim order of a whole-queue rate;
- ``rate_advance`` / ``whole_rate_advance``: the upserts the claim runs per key it took (the
  key read from one row it took, ``id``; ``starts`` rows of it) and for the whole queue;
- ``rates_ddl``: the rate table.
"""

from __future__ import annotations

from .._declare._limits import ClaimLimits
from .._declare._rates import Rate, Rates
from .._declare._spec import TableSpec
from ._base import Dialect
from ._statement import Frag, P, Statement

__all__ = [
    "WHOLE_KEY",
    "rate_advance",
    "rated_condition",
    "rated_exprs",
    "rates_ddl",
    "rates_name",
    "whole_rate_advance",
    "whole_rate_bound",
]

WHOLE_KEY = "w"
"""The ``rate_key`` of a whole queue's rate (a key's is ``'v'`` and its text, or ``'n'``)."""


def _rates(d: Dialect, limits: ClaimLimits) -> str:
    assert limits.rates is not None
    return rates_name(d, limits.rates)


def rates_name(d: Dialect, rates: Rates) -> str:
    return d.qualified(rates.table, rates.schema)


def _now_us(d: Dialect) -> Frag:
    return d.epoch_us(P("now"))


def _of(d: Dialect, spec: TableSpec) -> Frag:
    """The rate rows of the subscription: its table and group."""
    return "tbl = " + d.literal(spec.qualified_name) + " AND grp = " + P("rate_group")


def _allowance(d: Dialect, rate: Rate, tat: Frag) -> Frag:
    """The starts a key whose theoretical arrival time is ``tat`` (NULL: no row) may take now."""
    now = _now_us(d)
    later = d.greatest("COALESCE(" + tat + ", " + now + ")", now)
    return d.int_div(f"{rate.n} * (" + now + f" + {rate.per_us} - " + later + ")", str(rate.per_us))


def rated_exprs(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> list[Frag]:
    """A per-key rate: ``tats``, the key's times; ``rated``, each due row's place among its
    key's due rows in claim order beside what its key may start now."""
    if limits.key_rate is None:
        return []
    assert limits.key is not None
    row = d.internal(spec, "__row")
    tats, rated = d.internal(spec, "__tats"), d.internal(spec, "__rated")
    rk, tat = d.quoted(d.internal(spec, "__rk")), d.quoted(d.internal(spec, "__tat"))
    rid, rrank = d.quoted(d.internal(spec, "__rid")), d.quoted(d.internal(spec, "__rrank"))
    allow = d.quoted(d.internal(spec, "__allow"))
    column = d.column(limits.key)
    return [
        f"{tats} AS (SELECT rate_key AS {rk}, tat AS {tat} FROM {_rates(d, limits)} WHERE "
        + _of(d, spec)
        + ")",
        f"{rated} AS (SELECT {row}.{d.column(spec.id)} AS {rid}, ROW_NUMBER() OVER (PARTITION BY "
        f"{row}.{column} ORDER BY {d.order_by(spec, prefix=row + '.')}) AS {rrank}, "
        + _allowance(d, limits.key_rate, f"{tats}.{tat}")
        + f" AS {allow} FROM {d.table(spec)} AS {row} LEFT JOIN {tats} ON {tats}.{rk} = "
        + d.rate_key_text(f"{row}.{column}")
        + d.where([*d.claimable(spec, prefix=row + "."), d.lease_free(spec, prefix=row + ".")])
        + ")",
    ]


def rated_condition(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Frag | None:
    """The condition on a row of ``fits``'s source under a per-key rate: among the first of its
    key its rate lets start now."""
    if limits.key_rate is None:
        return None
    rated = d.internal(spec, "__rated")
    rid, rrank = d.quoted(d.internal(spec, "__rid")), d.quoted(d.internal(spec, "__rrank"))
    allow = d.quoted(d.internal(spec, "__allow"))
    return f"{d.column(spec.id)} IN (SELECT {rid} FROM {rated} WHERE {rrank} <= {allow})"


def whole_rate_bound(d: Dialect, spec: TableSpec, limits: ClaimLimits, place: str) -> Frag | None:
    """Under a whole-queue rate, the bound on a row's ``place`` in claim order."""
    if limits.whole_rate is None:
        return None
    tat = (
        f"(SELECT tat FROM {_rates(d, limits)} WHERE "
        + _of(d, spec)
        + f" AND rate_key = {d.literal(WHOLE_KEY)})"
    )
    return f"{place} <= " + _allowance(d, limits.whole_rate, tat)


def _advance(d: Dialect, rate: Rate) -> Frag:
    """``starts`` starts' advance: ``ceil(starts * per / n)`` microseconds."""
    return d.int_div(P("starts") + f" * {rate.per_us} + {rate.n - 1}", str(rate.n))


def rate_advance(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Statement | None:
    """The upsert of a per-key rate's row after its key started ``starts`` rows, the key read
    from the row ``id`` (one of them): ``tat = max(tat, now) + ceil(starts * per / n)``."""
    if limits.key_rate is None:
        return None
    assert limits.key is not None
    return _upsert(
        d,
        limits,
        limits.key_rate,
        "SELECT "
        + d.literal(spec.qualified_name)
        + ", "
        + P("rate_group")
        + ", "
        + d.rate_key_text(d.column(limits.key))
        + ", "
        + _now_us(d)
        + " + "
        + _advance(d, limits.key_rate)
        + f" FROM {d.table(spec)} WHERE {d.column(spec.id)} = "
        + P("id"),
    )


def whole_rate_advance(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Statement | None:
    """The upsert of a whole-queue rate's row after the claim started ``starts`` rows."""
    if limits.whole_rate is None:
        return None
    return _upsert(
        d,
        limits,
        limits.whole_rate,
        "SELECT "
        + d.literal(spec.qualified_name)
        + ", "
        + P("rate_group")
        + f", {d.literal(WHOLE_KEY)}, "
        + _now_us(d)
        + " + "
        + _advance(d, limits.whole_rate)
        + " WHERE 1 = 1",  # SQLite: an upsert's SELECT has a WHERE (parsing ON CONFLICT)
    )


def _upsert(d: Dialect, limits: ClaimLimits, rate: Rate, select: Frag) -> Statement:
    now, advance = _now_us(d), _advance(d, rate)
    return d.render(
        "rate",
        d.rate_upsert(
            _rates(d, limits), select, lambda tat: d.greatest(tat, now) + " + " + advance
        ),
    )


def rates_ddl(d: Dialect, rates: Rates, where: str) -> tuple[str, ...]:
    """The rate table ``rates``, where it is missing, or the dialect's refusal of its names
    (``IdentifierTooLong``) naming ``where``."""
    for name in (rates.table, rates.schema):
        if name is not None:
            d.check_identifier(name, where)
    rules = d.ddl_rules
    text = rules.indexed_text
    return (
        f"CREATE TABLE IF NOT EXISTS {rates_name(d, rates)} (\n"
        f"    tbl {text} NOT NULL,\n"
        f"    grp {text} NOT NULL,\n"
        f"    rate_key {text} NOT NULL,\n"
        f"    tat BIGINT NOT NULL,\n"
        f"    PRIMARY KEY (tbl, grp, rate_key)\n"
        f"){rules.table_options}",
    )
