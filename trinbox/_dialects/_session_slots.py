"""The limited row lock claim's slots (``InboxQueue.limit`` on an ``Inbox[RowLock]`` table),
MySQL's and MariaDB's: N named session locks per key, taken with ``GET_LOCK(name, 0)``, which
never waits.

A row in work holds one slot of its key (and one of the whole queue's, under a whole limit):
the named lock ``trinbox_slot:`` and the SHA-1 in hex of the database, the table, the
subscription's group, the key and the slot's index below N, so that a key of any length and
any characters names a lock within the server's 64 characters. A key is written as the weight
of its text, trailing spaces cut, in its column's collation (``WEIGHT_STRING``: keys the column
compares equal name one slot), NULL as the bare word ``NULL``; the whole queue's slots stand a
bare ``*`` there, which no key writes.

The claim's connection holds them, not its transaction: they outlive a commit, so the form
lets go of them when the claim's transaction has ended (``release``, ``RELEASE_ALL_LOCKS()``
before the connection goes back to its pool; a connection whose release is not confirmed is
abandoned), and a claim that holds them does not chain the next claim into its settlement. A
closed or dead connection, a crashed or killed process ends the session, and the server lets
them go with it. Nothing counts; nothing is kept to clean up.

Three round trips, the first with the claim's ``BEGIN``:

- ``take`` (the plan's ``claim``, the last statement's rows the keys): over the due rows per
  key, their count and the first one's place in claim order (``due``), each key's free slots
  (``IS_FREE_LOCK``, so the slots others hold are not tried), as many as its rows no other
  claim holds, LEAST(due, N) less the slots held (``fits``), the keys in claim order and no
  more slots than the claim's limit in all; a ``GET_LOCK`` of each, counted per key (a slot
  another claim took since it was read free is not taken: the form then reports the claim
  not exhausted, and the next claim tries the key's other slots at once). A key
  with no free slot takes nothing and the keys behind it fill the claim: it is skipped, not
  waited on. Under a whole limit a first statement takes the queue's free slots, as many as
  the claim can fill, and the keys' slots are then as many as the whole slots this session
  holds (``IS_USED_LOCK``);
- ``rows``: each key's first N due ids in claim order (a consistent read, one statement per
  key in one round trip): the rows other claims hold of it are fewer than N less the slots
  this claim took, so as many free rows are among them;
- ``lock``: as many of each key's candidates as it took slots, by id, ``FOR UPDATE SKIP
  LOCKED`` (a scan filtered by key would lock the other keys' rows it reads, InnoDB keeping
  them to the transaction's end), one round trip; a candidate another claim holds is
  skipped and the key's next candidate tried in another round trip.

It costs those three round trips (more when candidates were held by other claims),
``IS_FREE_LOCK`` per due key and slot index, and a ``GET_LOCK`` per slot taken. The lock
functions make it exact: no two sessions hold one slot, and a slot is taken only when its
``GET_LOCK`` returned 1. A slot taken for a row another claim locked in between stays held
until the claim's transaction ends: fewer rows in work, never more.
"""

from __future__ import annotations

from .._declare._limits import ClaimLimits
from .._declare._spec import TableSpec
from ._base import Dialect
from ._statement import Frag, P, Sql, join

__all__ = ["RELEASE", "slot_lock", "slot_name", "slot_rows", "slot_take"]

# What stands in a whole-queue slot's name where a key's slot has its key: a key is written
# as a weight in hex after a ``w``, or as the bare word NULL, never as ``*``.
WHOLE = "'*'"

RELEASE = "SELECT RELEASE_ALL_LOCKS()"
"""Every session lock of the connection: the claim's slots (nothing else holds one there)."""


def key_text(key: str) -> str:
    """``key`` (a key column's value) as it names its slots: the weight of its text in the
    column's collation, trailing spaces cut (keys the column compares equal, 'ab ' and 'AB'
    under a PAD SPACE case-insensitive one, must name the same slots whichever of them a
    claim reads; under a NO PAD collation keys that differ by trailing spaces only then share
    their slots: fewer rows in work, never more), or ``NULL``."""
    return f"COALESCE(CONCAT('w', HEX(WEIGHT_STRING(RTRIM({key})))), 'NULL')"


def slot_name(d: Dialect, spec: TableSpec, key: Frag, index: Frag) -> Sql:
    """The lock name of slot ``index`` of ``key`` (a text expression, ``key_text`` or
    ``WHOLE``) on ``spec``'s table, of the subscription's group where the table has groups:
    the row lock form's slots and the advisory form's (``_advisory_slots.py``)."""
    database = "DATABASE()" if spec.schema is None else d.literal(spec.schema)
    parts: list[Frag] = [f"LOWER({database})", d.literal(spec.table)]
    if spec.group is not None:
        parts.append("QUOTE(CAST(" + P("group") + " AS CHAR))")
    parts += [key, "CAST(" + index + " AS CHAR)"]
    return "CONCAT('trinbox_slot:', SHA1(CONCAT_WS(':', " + join(", ", parts) + ")))"


def indexes(count: int, name: str, alias: str) -> str:
    """A table of one column ``name`` (quoted), the integers 0 to ``count - 1``, written out
    (no recursion, whose depth the servers bound): a cross join of digit tables ``alias0``,
    ``alias1``... (``alias`` a name clear of the table's)."""
    digits = " UNION ALL ".join(f"SELECT {n} AS {name}" for n in range(10))
    width = len(str(max(count - 1, 0)))
    tables = [f"({digits}) AS {alias}{p}" for p in range(width)]
    value = " + ".join(f"{alias}{p}.{name} * {10**p}" for p in range(width))
    return (
        f"(SELECT {name} FROM (SELECT {value} AS {name} FROM {' CROSS JOIN '.join(tables)}) "
        f"AS {alias} WHERE {name} < {count})"
    )


def slot_take(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> tuple[Sql, ...]:
    """The claim's statements after its begin, each returning rows of a key, the slots it
    tried and the slots it took (a whole limit's: one row, no key); the last one's are the
    keys whose rows the claim locks, the first key in claim order first."""
    t = d.table(spec)
    n = {
        x: d.internal(spec, f"__{x}")
        for x in ("due", "free", "ranked", "fits", "ordered", "digits")
    }
    k, count, first, i, r, c, o, m, g, w = (
        d.quoted(d.internal(spec, f"__{x}"))
        for x in ("k", "n", "first", "i", "r", "c", "o", "m", "g", "w")
    )
    place = d.quoted(d.internal(spec, "__place"))
    row = d.internal(spec, "__row")
    claimable = d.where(d.claimable(spec))
    whole_slots = "" if limits.whole is None else indexes(limits.whole, w, n["digits"])
    taken: list[Sql] = []
    overall: Sql = P("limit")
    if limits.whole is not None:
        mine = (
            f"(SELECT COUNT(*) FROM {whole_slots} AS {g} WHERE IS_USED_LOCK("
            + slot_name(d, spec, WHOLE, f"{g}.{w}")
            + ") = CONNECTION_ID())"
        )
        overall = "LEAST(" + P("limit") + ", " + mine + ")"
    ctes = Sql()
    if limits.key is not None:
        assert limits.per_key is not None
        column = d.column(limits.key)
        per_key = limits.per_key
        ctes = (
            f"WITH {n['due']} AS (SELECT {k}, COUNT(*) AS {count}, MIN({place}) AS {first} "
            f"FROM (SELECT {column} AS {k}, ROW_NUMBER() OVER (ORDER BY {d.order_by(spec)}) "
            f"AS {place} FROM {t}" + claimable + f") AS {row} GROUP BY {k}), "
            f"{n['free']} AS (SELECT {n['due']}.{k}, {g}.{i}, {n['due']}.{first}, "
            f"{n['due']}.{count} FROM {n['due']} CROSS JOIN "
            f"{indexes(per_key, i, n['digits'])} AS {g} "
            "WHERE IS_FREE_LOCK("
            + slot_name(d, spec, key_text(f"{n['due']}.{k}"), f"{g}.{i}")
            + ") = 1), "
            f"{n['ranked']} AS (SELECT {k}, {i}, {first}, {count}, ROW_NUMBER() OVER "
            f"(PARTITION BY {k} ORDER BY {i}) AS {r}, COUNT(*) OVER (PARTITION BY {k}) AS {c} "
            f"FROM {n['free']}), "
            # A key's rows no other claim holds: LEAST(due, N) less the slots held.
            f"{n['fits']} AS (SELECT {k}, {i}, {first} FROM {n['ranked']} "
            f"WHERE {r} <= LEAST({count}, {per_key}) - ({per_key} - {c}))"
        )
        fillable: Sql = Sql(f"(SELECT COUNT(*) FROM {n['fits']})")
    else:
        fillable = Sql(f"(SELECT COUNT(*) FROM {t}" + claimable + ")")
    if limits.whole is not None:
        whole_free = (
            f"(SELECT {g}.{w}, ROW_NUMBER() OVER (ORDER BY {g}.{w}) AS {r}, COUNT(*) OVER () "
            f"AS {c} FROM {whole_slots} AS {g} WHERE IS_FREE_LOCK("
            + slot_name(d, spec, WHOLE, f"{g}.{w}")
            + ") = 1)"
        )
        if limits.key is None:
            # The due rows no other claim holds: each row in work holds a whole slot, and
            # the slots held are the whole ones less the free ones.
            fillable = fillable + f" - ({limits.whole} - {row}.{c})"
        fit = "LEAST(" + P("limit") + ", " + fillable + ")"
        take_whole = (
            ctes
            + ("" if limits.key is None else " ")
            + f"SELECT NULL AS {k}, COUNT(*) AS {count}, COALESCE(SUM(GET_LOCK("
            + slot_name(d, spec, WHOLE, f"{row}.{w}")
            + f", 0)), 0) AS {m} FROM "
            + whole_free
            + f" AS {row} WHERE {row}.{r} <= "
            + fit
        )
        taken.append(take_whole)
    if limits.key is not None:
        take_keys = (
            ctes
            + f", {n['ordered']} AS (SELECT {k}, {i}, ROW_NUMBER() OVER (ORDER BY {first}, {i}) "
            f"AS {o} FROM {n['fits']}) "
            f"SELECT {k}, COUNT(*) AS {count}, COALESCE(SUM(GET_LOCK("
            + slot_name(d, spec, key_text(k), i)
            + f", 0)), 0) AS {m} FROM {n['ordered']} WHERE {o} <= "
            + overall
            + f" GROUP BY {k} ORDER BY MIN({o})"
        )
        taken.append(take_keys)
    return tuple(taken)


def slot_rows(d: Dialect, spec: TableSpec, limits: ClaimLimits) -> Sql:
    """The first due ids of one key (``key``; of the queue, a whole limit alone) in claim
    order, a consistent read: as many as its slots, which bound the rows other claims hold,
    so that the ones this claim took slots for are among them."""
    conds = d.claimable(spec)
    if limits.key is not None:
        conds = [*conds, d.column(limits.key) + f" {d.null_safe_equal} " + P("key")]
    bound = limits.per_key if limits.key is not None else limits.whole
    return (
        f"SELECT {d.column(spec.id)} FROM {d.table(spec)}"
        + d.where(conds)
        + f" ORDER BY {d.order_by(spec)} LIMIT {bound}"
    )


def slot_lock(d: Dialect, spec: TableSpec) -> Sql:
    """One candidate row by id (``id``), every column, while it is due: ``FOR UPDATE SKIP
    LOCKED`` by its primary key, which locks that row only (a scan filtered by key would lock
    the other keys' rows it reads, InnoDB keeping them to the transaction's end)."""
    return (
        f"SELECT {d.select_list(spec)} FROM {d.table(spec)}"
        + d.where([d.column(spec.id) + " = " + P("id"), *d.claimable(spec)])
        + " FOR UPDATE SKIP LOCKED"
    )
