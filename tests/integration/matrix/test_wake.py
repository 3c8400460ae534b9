"""Wake-on-publish in one process, on every stand and form (docs/reference.md#claim-loop,
docs/reference.md#wake-on-publish, docs/reference.md#scenarios-wake).

Every test runs on virtual time with a one-hour poll interval: a subscription that is woken
claims with ``trio.current_time()`` still near zero, one that is not waits the whole hour.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import trio

from trinbox import HandlerOutcome, InboxQueue, keys, subscriber
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR, ClaimWatch, insert_emails
from .schema import NEXT_JOBS, NextJob

# Long enough that the lease keeper (every third of the lease) does not tick while virtual hours
# pass.
LEASE = 8 * HOUR


@dataclass
class Job:
    n: int


async def test_publish_wakes_the_subscription_before_the_poll_interval(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = ClaimWatch(monkeypatch)
    broker = case.stand.broker(poll_interval=HOUR, lease=LEASE)
    handled: list[tuple[int, float]] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        handled.append((job.n, trio.current_time()))

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(HOUR / 2):
            await watch.wait_done(1)  # the first claim found nothing; the loop sleeps
            await broker.publish(case.email, Job(1), name="emails", customer="c")
            await settled(app, handle, 1)
    [(n, at)] = handled
    assert n == 1
    assert at < 1.0
    assert case.stand.rows("SELECT * FROM email_jobs") == []


async def test_publish_to_one_group_wakes_only_its_subscription(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = ClaimWatch(monkeypatch)
    broker = case.stand.broker(poll_interval=HOUR, lease=LEASE)
    handled: list[tuple[str, float]] = []

    # Group a polls less often, so that b's claim at the hour runs alone: on MariaDB a claim
    # of a reads (and locks, for a moment) the first index entry past its group, b's row, and
    # a claim of b running at that very moment passes over it (SKIP LOCKED) until its next
    # poll.
    @subscriber(InboxQueue(case.email, "a").poll_interval(3 * HOUR))
    async def handle_a(job: Job) -> None:
        handled.append(("a", trio.current_time()))

    @subscriber(InboxQueue(case.email, "b"))
    async def handle_b(job: Job) -> None:
        handled.append(("b", trio.current_time()))

    app = make_app()
    app.include(broker, handle_a)
    app.include(broker, handle_b)
    async with serving(app):
        with trio.fail_after(HOUR / 2):
            await watch.wait_done(2)  # both subscriptions sleep
            insert_emails(case.stand, [b'{"n": 2}'], name="b")  # wakes nobody
            await broker.publish(case.email, Job(1), name="a", customer="c")
            await settled(app, handle_a, 1)
        assert handled == [("a", handled[0][1])]
        assert handled[0][1] < 1.0
        with trio.fail_after(2 * HOUR):
            await settled(app, handle_b, 1)
    # The row of group b waited for b's poll interval.
    assert [group for group, _ in handled] == ["a", "b"]
    assert HOUR <= handled[1][1] < HOUR + 1.0


async def test_publish_during_a_claim_is_claimed_right_after_it(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = ClaimWatch(monkeypatch)
    claiming = trio.Event()
    published = trio.Event()

    async def hold_first_claim(n: int) -> None:
        if n == 1:
            # The claim has read the table (empty); the publish lands before the loop waits.
            claiming.set()
            await published.wait()

    watch.after = hold_first_claim
    broker = case.stand.broker(poll_interval=HOUR, lease=LEASE)
    handled: list[float] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        handled.append(trio.current_time())

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(HOUR / 2):
            await claiming.wait()
            await broker.publish(case.email, Job(1), name="emails", customer="c")
            published.set()
            await settled(app, handle, 1)
    # The wake was kept as a permit: the next claim ran at once, not after the hour.
    assert len(handled) == 1
    assert handled[0] < 1.0
    assert watch.times[1] < 1.0


async def test_a_row_written_by_raw_sql_waits_for_the_poll_interval(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = ClaimWatch(monkeypatch)
    broker = case.stand.broker(poll_interval=HOUR, lease=LEASE)
    handled: list[float] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        handled.append(trio.current_time())

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(HOUR / 2):
            await watch.wait_done(1)
        insert_emails(case.stand, [b'{"n": 1}'])
        with trio.fail_after(2 * HOUR):
            await settled(app, handle, 1)
    assert len(handled) == 1
    assert HOUR <= handled[0] < HOUR + 1.0


async def test_transaction_publish_wakes_after_commit_and_rollback_publishes_nothing(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = ClaimWatch(monkeypatch)
    broker = case.stand.broker(poll_interval=HOUR, lease=LEASE)
    handled: list[tuple[int, float]] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> None:
        handled.append((job.n, trio.current_time()))

    app = make_app()
    app.include(broker, handle)
    async with serving(app):
        with trio.fail_after(HOUR / 2):
            await watch.wait_done(1)
            with pytest.raises(KeyError):
                async with broker.transaction() as tx:
                    await tx.publish(case.email, Job(1), name="emails", customer="c")
                    raise KeyError("rolled back")
            await trio.sleep(10)
            assert handled == []
            assert case.stand.rows("SELECT * FROM email_jobs") == []
            assert watch.count == 1  # nothing woke the subscription
            async with broker.transaction() as tx:
                await tx.publish(case.email, Job(2), name="emails", customer="c")
                await trio.sleep(10)  # not committed yet: nothing is woken
                assert watch.count == 1
            await settled(app, handle, 1)
    assert [n for n, _ in handled] == [2]
    assert 20.0 <= handled[0][1] < 21.0


async def test_a_task_published_through_the_handlers_tx_wakes_once_the_ack_commits(
    case: Case, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    case.stand.script(NEXT_JOBS[case.name])
    insert_emails(case.stand, [b'{"n": 1}'])
    watch = ClaimWatch(monkeypatch)
    broker = case.stand.broker(poll_interval=HOUR, lease=LEASE)
    go = trio.Event()
    acked_at: list[float] = []
    handled: list[tuple[int, float]] = []

    @subscriber(InboxQueue(case.email, "emails").transactional())
    async def first(job: Job, tx: keys.Tx) -> HandlerOutcome:
        await go.wait()
        await tx.publish(NextJob, Job(job.n + 1))
        await trio.sleep(10)  # written, not yet committed: nobody is woken
        acked_at.append(trio.current_time())
        return HandlerOutcome.ack()

    @subscriber(InboxQueue(NextJob, "next"))
    async def second(job: Job) -> None:
        handled.append((job.n, trio.current_time()))

    app = make_app()
    app.include(broker, first)
    app.include(broker, second)
    async with serving(app):
        with trio.fail_after(HOUR / 2):
            await watch.wait_done(2)  # both subscriptions have claimed once
            go.set()
            await settled(app, second, 1)
    assert [n for n, _ in handled] == [2]
    assert acked_at[0] <= handled[0][1] < acked_at[0] + 1.0
