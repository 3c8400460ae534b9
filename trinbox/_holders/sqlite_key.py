"""SQLite's process keys: what holds an advisory row on SQLite, which has no session locks.

The keys in work live in this process's registry (:class:`KeyRegistry`), per database file, and
one process serves a file's keys: an exclusive ``flock`` on a file beside the database
(``<database>-trinbox-advisory``), held while a subscription of this process serves them.

Another process cannot see the registry: two processes serving one file could hand out two rows
of one key at once. The lock is taken without waiting, so a second process is refused at
startup; the kernel frees it when the process ends, however it ends. The lock is counted per
process (brokers naming one file another way, apps run on several threads share it) and never
taken on the database file itself: closing a descriptor of that file would drop SQLite's own
POSIX locks. The lock file stays behind, as SQLite's ``-wal`` and ``-shm`` files do.

A ``flock`` belongs to the open file, which a forked child shares with its parent: the child
would hold the lock with it (past the parent's end), and count itself as serving the keys it
does not have. So a forked child closes its copies at once, without unlocking (that would free
the parent's lock), and serves no keys until it takes the lock itself, which a parent still
serving refuses. Its registry starts empty: its parent's deliveries are not its own (they
would keep their keys from it for ever).

``KeyClaim`` / ``run_key_claim``: an advisory claim (after a settlement, where one chains it) as
one function run on a connection's thread (``ThreadedConnection.run_on_thread``), in one
transaction. The candidate select passes over the keys the registry holds, so one claim feeds
every free worker with rows of different keys, and a settlement that frees a key wakes the claim
loop: the key's next row is claimed at once, not a poll interval later. A settlement, its key
let go and the worker's next claim are one such call (``settle_and_claim``); so are a batch's
settlement and its worker's next batch (``settle_batch_and_claim``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: no detection
    fcntl = None  # type: ignore[assignment]

import trio

from .._bounds import cleanup_scope
from .._dialects._statement import Statement
from .._drivers._base import (
    Connection,
    Op,
    Pool,
    Record,
    ThreadedConnection,
    ThreadedPool,
    ThreadSession,
)
from ..errors import DatabaseError, StartupError, TrinboxError
from ._base import Chained, Claimed, Delivery, FormTraits, Step, step_statements
from .advisory_hold import KeyWork
from .connections import give_back, rollback_quietly
from .settlement import settle_alone, settle_each, step_ops

__all__ = [
    "KeyClaim",
    "KeyRegistry",
    "ProcessKeys",
    "hold",
    "let_go",
    "let_key_go",
    "lock_path",
    "run_key_claim",
]

_lock = threading.Lock()
_held: dict[str, tuple[int, int]] = {}  # real path -> (descriptor, holders in this process)


def _before_fork() -> None:
    _lock.acquire()  # no thread is half way through the registry as the child is made


def _after_fork_in_parent() -> None:
    _lock.release()


def _after_fork_in_child() -> None:
    global _lock
    for fd, _ in _held.values():
        os.close(fd)  # the parent's lock stays the parent's: a close of a copy keeps it
    _held.clear()
    _lock = threading.Lock()
    KeyRegistry.forget_all()


class KeyRegistry:
    """Keys in work in this process, per database (a pool's ``identity``): SQLite's stand-in
    for session locks."""

    _by_database: ClassVar[dict[str, set[str]]] = {}  # process-wide on purpose

    @classmethod
    def keys(cls, database: str) -> set[str]:
        return cls._by_database.setdefault(database, set())

    @classmethod
    def forget_all(cls) -> None:
        cls._by_database = {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )


def lock_path(database: str) -> str:
    return os.path.realpath(database) + "-trinbox-advisory"


def hold(database: str) -> None:
    """Count this process as serving ``database``'s advisory keys; ``KeysServed`` when another
    process does (a ``StartupError``)."""
    if fcntl is None:
        return
    path = lock_path(database)
    with _lock:
        if path in _held:
            fd, holders = _held[path]
            _held[path] = (fd, holders + 1)
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            msg = (
                f"one process serves the advisory keys of a SQLite file (the keys in work live "
                f"in its memory), found process {other} serving {os.path.realpath(database)} "
                f"(it holds {path}); stop that process, or serve this queue from it"
            )
            raise StartupError(msg) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[path] = (fd, 1)


def let_go(database: str) -> None:
    """One holder of this process is done; the last one frees the lock."""
    if fcntl is None:
        return
    path = lock_path(database)
    with _lock:
        if path not in _held:
            return
        fd, holders = _held[path]
        if holders > 1:
            _held[path] = (fd, holders - 1)
            return
        del _held[path]
        os.close(fd)  # frees the flock


# -- claiming keys in one round trip ----------------------------------------------------------

_keys_lock = threading.Lock()  # a key's check-and-take, on whichever thread runs it


@dataclass(eq=False)
class KeyClaim:
    """One worker-thread call that settles a delivery (optional) and claims rows of free keys,
    in one transaction: ``BEGIN IMMEDIATE``, the settlement, the candidate select (past the
    keys in work as they are when it runs), each take, ``COMMIT``.

    A key enters ``keys`` (the process's keys in work for the database) as its row is taken,
    under one lock for every thread, and leaves it again if its take or the transaction fails;
    ``taken`` holds what was taken, so a caller cut off after the commit can let the keys go.
    A claim that fails after a settlement rolls back with it, and the settlement runs again on
    its own: it stands, and ``claim_error`` says why nothing was claimed."""

    keys: set[str]
    select: Callable[[list[str]], Op]  # the candidate select, given the keys held
    take: Callable[[object], list[Op]]  # one row's take: its last op reads the row
    limit: int  # rows to take at most
    wanted: int  # candidates the select reads at most
    settle: Sequence[Op] = ()
    frees: Sequence[str] = ()  # the keys of the settled rows: free once the settlement ran
    taken: list[tuple[str, Record]] = field(default_factory=list[tuple[str, Record]])
    read: int = 0  # candidates the select read
    # ``frees`` left ``keys`` (inside the transaction, committed with it); a transaction that
    # fails holds them again before the pool's next writer runs.
    freed: bool = False
    claim_error: DatabaseError | None = None

    def forget(self) -> None:
        """Let go of the keys taken (their rows stay claimable: a take only counts)."""
        with _keys_lock:
            for key, _ in self.taken:
                self.keys.discard(key)
        self.taken.clear()


def let_key_go(keys: set[str], key: str) -> None:
    with _keys_lock:
        keys.discard(key)


def run_key_claim(session: ThreadSession, claim: KeyClaim) -> None:
    """Run ``claim`` on ``session`` (on its connection's thread); errors of the settlement or
    the commit propagate, after a rollback and with the keys taken let go."""

    def settle() -> None:
        session.execute("BEGIN IMMEDIATE")
        for op in claim.settle:
            session.execute(op.sql, op.params)
        if claim.frees:
            with _keys_lock:
                claim.keys.difference_update(claim.frees)
            claim.freed = True

    try:
        settle()
        try:
            _take_free_keys(claim, session)
        except DatabaseError as exc:
            if not claim.settle:
                raise
            # The claim failed after the settlement: both roll back and the settlement runs
            # again alone, so it stands (a savepoint would cost two statements every call).
            claim.claim_error = exc
            claim.forget()
            session.rollback()
            settle()
        session.commit()
    except BaseException:
        claim.forget()
        if claim.freed:
            # Nothing took effect: the settled rows are in work still, their keys held again
            # (under the pool's write lock, so no claim ran in between).
            with _keys_lock:
                claim.keys.update(claim.frees)
            claim.freed = False
        if session.in_transaction:
            session.rollback()
        raise


def _take_free_keys(claim: KeyClaim, session: ThreadSession) -> None:
    with _keys_lock:
        held = sorted(claim.keys)
    select = claim.select(held)
    rows = session.fetch(select.sql, select.params)
    claim.read = len(rows)
    seen: set[str] = set()
    for row_id, found in rows:
        if len(claim.taken) >= claim.limit:
            break
        key = str(found)
        if key in seen:
            continue  # one row per key per claim
        seen.add(key)
        with _keys_lock:
            if key in claim.keys:
                continue  # taken since the select read it (another subscription's claim)
            claim.keys.add(key)
        try:
            record = _take(claim.take(row_id), session)
        except BaseException:
            let_key_go(claim.keys, key)
            raise
        if record is None:
            let_key_go(claim.keys, key)  # settled or moved since the select read it
            continue
        claim.taken.append((key, record))


def _take(ops: list[Op], session: ThreadSession) -> Record | None:
    """The row a take read, or ``None`` when it was no longer claimable."""
    records: list[Record] = []
    for op in ops:
        if op.kind == "fetch":
            records = session.fetch(op.sql, op.params)
        elif session.execute(op.sql, op.params) == 0:
            return None  # the UPDATE changed nothing
    if len(records) > 1:
        msg = f"a take reads one row, found {len(records)}"
        raise RuntimeError(msg)
    return records[0] if records else None


class ProcessKeys:
    """The process keys one subscription serves: its database's keys in the registry, the
    file lock while it serves them, and claims run as one call on a connection's thread.

    ``threads``: the pool, where its connections run functions on their own thread (the
    SQLite driver's); a pool without them (one wrapped by a test) claims statement by
    statement, holds no file lock, and settles each delivery alone."""

    __slots__ = ("_serving", "keys", "threads")

    def __init__(self, pool: Pool) -> None:
        self.threads = pool if isinstance(pool, ThreadedPool) else None
        self.keys = KeyRegistry.keys(pool.identity)
        self._serving = False

    def start_serving(self) -> None:
        """Serve the file's keys (``StartupError`` when another process does)."""
        if self.threads is not None and not self._serving:
            hold(self.threads.path)
            self._serving = True

    def stop_serving(self) -> None:
        """Stop serving them: the last holder of this process frees the file lock."""
        if self.threads is not None and self._serving:
            self._serving = False
            let_go(self.threads.path)

    async def _run_claim(self, conn: ThreadedConnection, plan: KeyClaim) -> DatabaseError | None:
        """Run ``plan`` on ``conn``'s thread: the error of its claim when it failed after its
        settlement took effect. A claim cut off after its commit lets its keys go (their rows
        stay claimable, their attempt counted, as a take cut after its statement)."""
        try:
            await conn.run_on_thread(
                lambda session: run_key_claim(session, plan), "BEGIN IMMEDIATE"
            )
        except BaseException:
            plan.forget()
            raise
        return plan.claim_error

    # -- the advisory hold (trinbox._holders.advisory_hold.AdvisoryHold) ---------------------

    def traits(self, transactional: bool) -> FormTraits:
        # A delivery holds a connection in transactional mode only (its transaction's). The
        # select passes over the keys in work, so a claim may feed every free worker.
        return FormTraits(
            holds_connections=transactional,
            feeds_every_worker=True,
            # Settlement and claim in one call on the worker thread.
            chains=not transactional,
            # A batch's settlement and its worker's next claim in one call.
            chains_batches=not transactional,
            counts_at_claim=True,  # the take counts the attempt and commits
        )

    async def claim(self, work: KeyWork, limit: int) -> Claimed:
        ctx = work.ctx
        threads = self.threads
        if threads is not None:
            conn = await threads.acquire("advisory session")
            try:
                plan = self._key_claim(work, limit)
                await self._run_claim(conn, plan)
            finally:
                await give_back(ctx.pool, conn)
            return await self._registered(work, plan)
        session = await ctx.pool.acquire("advisory session")
        try:
            candidates, now, wanted = work.candidates(limit, {"held": sorted(self.keys)})
            rows = await session.fetch(candidates.sql, candidates.params)
        except BaseException:
            await give_back(ctx.pool, session)
            raise
        return await self._take_rows(work, session, rows, limit, wanted, now)

    def _key_claim(
        self,
        work: KeyWork,
        limit: int,
        settle: list[Op] | None = None,
        frees: Sequence[str] = (),
    ) -> KeyClaim:
        """The claim of ``limit`` rows in one call, after a settlement's ``settle``
        statements (freeing the keys ``frees``) where one chains it."""
        ctx = work.ctx
        candidates = ctx.statements.claim[0]
        now = ctx.clock()
        wanted = limit + work.claiming - 1  # as KeyWork.candidates
        values: dict[str, object] = {"group": ctx.group, "now": now, "limit": wanted}

        def select(held: list[str]) -> Op:
            return Op("fetch", candidates.sql, candidates.bind({**values, "held": held}))

        def take(row_id: object) -> list[Op]:
            return work.take_ops(row_id, now)

        return KeyClaim(self.keys, select, take, limit, wanted, settle or (), frees)

    async def _registered(self, work: KeyWork, plan: KeyClaim) -> Claimed:
        """The deliveries of a claim; in transactional mode each opens its handler's
        transaction (dropped, with every row of the claim, when one cannot)."""
        taken = [work.delivery(record, key, conn=None) for key, record in plan.taken]
        work.working.update(taken)
        if work.ctx.transactional:
            try:
                for delivery in taken:
                    await work.begin_transaction(delivery)
            except BaseException:
                with cleanup_scope():
                    for delivery in taken:
                        await work.release(delivery)
                raise
        return Claimed(taken, exhausted=plan.read < plan.wanted)

    async def _take_rows(
        self,
        work: KeyWork,
        session: Connection,
        rows: list[Record],
        limit: int,
        wanted: int,
        now: datetime,
    ) -> Claimed:
        """A pool without threads: take candidates statement by statement on ``session``
        (which this consumes), each key entering the registry as its row is taken."""
        ctx = work.ctx
        taken: list[Delivery] = []
        try:
            # The select passes over the registry's keys, so a full select means more is due
            # even when a claim took fewer rows (rows of one key).
            exhausted = len(rows) < wanted
            seen: set[str] = set()
            for row_id, key in rows:
                if len(taken) >= limit:
                    break
                key = str(key)
                if key in seen:
                    continue  # one row per key per claim
                seen.add(key)
                delivery = await self._take_registered(work, session, row_id, key, now)
                if delivery is not None:
                    taken.append(delivery)
                    work.working.add(delivery)
            if ctx.transactional:
                for delivery in taken:
                    await work.begin_transaction(delivery)
        except BaseException as exc:
            if isinstance(exc, trio.Cancelled):
                # Only a stopping subscription cancels its claim: its closes are shutdown's.
                work.begin_shutdown()
            # Everything taken so far is dropped: rows return, no key stays behind.
            with cleanup_scope():
                for delivery in taken:
                    await work.release(delivery)
            raise
        finally:
            await give_back(ctx.pool, session)
        return Claimed(taken, exhausted=exhausted)

    async def _take_registered(
        self, work: KeyWork, conn: Connection, row_id: object, key: str, now: object
    ) -> Delivery | None:
        registry = self.keys
        if key in registry:
            return None
        registry.add(key)
        try:
            record = await work.take(conn, row_id, now)
        except BaseException:
            registry.discard(key)
            raise
        if record is None:
            registry.discard(key)
            return None
        return work.delivery(record, key, conn=None)

    async def let_go(self, work: KeyWork, delivery: Delivery, conn: Connection | None) -> None:
        self.keys.discard(str(delivery.key))
        if conn is not None:
            await give_back(work.ctx.pool, conn)
        work.ctx.wake()  # the key is free: its next row may be claimed now

    async def release(self, work: KeyWork, delivery: Delivery, conn: Connection | None) -> None:
        self.keys.discard(str(delivery.key))
        if conn is not None:
            if delivery.tx_open:
                await rollback_quietly(conn)
            await give_back(work.ctx.pool, conn)
        work.ctx.wake()  # the row is back and its key free

    def forget(self, key: str) -> None:
        self.keys.discard(key)

    async def let_go_for_shutdown(self, work: KeyWork, key: str, conn: Connection | None) -> bool:
        self.keys.discard(key)
        if conn is not None:
            await give_back(work.ctx.pool, conn)
        return True

    async def run_statements(
        self,
        work: KeyWork,
        delivery: Delivery,
        statements: Sequence[Statement],
        values: dict[str, object],
    ) -> None:
        await work.run_plain(delivery.conn, statements, values)

    async def settle_batch(
        self, work: KeyWork, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]:
        """In one transaction (:meth:`_settle_keys_together`); in transactional mode each
        delivery on its own, one after another."""
        if work.ctx.transactional:
            return await settle_each(work.settle, items)
        return await self._settle_keys_together(work, items)

    async def _settle_keys_together(
        self, work: KeyWork, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]:
        """A batch's statements in one transaction on one worker-thread call; its keys leave
        the registry once it committed. Deliveries shutdown released, and moves into another
        table, settle alone, and so does each row of a batch whose transaction failed (none
        of it took effect)."""
        ctx = work.ctx
        errors: list[TrinboxError | None] = [None] * len(items)
        together: list[Delivery] = []
        alone: list[int] = []
        ops = [Op("execute", "BEGIN IMMEDIATE")]
        now = ctx.clock()
        for i, (delivery, step) in enumerate(items):
            statements = step_statements(ctx.statements, step)
            if delivery.released or len(statements) > 1:
                alone.append(i)
                continue
            together.append(delivery)
            ops += step_ops(ctx.statements, delivery, step, now)
        if together:
            ops.append(Op("commit"))
            work.settling.update(together)
            try:
                conn = await ctx.pool.acquire("settlement")
                try:
                    await conn.script(ops)
                finally:
                    await give_back(ctx.pool, conn)  # rolls back what a failure left open
            except TrinboxError:
                # Nothing of the batch took effect: each settles alone, so one row's failure
                # leaves the others of its batch standing.
                work.settling.difference_update(together)
                alone = list(range(len(items)))
                together = []
            finally:
                for delivery in together:
                    delivery.settled = True
                    work.settling.discard(delivery)
                    work.working.discard(delivery)
                    let_key_go(self.keys, str(delivery.key))
                if together:
                    ctx.wake()  # the keys are free
        alone_errors = await settle_each(work.settle, [items[i] for i in alone])
        for i, error in zip(alone, alone_errors, strict=True):
            errors[i] = error
        return errors

    async def settle_batch_and_claim(
        self, work: KeyWork, items: Sequence[tuple[Delivery, Step]], limit: int
    ) -> tuple[list[TrinboxError | None], Chained]:
        """A batch's settlement, its keys let go, and the claim of the worker's next batch,
        in one transaction on one worker-thread call, as :meth:`settle_and_claim` for a
        single delivery. A batch whose transaction fails (nothing of it took effect, its
        keys still held) settles row by row; anything else settles as :meth:`settle_batch`
        does, and claims nothing."""
        ctx = work.ctx
        threads = self.threads
        now = ctx.clock()
        settling: list[Op] = []
        for delivery, step in items:
            statements = step_statements(ctx.statements, step)
            if delivery.released or len(statements) > 1:
                return await self._settle_keys_together(work, items), Chained()
            settling += step_ops(ctx.statements, delivery, step, now)
        if threads is None:  # claims statement by statement: the batch settles alone
            return await self._settle_keys_together(work, items), Chained()
        conn = await threads.acquire("settlement")
        deliveries = [delivery for delivery, _ in items]
        work.settling.update(deliveries)
        work.claiming += 1
        plan = self._key_claim(work, limit, settling, frees=[str(d.key) for d in deliveries])
        ran = False
        try:
            claim_error = await self._run_claim(conn, plan)
            ran = True
        except TrinboxError:
            claim_error = None  # rolled back, the keys held again: each settles alone below
        except BaseException:
            # Cut off (a cancel past the bound): as a single delivery's, each ends here and
            # its key goes; its row returns if the settlement did not commit.
            ran = True
            raise
        finally:
            work.claiming -= 1
            work.settling.difference_update(deliveries)
            await give_back(ctx.pool, conn)
            if ran:
                for delivery in deliveries:
                    delivery.settled = True
                    work.working.discard(delivery)
                if not plan.freed:
                    for delivery in deliveries:
                        let_key_go(self.keys, str(delivery.key))
                    ctx.wake()
        if not ran:
            return await settle_each(work.settle, items), Chained()
        claimed = await self._registered(work, plan)
        if claim_error is not None or len(claimed) < len(deliveries):
            ctx.wake()  # keys were freed that no row of this claim took
        if claim_error is not None:
            return [None] * len(items), Chained(claim_error=claim_error)
        return [None] * len(items), Chained(claimed=claimed)

    async def settle_and_claim(
        self,
        work: KeyWork,
        delivery: Delivery,
        statements: Sequence[Statement],
        step: Step,
        limit: int,
    ) -> Chained:
        """The settlement, its key let go, and the claim of the worker's next row, in one
        transaction on one worker-thread call. The key leaves the registry inside it, so the
        claim may take the key's next row; a claim that fails leaves the settlement standing
        (it runs again on its own)."""
        ctx = work.ctx
        if self.threads is None:  # claims statement by statement: the step settles alone
            return await settle_alone(work.settle, delivery, step)
        conn = await self.threads.acquire("settlement")
        settling = step_ops(ctx.statements, delivery, step, ctx.clock())
        work.settling.add(delivery)
        work.claiming += 1
        plan = self._key_claim(work, limit, settling, frees=(str(delivery.key),))
        try:
            claim_error = await self._run_claim(conn, plan)
        except TrinboxError as exc:
            ctx.wake()  # rolled back: the row returns, its key is let go below
            return Chained(error=exc)
        finally:
            work.claiming -= 1
            delivery.settled = True
            work.settling.discard(delivery)
            work.working.discard(delivery)
            await give_back(ctx.pool, conn)
            if not plan.freed:
                let_key_go(self.keys, str(delivery.key))
                ctx.wake()
        claimed = await self._registered(work, plan)
        if claim_error is not None:
            ctx.wake()
            return Chained(claim_error=claim_error)
        if not claimed:
            ctx.wake()  # the key is free and nothing claimed: the claim loop may go on
        return Chained(claimed=claimed)
