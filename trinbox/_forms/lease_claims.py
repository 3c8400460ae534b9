"""The lease claims that take more than one statement: MySQL's locking select and its
per-row stamps, a FIFO group's claim on a server, its guard first, and a queue's own claim.
Each runs in one transaction (READ COMMITTED on MySQL) on a connection the lease form lends,
and returns what it took.
Over every group of a FIFO table on a server, the groups whose head is due are read first,
and each group's head is claimed so, in one transaction for them all.
A limited claim (``InboxQueue.limit``) runs behind the lock that serializes the table's
limited claims."""

from __future__ import annotations

from collections.abc import Sequence

from .._bounds import cleanup_scope
from .._dialects._statement import Statement
from .._drivers._base import Connection, Op, Record
from .._holders._base import Delivery, FormContext, held
from .._holders.connections import rollback_quietly
from ..errors import TrinboxError
from .custom import bare_delivery, claimed_ids, delivery_of, rows_of
from .heads import due_groups

__all__ = [
    "GROUP_SAVEPOINT",
    "custom_lease_claim",
    "guarded_claim",
    "heads_claim",
    "limited_claim",
    "rated_claim",
    "select_and_stamp",
]

# Over every group of a FIFO table, each group's claim runs behind this savepoint.
GROUP_SAVEPOINT = "trinbox_group"


async def select_and_stamp(
    ctx: FormContext, conn: Connection, values: dict[str, object]
) -> list[Record]:
    """MySQL: select with SKIP LOCKED, stamp each row while its lease is still free, and
    commit; a row the stamp did not change is left out of the claim. Two round trips: the
    begin and the select, then every stamp and the commit."""
    select, stamp = ctx.statements.claim
    try:
        opened = await conn.script(
            [
                Op("begin", ctx.statements.claim_begin.sql),
                Op("fetch", select.sql, select.bind(values)),
            ]
        )
        records = opened[1]
        assert isinstance(records, list)
        if not records:
            await conn.commit()
            return []
        return await _stamp(ctx, conn, stamp, values, records)
    except BaseException:
        await rollback_quietly(conn)
        raise


async def _stamp(
    ctx: FormContext,
    conn: Connection,
    stamp: Statement,
    values: dict[str, object],
    records: list[Record],
    *,
    commit: bool = True,
) -> list[Record]:
    """MySQL: stamp each selected row (conditioned on its lease being free still) and
    commit (unless ``commit`` is false: the caller commits); a row the stamp did not change
    drops out of the claim."""
    id_index = [c.role for c in ctx.spec.columns].index("id")
    stamps = [
        Op("execute", stamp.sql, stamp.bind(_stamp_values(ctx, values, record, id_index)))
        for record in records
    ]
    stamped = await conn.script([*stamps, *([Op("commit")] if commit else [])])
    return [record for record, n in zip(records, stamped, strict=False) if n == 1]


def _advances(ctx: FormContext, values: dict[str, object], records: list[Record]) -> list[Op]:
    """A rated claim's upserts of its rates' rows (``_rated.py``): per key it took, from one
    of its rows, with the number it took; for the whole queue, with all of them."""
    plan = ctx.statements
    ops: list[Op] = []
    if not records:
        return ops
    if plan.rate_advance is not None:
        assert plan.rate_key_index is not None
        id_index = [c.role for c in ctx.spec.columns].index("id")
        keys: dict[object, tuple[object, int]] = {}
        for record in records:
            key = record[plan.rate_key_index]
            ident, starts = keys.get(key, (record[id_index], 0))
            keys[key] = (ident, starts + 1)
        advance = plan.rate_advance
        ops += [
            Op("execute", advance.sql, advance.bind({**values, "id": ident, "starts": starts}))
            for ident, starts in keys.values()
        ]
    if plan.whole_rate_advance is not None:
        whole = plan.whole_rate_advance
        ops.append(Op("execute", whole.sql, whole.bind({**values, "starts": len(records)})))
    return ops


async def rated_claim(
    ctx: FormContext, conn: Connection, values: dict[str, object]
) -> list[Record]:
    """A limited claim under a rate: as ``limited_claim`` (behind the table's limit lock on
    a server, SQLite's one writer), then, before its commit, the upserts that advance the
    rates of what it took (``_advances``), so no other claim spends the same starts. Two
    round trips on PostgreSQL and SQLite: the claim, then the upserts and the commit."""
    plan = ctx.statements
    lock, unlock = plan.limit_lock, plan.limit_unlock
    values = {**values, "rate_group": "" if values["group"] is None else str(values["group"])}
    if unlock is None:
        (claim,) = plan.claim
        locked = [] if lock is None else [Op("execute", lock.sql, lock.bind(values))]
        try:
            done = await conn.script(
                [
                    Op("begin", plan.claim_begin.sql),
                    *locked,
                    Op("fetch", claim.sql, claim.bind(values)),
                ]
            )
            records = done[-1]
            assert isinstance(records, list)
            await conn.script([*_advances(ctx, values, records), Op("commit")])
        except BaseException:
            await rollback_quietly(conn)
            raise
        return records
    assert lock is not None
    released = False
    try:
        if not held(await conn.fetch(lock.sql, lock.bind(values))):
            released = True  # the wait ran out: nothing is held
            return []
        try:
            records = await _rated_select_and_stamp(ctx, conn, values)
        finally:
            with cleanup_scope():
                try:
                    await conn.fetch(unlock.sql, unlock.bind(values))
                    released = True
                except TrinboxError:
                    pass  # the claim stands; the abandoned session frees the lock
        return records
    finally:
        if not released:
            ctx.pool.abandon(conn)


async def _rated_select_and_stamp(
    ctx: FormContext, conn: Connection, values: dict[str, object]
) -> list[Record]:
    """MySQL under a rate: ``select_and_stamp``, then the rates' upserts, then the commit."""
    select, stamp = ctx.statements.claim
    try:
        opened = await conn.script(
            [
                Op("begin", ctx.statements.claim_begin.sql),
                Op("fetch", select.sql, select.bind(values)),
            ]
        )
        records = opened[1]
        assert isinstance(records, list)
        if records:
            records = await _stamp(ctx, conn, stamp, values, records, commit=False)
        await conn.script([*_advances(ctx, values, records), Op("commit")])
        return records
    except BaseException:
        await rollback_quietly(conn)
        raise


async def limited_claim(
    ctx: FormContext, conn: Connection, values: dict[str, object]
) -> list[Record]:
    """A limited claim on a server. PostgreSQL, one round trip: the READ COMMITTED
    transaction, its lock on the table's limited claims (waited for), the claim (whose
    snapshot, taken after the lock, sees every claim committed before it) and the commit,
    which lets the lock go. MySQL: the session lock (waited for a bounded time; not had,
    the claim takes nothing), the select and stamps, and the lock let go; a claim that fails
    once it asked for the lock abandons its connection, whose session's end frees the lock,
    so no pooled connection keeps it (a claim whose stamps committed stands, whether or not
    its release went through). On a FIFO table the claim behind the lock is the group's (its
    guard, then its head), or every group's (``heads_claim``; MySQL stamps each head before
    the next group's claim counts the live leases)."""
    plan = ctx.statements
    lock, unlock = plan.limit_lock, plan.limit_unlock
    assert lock is not None
    if unlock is None:
        locked = [Op("execute", lock.sql, lock.bind(values))]
        if plan.heads is not None:
            return await heads_claim(ctx, conn, values, locked=locked)
        if plan.guard is not None:
            return await guarded_claim(ctx, conn, values, locked=locked)
        (claim,) = plan.claim
        try:
            done = await conn.script(
                [
                    Op("begin", plan.claim_begin.sql),
                    *locked,
                    Op("fetch", claim.sql, claim.bind(values)),
                    Op("commit"),
                ]
            )
        except BaseException:
            await rollback_quietly(conn)
            raise
        records = done[2]
        assert isinstance(records, list)
        return records
    released = False
    try:
        if not held(await conn.fetch(lock.sql, lock.bind(values))):
            released = True  # the wait ran out: nothing is held
            return []
        try:
            if plan.heads is not None:
                records = await heads_claim(ctx, conn, values, stamp_each=True)
            elif plan.guard is not None:
                records = await guarded_claim(ctx, conn, values)
            else:
                records = await select_and_stamp(ctx, conn, values)
        finally:
            with cleanup_scope():
                try:
                    await conn.fetch(unlock.sql, unlock.bind(values))
                    released = True
                except TrinboxError:
                    # The claim stands (its stamps committed); the abandoned session frees
                    # the lock.
                    pass
        return records
    finally:
        if not released:
            ctx.pool.abandon(conn)


async def guarded_claim(
    ctx: FormContext,
    conn: Connection,
    values: dict[str, object],
    *,
    locked: Sequence[Op] = (),
) -> list[Record]:
    """A FIFO group on a server: one READ COMMITTED transaction runs the group guard (after
    ``locked``, a limited claim's transaction lock), then the claim of the group's head
    (MySQL: then its stamp), and commits; from then on the lease holds the group. A group
    held by another claim takes nothing."""
    claim = ctx.statements.claim
    guard = ctx.statements.guard
    assert guard is not None
    try:
        opened = await conn.script(
            [
                Op("begin", ctx.statements.claim_begin.sql),
                *locked,
                Op("fetch", guard.sql, guard.bind(values)),
                Op("fetch", claim[0].sql, claim[0].bind(values)),
            ]
        )
        records = opened[-1]
        assert isinstance(records, list)
        if not held(opened[-2]) or not records:
            await conn.rollback()
            return []
        if len(claim) == 1:
            await conn.commit()
            return records
        return await _stamp(ctx, conn, claim[1], values, records)
    except BaseException:
        await rollback_quietly(conn)
        raise


async def heads_claim(
    ctx: FormContext,
    conn: Connection,
    values: dict[str, object],
    *,
    locked: Sequence[Op] = (),
    stamp_each: bool = False,
) -> list[Record]:
    """Every group of a FIFO table on a server: read the groups whose head is due, then, in
    one READ COMMITTED transaction (first ``locked``, a limited claim's transaction lock),
    per group its guard and its head's claim (each claim's snapshot taken once its guard is
    held), until ``limit`` heads are taken; then MySQL's stamps (with ``stamp_each``, each
    head's before the next group's claim, which counts it), and one commit, so a claim cut
    short leaves nothing stamped. A group another claim holds takes nothing: a head its
    claim stamped all the same (PostgreSQL's claim stamps as it selects) is rolled back to
    the group's savepoint."""
    limit = values["limit"]
    assert isinstance(limit, int)
    groups = await due_groups(ctx, conn, values["now"], limit)
    if not groups:
        return []
    claim, guard = ctx.statements.claim, ctx.statements.guard
    assert guard is not None
    taken: list[Record] = []
    ops = [Op("begin", ctx.statements.claim_begin.sql), *locked]
    try:
        for group in groups:
            if len(taken) >= limit:
                break
            bound = {**values, "group": group}
            found = await conn.script(
                [
                    *ops,
                    Op("execute", f"SAVEPOINT {GROUP_SAVEPOINT}"),
                    Op("fetch", guard.sql, guard.bind(bound)),
                    Op("fetch", claim[0].sql, claim[0].bind(bound)),
                ]
            )
            records = found[-1]
            assert isinstance(records, list)
            ops = []
            if held(found[-2]):
                if stamp_each and records:
                    records = await _stamp(ctx, conn, claim[1], values, records, commit=False)
                taken += records
            elif records:
                ops = [Op("execute", f"ROLLBACK TO SAVEPOINT {GROUP_SAVEPOINT}")]
        if not taken:
            await conn.rollback()
            return []
        if ops:
            await conn.script(ops)
        if len(claim) == 1 or stamp_each:
            await conn.commit()
            return taken
        return await _stamp(ctx, conn, claim[1], values, taken)
    except BaseException:
        await rollback_quietly(conn)
        raise


def _stamp_values(
    ctx: FormContext, values: dict[str, object], record: Record, id_index: int
) -> dict[str, object]:
    """One MySQL stamp's values: on the database clock it writes the token its select
    read from the server (the select's last column)."""
    found = {**values, "id": record[id_index]}
    if len(record) > len(ctx.spec.columns):
        found["lease"] = record[-1]
    return found


async def custom_lease_claim(
    ctx: FormContext, conn: Connection, values: dict[str, object]
) -> list[Delivery]:
    """A queue's own claim, in one transaction: its ids, their rows (the plan's fetch or the
    queue's), on the database clock the server's lease read once, then each id's stamp (the
    lease, the attempt counted) while the row is claimable and its lease free, and the
    commit. An id the stamp did not change drops out; one stamped whose fetch read no row is
    claimed bare. The deliveries report the attempt the fetch read, before the stamp."""
    plan = ctx.statements
    stamp = plan.stamp
    assert stamp is not None
    limit = values["limit"]
    assert isinstance(limit, int)
    try:
        await conn.begin(plan.claim_begin.sql)
        ids = await claimed_ids(ctx, conn, limit)
        if not ids:
            await conn.rollback()
            return []
        rows = await rows_of(ctx, conn, ids)
        token = values["lease"]
        if plan.lease_token is not None:
            ((token,),) = await conn.fetch(plan.lease_token.sql, plan.lease_token.bind(values))
        stamps = [
            Op("execute", stamp.sql, stamp.bind({**values, "lease": token, "id": ident}))
            for ident in ids
        ]
        stamped = await conn.script([*stamps, Op("commit")])
    except BaseException:
        await rollback_quietly(conn)
        raise
    return [
        delivery_of(ctx, rows[ident], token) if ident in rows else bare_delivery(ctx, ident, token)
        for ident, changed in zip(ids, stamped, strict=False)
        if changed == 1
    ]
