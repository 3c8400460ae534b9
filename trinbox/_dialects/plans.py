"""Plans: every statement one subscription runs, per dialect, as data.

``build_plan(dialect, spec, dead_letter, every_group=..., count_at_claim=..., custom_claim=...)``
is the one builder:
pure (no I/O; it reads nothing but its arguments), run once per subscription at startup. The
forms and their holders read their statements from the plan and ask the dialect for none at
claim time; the startup prepare check runs ``Plan.all()``; tests/unit/test_plans_golden.py
renders every plan for a set of table shapes and compares them with files under
tests/unit/golden/plans/.

A new claim feature is one change per dialect in the statements the plan holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .._declare._group_names import GroupNames
from .._declare._limits import ClaimLimits
from .._declare._markers import Advisory, Lease, RowLock
from .._declare._spec import TableSpec
from ._base import DeadLetter, Dialect
from ._limited import limited_heads
from ._rated import rate_advance, whole_rate_advance
from ._statement import Statement

__all__ = ["ExtendRounds", "Plan", "build_plan"]


@dataclass(frozen=True, slots=True)
class ExtendRounds:
    """The lease keeper's round over any number of deliveries (``of(count)``): one statement
    whatever the count where the ids and tokens bind as two lists (PostgreSQL, SQLite), a
    locking select and an update with a pair of slots per row on MySQL. Pure, like the plan."""

    dialect: Dialect
    spec: TableSpec

    def of(self, count: int, *, progress: bool = False) -> tuple[Statement, ...]:
        """The round; ``progress``: the same round that also writes the rows' progress (a
        table with a ``Progress`` column)."""
        return self.dialect.lease_extend(self.spec, count, progress=progress)


@dataclass(frozen=True, slots=True)
class Plan:
    """Every statement a subscription to one table runs, by event; ``None`` or empty: the
    event runs none.

    One type with optional parts, not one per form: the forms share most of it (the
    settlements differ only in their lease token condition, the claim's guard and heads serve
    the lease and row lock forms alike), each holder reads the parts its hold needs, and one
    type keeps one golden renderer and one prepare list.

    Transactions: ``begin`` opens the delivery's (at the table's isolation level), ``claim_begin``
    a claim of several statements (MySQL's lease claim and keeper round, at READ COMMITTED),
    ``plain_begin`` one at the default level (dead letter moves, batch settlements without a
    batch statement, user transactions).

    Claim: ``claim`` (the candidates of the advisory form, or the lease claim's select and
    per-row stamp on MySQL); ``guard``, a FIFO group's, run first in the claim's transaction
    (1: the group is this claim's); ``heads``, the read of the groups whose head is due, for a
    subscription over every group. ``take``: the advisory form's take of a candidate (with
    its attempt counted), or the count at claim's count and relock; ``lock``/``unlock`` the
    advisory form's key, or the count at claim's guard.

    Settlement: ``ack`` (ack and drop), ``retry``, ``retry_after``, ``snooze`` (a delayed
    return that gives back the attempt where the claim counted it: the lease and advisory
    forms, the row lock form counting at claim; the plain row lock form counts nothing
    unless a retry settles), ``dead_letter`` (one statement, or copy and delete in one
    transaction); ``batch``, one statement per event
    settling several rows of a claim and returning their ids; ``release``, the lease form's
    return of a row by its token (the other forms release by rollback or unlock). A settle
    and claim chains a settlement's statements and the claim's on one connection: no
    statement of its own.

    Keeping a lease: ``extend``, the keeper's round for one delivery; ``rounds`` for any
    count; ``extend_progress``, the same round writing the rows' reported progress too (a
    table with a ``Progress`` column; used by a round in which some value changed).
    ``insert``: the publish, checked at startup with the others.

    A custom claim (``InboxQueue.custom_claim``) runs the queue's function in place of
    ``claim`` (then empty, so no settlement chains a claim): ``fetch`` reads the rows of its
    ids (PostgreSQL's; ``None`` where the queue brings its fetch); the lease form then
    ``stamp``s each row, on the database clock with the token ``lease_token`` read, all in one
    ``claim_begin`` transaction (the row lock form's is the delivery's, ``begin``).

    A limited lease claim (``InboxQueue.limit``): ``claim`` chooses its rows by the live leases
    it counts (``_limited.py``; on a FIFO table the group's head, after its guard, and over
    every group ``heads`` passes over the groups whose head's key is at its limit), behind
    ``limit_lock``, which serializes the table's limited claims: PostgreSQL's transaction lock
    inside ``claim_begin`` (READ COMMITTED), MySQL's session lock before it, let go by
    ``limit_unlock`` after the commit; none on SQLite.
    A limited advisory claim (``_advisory_slots.py``): ``claim`` is the candidates that pass
    over the keys and limit keys with no free slot, ``key_slots`` runs after ``lock`` on the
    key's session to take the row's slots (all or nothing), and ``unlock`` lets go of the key
    and its slots together.
    Under a rate (``_rated.py``) the claim then runs, before its commit, ``rate_advance`` once
    per key it took (the key in the column ``rate_key_index`` of the rows) and
    ``whole_rate_advance`` once.

    A limited row lock claim: ``claim`` takes each row's slot of its key with locks that never
    wait. PostgreSQL's one statement locks the rows too, its slots the transaction's; on
    MySQL the last of ``claim`` returns each key and the slots it took (session locks),
    ``slot_rows`` reads the key's candidate ids, ``slot_lock`` locks as many of them by id as
    it took slots, and ``slot_release`` lets go of the slots
    once the claim's transaction has ended, before its connection goes back to the pool.
    """

    begin: Statement
    claim_begin: Statement
    plain_begin: Statement
    claim: tuple[Statement, ...]
    ack: Statement
    retry: Statement | None
    retry_after: Statement | None
    dead_letter: tuple[Statement, ...]
    insert: Statement
    snooze: Statement | None = None
    guard: Statement | None = None
    heads: Statement | None = None
    take: tuple[Statement, ...] = ()
    lock: Statement | None = None
    unlock: Statement | None = None
    batch: tuple[Statement, ...] = ()
    release: Statement | None = None
    extend: tuple[Statement, ...] = ()
    extend_progress: tuple[Statement, ...] = ()
    rounds: ExtendRounds | None = None
    fetch: Statement | None = None
    stamp: Statement | None = None
    lease_token: Statement | None = None
    limit_lock: Statement | None = None
    limit_unlock: Statement | None = None
    rate_advance: Statement | None = None
    whole_rate_advance: Statement | None = None
    rate_key_index: int | None = None
    slot_rows: Statement | None = None
    slot_lock: Statement | None = None
    slot_release: Statement | None = None
    key_slots: Statement | None = None

    @property
    def rated(self) -> bool:
        """Whether the claim advances a rate (``InboxQueue.limit(rate=...)``)."""
        return self.rate_advance is not None or self.whole_rate_advance is not None

    def batch_statement(self, event: str) -> Statement | None:
        return next((st for st in self.batch if st.event == event), None)

    def extend_for(self, count: int, *, progress: bool = False) -> tuple[Statement, ...]:
        """The keeper's round over ``count`` deliveries (none outside the lease form);
        ``progress``: the round that also writes their progress (``extend_progress``)."""
        return () if self.rounds is None else self.rounds.of(count, progress=progress)

    def all(self) -> list[Statement]:
        """Every statement, for the startup prepare check."""
        found: list[Statement] = [
            *self.claim,
            self.ack,
            self.insert,
            *self.take,
            *self.dead_letter,
            *self.batch,
            *self.extend,
            *self.extend_progress,
        ]
        for one in (
            self.retry,
            self.retry_after,
            self.snooze,
            self.lock,
            self.unlock,
            self.guard,
            self.heads,
            self.fetch,
            self.stamp,
            self.lease_token,
            self.limit_lock,
            self.limit_unlock,
            self.rate_advance,
            self.whole_rate_advance,
            self.slot_rows,
            self.slot_lock,
            self.slot_release,
            self.key_slots,
        ):
            if one is not None:
                found.append(one)
        return found


def build_plan(
    dialect: Dialect,
    spec: TableSpec,
    dead_letter: DeadLetter | None = None,
    *,
    every_group: bool = False,
    count_at_claim: bool = False,
    custom_claim: bool = False,
    groups: GroupNames | None = None,
    limits: ClaimLimits | None = None,
) -> Plan:
    """The plan of a subscription to ``spec`` on ``dialect``, for its form, after the
    dialect's checks (``UnsupportedForm``...). ``every_group``: a subscription over every
    group of a FIFO table; ``count_at_claim``: the row lock form counting the attempt at
    claim (``InboxQueue.count_attempt_at_claim()``); ``custom_claim``: the queue brings its
    claim (``InboxQueue.custom_claim()``, which refuses the other options and the advisory
    form); ``groups``: a lease claim over the groups named (a relay's, over an outbox's
    records by name), never its dead letter group; ``limits``: a lease or row lock claim
    under ``InboxQueue.limit`` (which refuses a custom claim, and a rate beside FIFO groups),
    or an advisory one (slots as session locks beside the key's)."""
    dialect.check(spec, dead_letter)
    if limits is not None and spec.form is Advisory:
        assert groups is None and not every_group and not count_at_claim and not custom_claim
        candidates, key_slots, unlock = dialect.limited_advisory(spec, limits)
        return replace(
            _advisory(dialect, spec, dead_letter),
            claim=(candidates,),
            key_slots=key_slots,
            unlock=unlock,
        )
    if limits is not None and spec.form is RowLock:
        assert groups is None and (spec.fifo or not every_group)
        assert not count_at_claim and not custom_claim
        skip = dead_letter.group if dead_letter is not None and every_group else None
        return replace(
            _row_lock(dialect, spec, dead_letter),
            claim=(
                (dialect.limited_head_claim(spec, limits),)
                if spec.fifo
                else dialect.limited_row_lock_claim(spec, limits)
            ),
            heads=dialect.every_group_heads(spec, skip) if every_group else None,
            slot_rows=None if spec.fifo else dialect.slot_rows(spec, limits),
            slot_lock=None if spec.fifo else dialect.slot_lock(spec),
            slot_release=None if spec.fifo else dialect.slot_release(),
        )
    if limits is not None:
        assert spec.form is Lease and groups is None and not (spec.fifo and limits.rated)
        assert spec.fifo or not every_group
        assert not count_at_claim and not custom_claim
        skip = dead_letter.group if dead_letter is not None and every_group else None
        # Over every group, a dialect with no heads read (SQLite, one writer) claims the heads
        # in one statement; a server claims each group's head behind its guard.
        heads = dialect.every_group_heads(spec, skip) if every_group else None
        return replace(
            _lease(dialect, spec, dead_letter),
            claim_begin=dialect.limited_claim_begin(),
            claim=dialect.limited_lease_claim(
                spec, limits, every_group=every_group and heads is None, skip=skip
            ),
            heads=None if heads is None else limited_heads(dialect, spec, limits, skip),
            limit_lock=dialect.limit_lock(spec),
            limit_unlock=dialect.limit_unlock(spec),
            rate_advance=rate_advance(dialect, spec, limits),
            whole_rate_advance=whole_rate_advance(dialect, spec, limits),
            rate_key_index=(
                spec.columns.index(limits.key)
                if limits.key is not None and limits.key_rate is not None
                else None
            ),
        )
    if groups is not None:
        assert spec.form is Lease and spec.group is not None and not spec.fifo
        assert not every_group and not count_at_claim and not custom_claim
        if dead_letter is not None and dead_letter.group is not None:
            groups = groups.without(dead_letter.group)
        return replace(_lease(dialect, spec, dead_letter), claim=dialect.lease_claim(spec, groups))
    if custom_claim:
        assert spec.form is not Advisory and not spec.fifo
        assert not every_group and not count_at_claim
        own = _lease if spec.form is Lease else _row_lock
        return _custom(dialect, spec, own(dialect, spec, dead_letter))
    if spec.form is Lease:
        found = _lease(dialect, spec, dead_letter)
    elif spec.form is Advisory:
        return _advisory(dialect, spec, dead_letter)
    elif count_at_claim:
        return _counted(dialect, spec, dead_letter)
    else:
        assert spec.form is RowLock
        found = _row_lock(dialect, spec, dead_letter)
    if not every_group:
        return found
    assert spec.fifo  # the queue refuses every_group() elsewhere
    skip = dead_letter.group if dead_letter is not None else None
    return replace(
        found,
        claim=dialect.every_group_claim(spec, found.claim, skip),
        heads=dialect.every_group_heads(spec, skip),
    )


def _lease(d: Dialect, spec: TableSpec, dead_letter: DeadLetter | None) -> Plan:
    retry = d.update("retry", spec, [], token=True)
    return Plan(
        begin=d.begin(spec),
        claim_begin=d.lease_claim_begin(),
        plain_begin=d.plain_begin(),
        claim=d.fifo_lease_claim(spec) if spec.fifo else d.lease_claim(spec),
        guard=d.fifo_guard(spec) if spec.fifo else None,
        ack=d.finish(spec, token=True),
        retry=retry,
        retry_after=d.retry_after_statement(spec, token=True, count=False),
        snooze=d.snooze_statement(spec, token=True, give_back=True),
        dead_letter=d.dead_letter_statements(spec, dead_letter, token=True),
        batch=d.lease_batch(spec),
        release=retry,
        extend=d.lease_extend(spec, 1),
        extend_progress=d.lease_extend(spec, 1, progress=True) if spec.progress else (),
        rounds=ExtendRounds(d, spec),
        insert=d.insert(spec),
    )


def _custom(d: Dialect, spec: TableSpec, found: Plan) -> Plan:
    lease = spec.form is Lease
    return replace(
        found,
        claim=(),
        claim_begin=d.custom_claim_begin() if lease else found.claim_begin,
        fetch=d.fetch_by_ids(spec),
        stamp=d.lease_stamp_by_id(spec) if lease else None,
        lease_token=d.lease_token_read() if lease else None,
    )


def _advisory(d: Dialect, spec: TableSpec, dead_letter: DeadLetter | None) -> Plan:
    return Plan(
        begin=d.begin(spec),
        claim_begin=d.lease_claim_begin(),
        plain_begin=d.plain_begin(),
        claim=(d.advisory_candidates(spec),),
        take=d.advisory_take(spec),
        lock=d.advisory_lock(spec),
        unlock=d.advisory_unlock(spec),
        ack=d.finish(spec, token=False),
        retry=None,
        retry_after=d.retry_after_statement(spec, token=False, count=False),
        snooze=d.snooze_statement(spec, token=False, give_back=True),
        dead_letter=d.dead_letter_statements(spec, dead_letter, token=False),
        insert=d.insert(spec),
    )


def _row_lock(d: Dialect, spec: TableSpec, dead_letter: DeadLetter | None) -> Plan:
    retry = d.update("retry", spec, d.bump(spec), token=False) if spec.attempt else None
    return Plan(
        begin=d.begin(spec),
        claim_begin=d.lease_claim_begin(),
        plain_begin=d.plain_begin(),
        claim=(d.head_claim(spec) if spec.fifo else d.row_lock_claim(spec),),
        guard=d.fifo_guard(spec) if spec.fifo else None,
        ack=d.finish(spec, token=False),
        retry=retry,
        retry_after=d.retry_after_statement(spec, token=False, count=True),
        snooze=d.snooze_statement(spec, token=False, give_back=False),
        dead_letter=d.dead_letter_statements(spec, dead_letter, token=False),
        insert=d.insert(spec),
    )


def _counted(d: Dialect, spec: TableSpec, dead_letter: DeadLetter | None) -> Plan:
    """The row lock form counting the attempt at claim: ``take`` holds the count (its own
    committed transaction) and the relock of the counted row by id in the delivery's
    transaction, reading the attempt as it was before the count; ``lock``/``unlock`` the
    guard (_count_at_claim.py). A retry then counts nothing: it rolls back (the count
    stands), a delayed retry only sets the due time."""
    assert spec.attempt is not None
    return Plan(
        begin=d.begin(spec),
        claim_begin=d.lease_claim_begin(),
        plain_begin=d.plain_begin(),
        claim=(d.row_lock_claim(spec),),
        take=d.count_and_relock(spec),
        lock=d.count_guard(unlock=False),
        unlock=d.count_guard(unlock=True),
        ack=d.finish(spec, token=False),
        retry=None,
        retry_after=d.retry_after_statement(spec, token=False, count=False),
        snooze=d.snooze_statement(spec, token=False, give_back=True),
        dead_letter=d.dead_letter_statements(spec, dead_letter, token=False),
        insert=d.insert(spec),
    )
