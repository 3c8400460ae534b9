"""The limited row lock claim's slots (``InboxQueue.limit`` on an ``Inbox[RowLock]`` table),
PostgreSQL's: N transaction locks per key, taken by the claim with try-locks that never wait.

A row in work holds one slot of its key (and one of the whole queue's, under a whole limit):
an advisory transaction lock named for the table, the subscription's group, the key and the
slot's index below N, ``hashtextextended(...)``. The claim's transaction holds them with the
rows, so they end with it: the last settlement's commit, a drop's rollback, a closed or dead
connection, a crashed or killed process. Nothing counts; nothing is kept to clean up.

One statement after the claim's ``BEGIN`` (the form's claim is unchanged):

- ``__due``: the due rows per key, their count and the first one's place in claim order;
- ``__held``: the advisory locks other sessions of the database hold (``pg_locks``);
- ``__keys``: per key, its due rows less the slots others hold of it (each row in work holds
  one): the rows this claim could lock, so that it does not take a slot it cannot fill;
- ``__whole`` (a whole limit): the queue's free slots, as many as the claim can fill;
- ``__slots``: the keys in claim order, each joined to its slots that a try-lock takes, as
  many as its free rows, and no more than the claim's limit (or whole slots) in all. The
  join is a nested loop that stops when the limit is reached, so no slot past it is tried;
  a key with no free slot takes nothing and the next key is tried: it is skipped, not
  waited on;
- then each key's rows, as many as it took slots, ``FOR UPDATE SKIP LOCKED``.

On a FIFO table (``Group(fifo=True)``) the claim, after the group's guard, takes the group's
head only (``limited_head_claim``): one slot of the head's key that a try-lock takes (and one
of the queue's first, under a whole limit), then the head ``FOR UPDATE SKIP LOCKED`` while a
slot was had. The slots are named for the table without the group there: a key's limit spans
the table's groups. A claim that took no head rolls back, its slots with it.

The try-locks make it exact: no two transactions hold one slot, and the slots of a key
within one claim are distinct indexes. A slot the claim took for a row another claim locked
in between stays held until the claim's transaction ends: fewer rows in work, never more.
"""

from __future__ import annotations

from .._declare._limits import ClaimLimits
from .._declare._spec import TableSpec
from ._base import Dialect
from ._statement import Frag, P, Sql, join

__all__ = ["limited_head_claim", "limited_row_lock_claim", "slot_name"]

# What stands in a whole-queue slot's name where a key's slot has its key: a key is written
# by quote_nullable (NULL, or quoted), never bare.
WHOLE = "'*'"


def slot_name(d: Dialect, spec: TableSpec, key: Frag, index: Frag) -> Sql:
    """The lock of slot ``index`` of ``key`` (an SQL text expression) on ``spec``'s table, of
    the subscription's group where the table has groups (FIFO groups: of every group)."""
    parts: list[Frag] = [d.literal(f"trinbox_slot:{spec.qualified_name}:")]
    if spec.group is not None and not spec.fifo:
        parts += ["quote_nullable(CAST(" + P("group") + " AS text))", "':'"]
    parts += [key, "':'", index]
    args = Sql()
    for i, part in enumerate(parts):
        args = args + (", " if i else "") + part
    return "hashtextextended(concat(" + args + "), 0)"


def limited_row_lock_claim(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Sql:
    """The claim's statement: the rows it locked, in claim order, every column."""
    t = d.table(spec)
    order = d.order_by(spec)
    names = {
        n: d.internal(spec, f"__{n}")
        for n in ("due", "held", "keys", "whole", "slots", "counts", "row", "got", "g")
    }
    due, held, keys, whole = names["due"], names["held"], names["keys"], names["whole"]
    slots, counts, row, got, g = (
        names["slots"],
        names["counts"],
        names["row"],
        names["got"],
        names["g"],
    )
    k, n, first, free, h, i, m = (
        d.quoted(d.internal(spec, f"__{x}")) for x in ("k", "n", "first", "free", "h", "i", "m")
    )
    place = d.quoted(d.internal(spec, "__place"))
    exprs: list[Frag] = [
        f"{held} AS MATERIALIZED (SELECT (l.classid::bigint << 32) | l.objid::bigint AS {h} "
        "FROM pg_locks AS l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted "
        "AND l.pid <> pg_backend_pid() AND l.database = "
        "(SELECT oid FROM pg_database WHERE datname = current_database()))"
    ]
    claimable = d.where(d.claimable(spec))

    def held_of(key: str, count: int) -> Sql:
        """How many of ``key``'s ``count`` slots other sessions hold."""
        return (
            f"(SELECT COUNT(*) FROM {held}, generate_series(0, {count - 1}) AS {g}({i}) "
            f"WHERE {held}.{h} = " + slot_name(d, spec, key, f"{g}.{i}") + ")"
        )

    def take(key: str, count: int, limit: Frag) -> Sql:
        """The slots of ``key`` (of ``count``) a try-lock takes, ``limit`` at most."""
        return (
            f"(SELECT {g}.{i} FROM generate_series(0, {count - 1}) AS {g}({i}) "
            "WHERE pg_try_advisory_xact_lock("
            + slot_name(d, spec, key, f"{g}.{i}")
            + ") LIMIT "
            + limit
            + ")"
        )

    column = d.column(limits.key) if limits.key is not None else ""
    if limits.key is not None:
        assert limits.per_key is not None
        keyed = f"quote_nullable(CAST({due}.{k} AS text))"
        exprs.append(
            f"{due} AS MATERIALIZED (SELECT {k}, COUNT(*) AS {n}, MIN({place}) AS {first} FROM "
            f"(SELECT {column} AS {k}, ROW_NUMBER() OVER (ORDER BY {order}) AS {place} FROM {t}"
            + claimable
            + f") AS {row} GROUP BY {k})"
        )
        exprs.append(
            f"{keys} AS MATERIALIZED (SELECT {due}.{k}, LEAST({due}.{n}, {limits.per_key}) - "
            + held_of(keyed, limits.per_key)
            + f" AS {free}, {due}.{first} FROM {due} ORDER BY {due}.{first})"
        )
        fillable: Sql = Sql(f"(SELECT COALESCE(SUM(GREATEST({free}, 0)), 0) FROM {keys})")
    else:
        assert limits.whole is not None
        # The due rows no other claim holds: each row in work holds one of the whole slots.
        fillable = (
            f"((SELECT COUNT(*) FROM {t}" + claimable + ") - " + held_of(WHOLE, limits.whole) + ")"
        )
    overall: Sql = P("limit")
    if limits.whole is not None:
        exprs.append(
            f"{whole} AS MATERIALIZED (SELECT {i} FROM "
            + take(WHOLE, limits.whole, "LEAST(" + P("limit") + ", GREATEST(" + fillable + ", 0))")
            + f" AS {got})"
        )
        overall = Sql(f"(SELECT COUNT(*) FROM {whole})")
    if limits.key is not None:
        keyed = f"quote_nullable(CAST({keys}.{k} AS text))"
        exprs.append(
            f"{slots} AS MATERIALIZED (SELECT {keys}.{k}, {got}.{i} FROM {keys} CROSS JOIN "
            "LATERAL "
            + take(keyed, limits.per_key or 1, f"GREATEST({keys}.{free}, 0)")
            + f" AS {got} WHERE {keys}.{free} > 0 LIMIT "
            + overall
            + ")"
        )
        exprs.append(f"{counts} AS (SELECT {k}, COUNT(*) AS {m} FROM {slots} GROUP BY {k})")
        rows = (
            f"SELECT {got}.* FROM {counts} CROSS JOIN LATERAL (SELECT {d.select_list(spec)} "
            f"FROM {t}"
            + d.where([*d.claimable(spec), f"{column} IS NOT DISTINCT FROM {counts}.{k}"])
            + f" ORDER BY {order} LIMIT {counts}.{m} FOR UPDATE SKIP LOCKED) AS {got} "
            f"ORDER BY {d.order_by(spec, prefix=got + '.')}"
        )
        return "WITH " + join(", ", exprs) + " " + rows
    rows = (
        f"SELECT {d.select_list(spec)} FROM {t}"
        + claimable
        + f" ORDER BY {order} LIMIT "
        + overall
        + " FOR UPDATE SKIP LOCKED"
    )
    return "WITH " + join(", ", exprs) + " " + rows


def _try_slot(d: Dialect, spec: TableSpec, key: str, count: int) -> Sql:
    """The first of ``key``'s ``count`` slots a try-lock takes (none: all are held)."""
    g, i = d.internal(spec, "__g"), d.quoted(d.internal(spec, "__i"))
    return (
        f"(SELECT {g}.{i} FROM generate_series(0, {count - 1}) AS {g}({i}) "
        "WHERE pg_try_advisory_xact_lock(" + slot_name(d, spec, key, f"{g}.{i}") + ") LIMIT 1)"
    )


def limited_head_claim(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Sql:
    """A FIFO group's claim under the guard: its head, every column, locked while a slot of its
    key (and of the queue) was had."""
    t = d.table(spec)
    head, got = d.internal(spec, "__head"), d.internal(spec, "__got")
    whole, slot = d.internal(spec, "__whole"), d.internal(spec, "__slot")
    k = d.quoted(d.internal(spec, "__k"))
    key = "NULL" if limits.key is None else d.column(limits.key)
    exprs: list[Frag] = [
        f"{head} AS MATERIALIZED (SELECT {key} AS {k} FROM {t}" + d.where(d.fifo_head(spec)) + ")"
    ]
    source = head
    if limits.whole is not None:
        exprs.append(
            f"{whole} AS MATERIALIZED (SELECT 1 FROM {head} CROSS JOIN LATERAL "
            + _try_slot(d, spec, WHOLE, limits.whole)
            + f" AS {got})"
        )
        source = whole
    if limits.key is not None:
        assert limits.per_key is not None
        # Taken only once the queue's slot was had: the key's is tried for that head alone.
        joined = head if source == head else f"{head} CROSS JOIN {whole}"
        exprs.append(
            f"{slot} AS MATERIALIZED (SELECT 1 FROM {joined} CROSS JOIN LATERAL "
            + _try_slot(d, spec, f"quote_nullable(CAST({head}.{k} AS text))", limits.per_key)
            + f" AS {got})"
        )
        source = slot
    return (
        "WITH "
        + join(", ", exprs)
        + f" SELECT {d.select_list(spec)} FROM {t}"
        + d.where([*d.fifo_head(spec), f"EXISTS (SELECT 1 FROM {source})"])
        + " FOR UPDATE SKIP LOCKED"
    )
