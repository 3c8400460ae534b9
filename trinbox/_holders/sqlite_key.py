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
settlement and its worker's next batch (``settle_batch_and_claim``). The hold that runs them
for a subscription is trinbox._holders.process_keys.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: no detection
    fcntl = None  # type: ignore[assignment]

from .._drivers._base import Op, Record, ThreadSession
from ..errors import DatabaseError, StartupError

__all__ = [
    "KeyClaim",
    "KeyRegistry",
    "SlotRule",
    "hold",
    "keys_in_work",
    "let_go",
    "let_key_go",
    "lock_path",
    "run_key_claim",
    "served_elsewhere",
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
    for session locks; and, per database, the slot each limited key was taken with
    (``SlotRule``): a key's slot is in work while the key is."""

    _by_database: ClassVar[dict[str, set[str]]] = {}  # process-wide on purpose
    _slots_by_database: ClassVar[dict[str, dict[str, tuple[object, str]]]] = {}

    @classmethod
    def keys(cls, database: str) -> set[str]:
        return cls._by_database.setdefault(database, set())

    @classmethod
    def slots(cls, database: str) -> dict[str, tuple[object, str]]:
        """Key -> (the limit's scope, its slot key), read only for keys in work."""
        return cls._slots_by_database.setdefault(database, {})

    @classmethod
    def forget_all(cls) -> None:
        cls._by_database = {}
        cls._slots_by_database = {}


@dataclass(frozen=True, eq=False)
class SlotRule:
    """A limited subscription's slots (``InboxQueue.limit``), kept beside its keys in work:
    at most ``per_key`` keys in work per slot key (``quote(<key>)``, the candidates' third
    column) and ``whole`` in all, within ``scope`` (its table and group). Nothing is counted
    apart: a key taken under the rule records its slot key in ``slot_of``, and its slot is in
    work exactly while the key is, so every way a key leaves the registry frees its slot."""

    scope: object
    per_key: int | None
    whole: int | None
    slot_of: dict[str, tuple[object, str]]

    def in_work(self, keys: set[str]) -> Counter[str]:
        """The keys in work per slot key, under ``_keys_lock``."""
        found: Counter[str] = Counter()
        for key in keys:
            slot = self.slot_of.get(key)
            if slot is not None and slot[0] == self.scope:
                found[slot[1]] += 1
        return found

    def record(self, keys: set[str], key: str, slot_key: str) -> None:
        """``key`` goes into work with a slot of ``slot_key`` (under ``_keys_lock``); the
        records of keys no longer in work are dropped now and then, so they do not pile up."""
        if len(self.slot_of) > 2 * len(keys) + 64:
            for gone in [k for k in self.slot_of if k not in keys]:
                del self.slot_of[gone]
        self.slot_of[key] = (self.scope, slot_key)

    def room(self, keys: set[str], slot_key: str) -> bool:
        """Whether a row of ``slot_key`` may go into work now (under ``_keys_lock``)."""
        counts = self.in_work(keys)
        if self.whole is not None and counts.total() >= self.whole:
            return False
        return self.per_key is None or counts[slot_key] < self.per_key


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


def served_elsewhere(database: str) -> str | None:
    """The process serving ``database``'s advisory keys when it is another than this one
    (its pid as its lock file says it, or ``"unknown"``), else ``None``. The probe takes the
    lock shared without waiting and lets it go at once: a process starting to serve in that
    instant is refused as beside any other server."""
    if fcntl is None:
        return None
    path = lock_path(database)
    with _lock:
        if path in _held:
            return None
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None  # never served
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            return None
        finally:
            os.close(fd)  # frees the probe's lock


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
    # The candidate select, given the keys held and (under a limit) the rows in work per slot
    # key, a JSON object.
    select: Callable[[list[str], str], Op]
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
    rule: SlotRule | None = None  # under a limit: each key's slot, kept with it
    # The slots of ``frees`` as the settlement let them go, recorded again if it fails (the
    # registry may drop the records of keys out of work meanwhile).
    freed_slots: dict[str, tuple[object, str]] = field(
        default_factory=dict[str, tuple[object, str]]
    )

    def forget(self) -> None:
        """Let go of the keys taken (their rows stay claimable: a take only counts)."""
        with _keys_lock:
            for key, _ in self.taken:
                self.keys.discard(key)
        self.taken.clear()


def keys_in_work(keys: set[str]) -> list[str]:
    """The keys of ``keys`` in work now, read under the lock every take holds."""
    with _keys_lock:
        return sorted(keys)


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
                if claim.rule is not None:
                    slots = claim.rule.slot_of
                    claim.freed_slots = {k: slots[k] for k in claim.frees if k in slots}
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
                if claim.rule is not None:
                    claim.rule.slot_of.update(claim.freed_slots)
            claim.freed = False
        if session.in_transaction:
            session.rollback()
        raise


def _take_free_keys(claim: KeyClaim, session: ThreadSession) -> None:
    rule = claim.rule
    with _keys_lock:
        held = sorted(claim.keys)
        counts = rule.in_work(claim.keys) if rule is not None else Counter[str]()
    if rule is not None and rule.whole is not None and counts.total() >= rule.whole:
        return  # the queue's slots are all in work
    select = claim.select(held, json.dumps(counts))
    rows = session.fetch(select.sql, select.params)
    claim.read = len(rows)
    seen: set[str] = set()
    for row in rows:
        if len(claim.taken) >= claim.limit:
            break
        key = str(row[1])
        slot_key = str(row[2]) if rule is not None else ""
        with _keys_lock:
            if rule is not None and not rule.room(claim.keys, slot_key):
                continue  # its limit key (or the queue) is full: other keys' rows may go
        if key in seen:
            continue  # one row per key per claim
        seen.add(key)
        row_id = row[0]
        with _keys_lock:
            if key in claim.keys:
                continue  # taken since the select read it (another subscription's claim)
            if rule is not None:
                if not rule.room(claim.keys, slot_key):
                    continue
                rule.record(claim.keys, key, slot_key)
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
