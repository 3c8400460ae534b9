"""Rates per key and for the whole queue (``InboxQueue.limit(rate=Rate(n, per=...))``) in the
lease form, on every stand: a key starts at most ``n`` rows per ``per`` (a burst of ``n``, then
one every ``per / n``), other keys' rows fill the same claim, and after ``per`` the key flows
again. The rate counts starts: a row acked, or whose lease ended, gives nothing back.

The claims here are the form's own, on a clock the test moves by hand: no sleeps."""

from __future__ import annotations

from datetime import timedelta

from trinbox import InboxQueue, Rate, Rates
from trinbox._declare._limits import ClaimLimits
from trinbox._holders._base import Ack
from trinbox.schema import DialectName, ddl

from .conftest import Case
from .schema import LeasedEmail
from .test_lease import ManualClock
from .test_limits import LEASE_CELLS, emails, keys_of, limited_form, limits_of

RATES = Rates("test_rates")
TEN = timedelta(seconds=10)


def rated(case: Case, limits: ClaimLimits) -> ClaimLimits:
    """``limits``, its rate table created on the stand."""
    dialect: DialectName = "mysql" if case.stand.name == "mariadb" else case.stand.name
    for statement in ddl(RATES, dialect):
        case.stand.execute(statement)
    return limits


def per_key(
    case: Case, n: int, per: timedelta = TEN, concurrency: int | None = None
) -> ClaimLimits:
    queue = InboxQueue(LeasedEmail, "emails")
    if concurrency is None:
        limited = queue.limit(key="customer", rate=Rate(n, per=per), rates=RATES)
    else:
        limited = queue.limit(
            key="customer", rate=Rate(n, per=per), rates=RATES, concurrency=concurrency
        )
    return rated(case, limits_of(limited))


@LEASE_CELLS
async def test_a_key_starts_n_per_period_and_the_others_flow(case: Case) -> None:
    emails(case, ["a"] * 8 + ["b"] * 2)
    clock = ManualClock()
    async with limited_form(case, clock, per_key(case, 3)) as form:
        first = await form.claim(10)
        # A burst of three of a's rows; b's rows beside them.
        assert keys_of(first) == {"a": 3, "b": 2}
        # Acked, they give nothing back: the rate counts starts.
        for delivery in first:
            await form.settle(delivery, Ack())
        assert list(await form.claim(10)) == []
        # One emission interval (10 s / 3) later: one more.
        clock.now += timedelta(seconds=10 / 3) + timedelta(microseconds=1)
        assert keys_of(await form.claim(10)) == {"a": 1}
        assert list(await form.claim(10)) == []
        # A whole period after that: a burst of n again, never more.
        clock.now += TEN
        assert keys_of(await form.claim(10)) == {"a": 3}
        assert list(await form.claim(10)) == []


@LEASE_CELLS
async def test_a_key_never_starts_more_than_its_rate_allows(case: Case) -> None:
    emails(case, ["a"] * 40)
    clock = ManualClock()
    starts: list[float] = []
    # 4 per 2 s: a burst of 4, then one every 0.5 s; claims every 0.25 s of 3 rows at most.
    async with limited_form(case, clock, per_key(case, 4, per=timedelta(seconds=2))) as form:
        for step in range(40):
            taken = await form.claim(3)
            starts += [step * 0.25] * len(taken)
            clock.now += timedelta(seconds=0.25)
    # GCRA's bound: from any start to any later one, at most n + elapsed / (per / n) starts
    # (so a window of one period holds 2n - 1 at most: a burst, then the steady rate).
    for i, first in enumerate(starts):
        for j in range(i, len(starts)):
            assert j - i + 1 <= 4 + int((starts[j] - first) / 0.5)
    # And it is spent, not starved: the burst, then one every 0.5 s for the 9.75 s after it.
    assert len(starts) == 4 + int(9.75 / 0.5)


@LEASE_CELLS
async def test_a_lease_that_ends_gives_no_start_back(case: Case) -> None:
    emails(case, ["a"] * 6)
    clock = ManualClock()
    async with limited_form(case, clock, per_key(case, 2, per=timedelta(hours=2))) as form:
        assert keys_of(await form.claim(10)) == {"a": 2}
        # Their owner is gone: the leases end, the rows are free, the rate is still spent.
        clock.now += form._ctx.lease + timedelta(seconds=1)
        assert list(await form.claim(10)) == []


@LEASE_CELLS
async def test_a_null_key_has_a_rate_of_its_own(case: Case) -> None:
    emails(case, [None, None, None, "a", "a", "a"])
    async with limited_form(case, ManualClock(), per_key(case, 2)) as form:
        assert keys_of(await form.claim(10)) == {None: 2, "a": 2}
        assert list(await form.claim(10)) == []


@LEASE_CELLS
async def test_a_rate_and_a_concurrency_together(case: Case) -> None:
    emails(case, ["a"] * 6)
    clock = ManualClock()
    async with limited_form(case, clock, per_key(case, 3, concurrency=1)) as form:
        first = await form.claim(10)
        assert keys_of(first) == {"a": 1}
        await form.settle(first[0], Ack())
        assert keys_of(await form.claim(10)) == {"a": 1}
        # Two started, one left in the burst; the concurrency holds it back until the ack.
        assert list(await form.claim(10)) == []


@LEASE_CELLS
async def test_a_whole_queue_rate(case: Case) -> None:
    emails(case, ["a", "b", "c", "d", "e", "f"])
    clock = ManualClock()
    whole = rated(
        case,
        limits_of(InboxQueue(LeasedEmail, "emails").limit(rate=Rate(4, per=TEN), rates=RATES)),
    )
    async with limited_form(case, clock, whole) as form:
        assert len(await form.claim(3)) == 3
        assert len(await form.claim(10)) == 1
        assert list(await form.claim(10)) == []
        clock.now += TEN / 2
        assert len(await form.claim(10)) == 2


@LEASE_CELLS
async def test_long_keys_keep_rates_of_their_own(case: Case) -> None:
    # Keys as long as the column takes, alike but for their last character, and one of
    # four-byte characters: each its own rate row (MySQL's key column is 191 characters, so a
    # long key is kept as its hash there, never cut short into another key's row).
    long_a, long_b, emoji = "k" * 190 + "a", "k" * 190 + "b", "\U0001f600" * 191
    emails(case, [long_a, long_a, long_b, long_b, emoji, emoji])
    async with limited_form(case, ManualClock(), per_key(case, 1)) as form:
        assert keys_of(await form.claim(10)) == {long_a: 1, long_b: 1, emoji: 1}
        assert list(await form.claim(10)) == []
    assert case.stand.value("SELECT COUNT(*) FROM test_rates") == 3
