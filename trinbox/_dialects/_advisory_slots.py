"""The advisory form's slots (``InboxQueue.limit`` on an ``Inbox[Advisory]`` table), PostgreSQL's
and MySQL's: N session locks per limit key, taken beside the row's key lock on the session that
holds it, with try-locks that never wait.

A row in work holds, beside the session lock of its advisory key, one slot of its limit key
(and one of the whole queue's, under a whole limit): a session lock of the same session
(PostgreSQL ``pg_try_advisory_lock`` of the row lock form's slot names, ``_slots.slot_name``;
MySQL ``GET_LOCK(name, 0)`` of ``trinbox_slot:<sha1>``, the SHA-1 of the database, the table,
the group, the key's weight and the index, so that a key of any length fits the 64 characters:
the row lock form's names on MySQL). The
settlement lets them go with the key (one unlock); a session whose unlock is not confirmed is
closed, which frees them all, and so does a dead connection or a killed process.

Three statements, with one protocol on both servers:

- **candidates** (the claim's select): the first due rows whose key no session holds and whose
  limit key (and the queue) has a slot free, each with its key, its slot key (the text its slot
  names are made of) and how many slots of its limit key and of the queue were free as the
  select ran (``NULL``: no such limit), so that a claim tries no more of a key's rows than it
  has free slots;
- **key slots** (run after the key's lock, in the take's round trip): the first free slot of
  the slot key and of the queue, each tried in order without waiting, all or nothing: when one
  is missing, it lets go of what it took and of the key too, so the session holds nothing and
  the claim goes on to its next candidate. One row: taken (1/0), the slot's index, the whole
  slot's index;
- **unlock**: the key, the slot and the whole slot let go; 1 when the session held each.
"""

from __future__ import annotations

from .._declare._limits import ClaimLimits
from .._declare._spec import TableSpec
from ._base import Dialect
from ._limited import CANDIDATES
from ._session_slots import key_text
from ._session_slots import slot_name as my_slot_name
from ._slots import WHOLE, slot_name
from ._statement import Frag, P, Sql, join

__all__ = [
    "sqlite_candidates",
    "mysql_candidates",
    "mysql_key_slots",
    "mysql_unlock",
    "postgres_candidates",
    "postgres_key_slots",
    "postgres_unlock",
]


def _names(d: Dialect, spec: TableSpec, *names: str) -> list[str]:
    return [d.quoted(d.internal(spec, f"__{n}")) for n in names]


# -- PostgreSQL --------------------------------------------------------------------------------


def _pg_key(d: Dialect, limits: ClaimLimits) -> str:
    """A row's slot key: its limit key's text, quoted (or NULL), never bare; '' without one."""
    if limits.key is None:
        return "''"
    return f"quote_nullable(CAST({d.column(limits.key)} AS text))"


def _pg_free(d: Dialect, spec: TableSpec, held: str, h: str, key: Frag, count: int) -> Sql:
    """How many of ``key``'s ``count`` slots no session holds (``held``: the held locks)."""
    g, i = _names(d, spec, "g", "i")
    return (
        f"(SELECT {count} - COUNT(*) FROM generate_series(0, {count - 1}) AS {g}({i}) WHERE "
        + slot_name(d, spec, key, f"{g}.{i}")
        + f" IN (SELECT {h} FROM {held}))"
    )


def postgres_candidates(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Sql:
    """The first due rows in claim order whose key no session holds and whose limit key and
    queue have a free slot, at most ``CANDIDATES`` of them, then of each limit key no more
    rows than it has free slots: id, key, slot key, free slots of the key, free whole
    slots."""
    t = d.table(spec)
    ident = d.column(spec.id)
    lock, sk, free, whole_free, h, place, rank = _names(
        d, spec, "lock", "slot_key", "free", "whole_free", "h", "place", "rank"
    )
    held, window = d.internal(spec, "__held"), d.internal(spec, "__window")
    candidates, ranked = d.internal(spec, "__candidates"), d.internal(spec, "__ranked")
    f, w = d.internal(spec, "__f"), d.internal(spec, "__w")
    order = d.order_by(spec)
    inner = (
        f"SELECT {ident}, {d.key_expression(spec)} AS {lock}, {_pg_key(d, limits)} AS {sk}, "
        f"ROW_NUMBER() OVER (ORDER BY {order}) AS {place} FROM {t}"
        + d.where(d.claimable(spec))
        + f" ORDER BY {order} OFFSET 0"
    )
    per_key = (
        _pg_free(d, spec, held, h, f"{candidates}.{sk}", limits.per_key)
        if limits.key is not None and limits.per_key is not None
        else Sql("CAST(NULL AS bigint)")
    )
    whole = (
        _pg_free(d, spec, held, h, WHOLE, limits.whole)
        if limits.whole is not None
        else Sql("CAST(NULL AS bigint)")
    )
    conds: list[Frag] = []
    if limits.whole is not None:
        conds.append(f"{w}.{whole_free} > 0")
    if limits.per_key is not None:
        conds.append(f"{f}.{free} > 0")
    conds.append(f"pg_try_advisory_xact_lock_shared(hashtextextended({candidates}.{lock}, 0))")
    cols = f"{ident}, {lock}, {sk}, {free}, {whole_free}"
    return (
        f"WITH {held} AS MATERIALIZED (SELECT (l.classid::bigint << 32) | l.objid::bigint AS {h} "
        "FROM pg_locks AS l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND "
        "l.database = (SELECT oid FROM pg_database WHERE datname = current_database())), "
        f"{window} AS MATERIALIZED (SELECT {candidates}.{ident}, {candidates}.{lock}, "
        f"{candidates}.{sk}, {f}.{free}, {w}.{whole_free}, {candidates}.{place} FROM ("
        + inner
        + f") AS {candidates} CROSS JOIN LATERAL (SELECT "
        + per_key
        + f" AS {free}) AS {f} CROSS JOIN (SELECT "
        + whole
        + f" AS {whole_free}) AS {w}"
        + d.where(conds)
        + f" LIMIT {CANDIDATES}) SELECT {cols} FROM (SELECT {window}.*, ROW_NUMBER() OVER "
        f"(PARTITION BY {sk} ORDER BY {place}) AS {rank} FROM {window}) AS {ranked} WHERE "
        f"{free} IS NULL OR {rank} <= {free} ORDER BY {place} LIMIT " + P("limit")
    )


def postgres_key_slots(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Sql:
    """Take the first free slot of the slot key, then of the queue, on this session; all or
    nothing (the key's lock let go too): taken, slot, whole slot."""
    g, i = _names(d, spec, "g", "i")
    s, w = d.internal(spec, "__s"), d.internal(spec, "__w")
    sk = "CAST(" + P("slot_key") + " AS text)"
    key = "hashtextextended(" + P("key") + ", 0)"
    parts: list[Frag] = []
    taken: list[str] = []
    if limits.per_key is not None:
        parts.append(
            f"{s} AS MATERIALIZED (SELECT (SELECT {g}.{i} FROM generate_series(0, "
            f"{limits.per_key - 1}) AS {g}({i}) WHERE pg_try_advisory_lock("
            + slot_name(d, spec, sk, f"{g}.{i}")
            + f") LIMIT 1) AS {i})"
        )
        taken.append(f"{s}.{i}")
    if limits.whole is not None:
        # Tried only once the key's slot is had (a scalar read of the CTE orders them).
        gate = f"(SELECT {i} FROM {s}) IS NOT NULL" if limits.per_key is not None else "true"
        parts.append(
            f"{w} AS MATERIALIZED (SELECT (SELECT {g}.{i} FROM generate_series(0, "
            f"{limits.whole - 1}) AS {g}({i}) WHERE CASE WHEN {gate} THEN pg_try_advisory_lock("
            + slot_name(d, spec, WHOLE, f"{g}.{i}")
            + f") ELSE false END LIMIT 1) AS {i})"
        )
        taken.append(f"{w}.{i}")
    got = " AND ".join(f"{x} IS NOT NULL" for x in taken)
    slot = f"{s}.{i}" if limits.per_key is not None else "CAST(NULL AS integer)"
    whole = f"{w}.{i}" if limits.whole is not None else "CAST(NULL AS integer)"
    undo: list[Frag] = [f"CASE WHEN NOT ({got}) THEN pg_advisory_unlock(" + key + ") END"]
    if limits.per_key is not None and limits.whole is not None:
        undo.append(
            f"CASE WHEN {s}.{i} IS NOT NULL AND {w}.{i} IS NULL THEN pg_advisory_unlock("
            + slot_name(d, spec, sk, f"{s}.{i}")
            + ") END"
        )
    sources = ", ".join(
        cte for cte, on in ((s, limits.per_key), (w, limits.whole)) if on is not None
    )
    return (
        "WITH "
        + join(", ", parts)
        + f" SELECT CAST(({got})::int AS bigint), {slot}, {whole}, "
        + join(", ", undo)
        + f" FROM {sources}"
    )


def postgres_unlock(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Sql:
    """Let go of the key and its slots: 1 when this session held each of them."""
    unlocks: list[Frag] = ["pg_advisory_unlock(hashtextextended(" + P("key") + ", 0))::int"]
    if limits.per_key is not None:
        unlocks.append(
            "pg_advisory_unlock("
            + slot_name(
                d, spec, "CAST(" + P("slot_key") + " AS text)", "CAST(" + P("slot") + " AS integer)"
            )
            + ")::int"
        )
    if limits.whole is not None:
        unlocks.append(
            "pg_advisory_unlock("
            + slot_name(d, spec, WHOLE, "CAST(" + P("whole") + " AS integer)")
            + ")::int"
        )
    return "SELECT CAST((" + join(" + ", unlocks) + f") = {len(unlocks)} AS int)::bigint"


# -- MySQL and MariaDB -------------------------------------------------------------------------


def mysql_candidates(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Sql:
    """As ``postgres_candidates``: ``IS_USED_LOCK`` says which slots are held, over the
    numbers below the larger limit (a recursive CTE)."""
    t = d.table(spec)
    name = d.key_expression(spec)  # the key's GET_LOCK name
    lock, sk, free, whole_free, i, place, rank = _names(
        d, spec, "lock", "slot_key", "free", "whole_free", "i", "place", "rank"
    )
    n, window, ranked = (d.internal(spec, x) for x in ("__n", "__window", "__ranked"))
    top = max(x for x in (limits.per_key, limits.whole) if x is not None)
    key: Frag = key_text(d.column(limits.key)) if limits.key is not None else "''"

    def held(key: Frag, count: int) -> Sql:
        return (
            f"(SELECT {count} - COUNT(*) FROM {n} WHERE {n}.{i} < {count} AND IS_USED_LOCK("
            + my_slot_name(d, spec, key, f"{n}.{i}")
            + ") IS NOT NULL)"
        )

    per_key: Frag = (
        held(key, limits.per_key)
        if limits.key is not None and limits.per_key is not None
        else "CAST(NULL AS SIGNED)"
    )
    whole: Frag = held(WHOLE, limits.whole) if limits.whole is not None else "CAST(NULL AS SIGNED)"
    having = [f"{x} > 0" for x, on in ((free, limits.per_key), (whole_free, limits.whole)) if on]
    order = d.order_by(spec)
    cols = f"{d.column(spec.id)}, {lock}, {sk}, {free}, {whole_free}"
    return (
        f"WITH RECURSIVE {n} ({i}) AS (SELECT 0 UNION ALL SELECT {i} + 1 FROM {n} WHERE {i} < "
        f"{top - 1}), {window} AS (SELECT {d.column(spec.id)}, {name} AS {lock}, "
        + key
        + f" AS {sk}, "
        + per_key
        + f" AS {free}, "
        + whole
        + f" AS {whole_free}, ROW_NUMBER() OVER (ORDER BY {order}) AS {place} FROM {t}"
        + d.where([*d.claimable(spec), f"IS_USED_LOCK({name}) IS NULL"])
        + " HAVING "
        + " AND ".join(having)
        + f" ORDER BY {order} LIMIT {CANDIDATES}) SELECT {cols} FROM (SELECT {window}.*, "
        f"ROW_NUMBER() OVER (PARTITION BY {sk} ORDER BY {place}) AS {rank} FROM {window}) "
        f"AS {ranked} WHERE {free} IS NULL OR {rank} <= {free} ORDER BY {place} LIMIT " + P("limit")
    )


def mysql_key_slots(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Sql:
    """As ``postgres_key_slots``: each slot series is tried in order by a recursive CTE that
    stops at the first ``GET_LOCK(name, 0)`` it gets; a derived table with a LIMIT (never
    merged) holds the indexes, from which the undo lets go of what a partial take holds."""
    i, got = _names(d, spec, "i", "got")
    s, w, r = d.internal(spec, "__s"), d.internal(spec, "__w"), d.internal(spec, "__r")
    slot_base = P("slot_key")
    ctes: list[Frag] = []

    def tries(cte: str, key: Frag, count: int) -> Sql:
        return (
            f"{cte} ({i}, {got}) AS (SELECT 0, COALESCE(GET_LOCK("
            + my_slot_name(d, spec, key, "0")
            + f", 0), 0) UNION ALL SELECT {i} + 1, COALESCE(GET_LOCK("
            + my_slot_name(d, spec, key, f"{i} + 1")
            + f", 0), 0) FROM {cte} WHERE {got} = 0 AND {i} < {count - 1})"
        )

    picks: list[Frag] = []
    if limits.per_key is not None:
        ctes.append(tries(s, slot_base, limits.per_key))
        picks.append(f"(SELECT {i} FROM {s} WHERE {got} = 1) AS {s}")
    else:
        picks.append(f"CAST(NULL AS SIGNED) AS {s}")
    if limits.whole is not None:
        ctes.append(tries(w, WHOLE, limits.whole))
        picks.append(f"(SELECT {i} FROM {w} WHERE {got} = 1) AS {w}")
    else:
        picks.append(f"CAST(NULL AS SIGNED) AS {w}")
    missing = " OR ".join(
        f"{r}.{x} IS NULL" for x, on in ((s, limits.per_key), (w, limits.whole)) if on
    )
    undo: list[Frag] = ["COALESCE(RELEASE_LOCK(" + P("key") + "), 0)"]
    if limits.per_key is not None:
        undo.append(
            f"IF({r}.{s} IS NULL, 0, COALESCE(RELEASE_LOCK("
            + my_slot_name(d, spec, slot_base, f"{r}.{s}")
            + "), 0))"
        )
    if limits.whole is not None:
        undo.append(
            f"IF({r}.{w} IS NULL, 0, COALESCE(RELEASE_LOCK("
            + my_slot_name(d, spec, WHOLE, f"{r}.{w}")
            + "), 0))"
        )
    return (
        "WITH RECURSIVE "
        + join(", ", ctes)
        + f" SELECT CAST(NOT ({missing}) AS SIGNED), {r}.{s}, {r}.{w}, CASE WHEN {missing} THEN "
        + join(" + ", undo)
        + " END FROM (SELECT "
        + join(", ", picks)
        + f" LIMIT 1) AS {r}"
    )


def mysql_unlock(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Sql:
    """As ``postgres_unlock``: every ``RELEASE_LOCK`` runs (a sum does not stop early)."""
    unlocks: list[Frag] = ["COALESCE(RELEASE_LOCK(" + P("key") + "), 0)"]
    if limits.per_key is not None:
        unlocks.append(
            "COALESCE(RELEASE_LOCK(" + my_slot_name(d, spec, P("slot_key"), P("slot")) + "), 0)"
        )
    if limits.whole is not None:
        unlocks.append(
            "COALESCE(RELEASE_LOCK(" + my_slot_name(d, spec, WHOLE, P("whole")) + "), 0)"
        )
    return "SELECT CAST((" + join(" + ", unlocks) + f") = {len(unlocks)} AS SIGNED)"


# -- SQLite ------------------------------------------------------------------------------------


def sqlite_candidates(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Sql:
    """SQLite has no session locks: its process keeps each key's slot key beside the key in
    work (trinbox._holders.sqlite_key, ``SlotRule``) and binds how many rows of each slot key
    are in work as one JSON object (``counts``; a slot key is ``quote(<key>)``: NULL, or the
    value written as a literal). The first ``CANDIDATES`` due rows past the keys in work
    (``held``) whose limit key has a free slot, then each key's ranked no further than its
    free slots: id, key, slot key."""
    t = d.table(spec)
    ident = d.column(spec.id)
    lock, sk, free, rank = _names(d, spec, "lock", "slot_key", "free", "rank")
    window, ranked = d.internal(spec, "__window"), d.internal(spec, "__ranked")
    c = d.quoted(d.internal(spec, "__c"))
    key = f"quote({t}.{d.column(limits.key)})" if limits.key is not None else "''"
    if limits.key is not None and limits.per_key is not None:
        count: Sql = (
            f"({limits.per_key} - COALESCE((SELECT {c}.value FROM json_each("
            + P("counts")
            + f") AS {c} WHERE {c}.key = {key}), 0))"
        )
    else:
        count = Sql("NULL")
    key_expr = d.key_expression(spec)
    conds: list[Frag] = [
        *d.claimable(spec, prefix=f"{t}."),
        f"{key_expr} NOT IN (SELECT value FROM json_each(" + P("held") + "))",
    ]
    if limits.key is not None and limits.per_key is not None:
        conds.append(count + " > 0")
    # The claim order's columns, carried out of the window to order the ranked rows by.
    ordered = [c for c in (spec.priority, spec.retry_after) if c is not None]
    carried = "".join(f", {t}.{d.column(col)}" for col in ordered)
    return (
        f"SELECT {ident}, {lock}, {sk} FROM (SELECT {window}.*, ROW_NUMBER() OVER (PARTITION "
        f"BY {sk} ORDER BY {d.order_by(spec, prefix=window + '.')}) AS {rank} FROM (SELECT "
        f"{t}.{ident}{carried}, {key_expr} AS {lock}, {key} AS {sk}, "
        + count
        + f" AS {free} FROM {t}"
        + d.where(conds)
        + f" ORDER BY {d.order_by(spec, prefix=f'{t}.')} LIMIT {CANDIDATES}) AS {window}) AS "
        f"{ranked} WHERE {free} IS NULL OR {rank} <= {free} ORDER BY "
        f"{d.order_by(spec, prefix=ranked + '.')} LIMIT " + P("limit")
    )
