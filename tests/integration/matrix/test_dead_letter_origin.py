"""A dead letter keeps where it came from, in every form on every stand: the move into a dead
letter group writes the row's group into its OriginGroup field, so queues sharing one dead
letter group each count, list and redrive only their own rows through the operations API
(``trinbox inspect`` and ``trinbox dead-letters`` are built on it); a redrive returns each row
to its own group unless told another, and never moves another queue's row. A grouped table
without an OriginGroup field cannot dead-letter into a group: serve refuses it. The deliveries
a dead letter reports follow how its queue counts the attempt."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

import pytest
import trio

from trinbox import (
    Attempt,
    Group,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RetryAfter,
    keys,
    subscriber,
)
from trinbox._operations.queues import dead_rows, depths, opened, queues_of, redrive
from trinbox.errors import DeclarationError
from trinbox.testing import settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import cells


@dataclass
class Email:
    to: str


def _rows(case: Case) -> list[tuple[int, str, str | None, int]]:
    found = case.stand.rows(
        "SELECT job_id, name, dead_from, attempt FROM email_jobs ORDER BY job_id"
    )
    return [(int(i), str(g), None if o is None else str(o), int(a)) for i, g, o, a in found]


async def test_queues_sharing_a_dead_letter_group_keep_their_own(case: Case) -> None:
    # Polled: on MariaDB a claim of one group can skip a row of the other that a concurrent
    # claim's scan holds locked, and no wake comes after (left to the claim's owners).
    broker = case.stand.broker(poll_interval=0.05)
    handled: list[tuple[str, int]] = []

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        handled.append(("emails", attempt))
        return HandlerOutcome.retry()

    @subscriber(InboxQueue(case.email, "alerts"))
    async def alert(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        handled.append(("alerts", attempt))
        return HandlerOutcome.retry()

    app = make_app()
    for handler in (send, alert):
        app.include(broker, handler).max_attempts(1).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(case.email, Email("a@x"), name="emails", customer="c1")
        await broker.publish(case.email, Email("b@x"), name="alerts", customer="c2")
        with trio.fail_after(10):
            await settled(app, send, 1)
            await settled(app, alert, 1)
    assert sorted(handled) == [("alerts", 1), ("emails", 1)]
    spent = case.attempts_after(1)
    assert _rows(case) == [(1, "emails.dead", "emails", spent), (2, "emails.dead", "alerts", spent)]

    emails, alerts = queues_of(app)
    async with opened(app.brokers):
        assert [d.dead for d in await depths([emails, alerts])] == [1, 1]
        for q, own in ((emails, 1), (alerts, 2)):
            listed, total = await dead_rows(q)
            assert (total, [(r.queue, r.id, r.attempts) for r in listed]) == (1, [(q.name, own, 1)])
        # The alert is never moved into the emails queue: it is reported with its origin.
        done = await redrive(emails, [2, 1, 99])
        assert (done.moved, done.elsewhere, done.missing, done.group) == (
            (1,),
            ((2, "alerts"),),
            (99,),
            "emails",
        )
        # Told another group, the alert goes there.
        done = await redrive(alerts, None, to_group="emails")
        assert (done.moved, done.elsewhere, done.missing, done.group) == ((2,), (), (), "emails")
        assert [d.dead for d in await depths([emails, alerts])] == [0, 0]
    assert _rows(case) == [(1, "emails", None, 1), (2, "emails", None, 1)]


async def test_a_redrive_into_no_queue_is_refused(case: Case) -> None:
    broker = case.stand.broker()

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(email: Email) -> None:
        pass

    app = make_app()
    app.include(broker, send).max_attempts(1).dead_letter("emails.dead")
    case.stand.execute(
        "INSERT INTO email_jobs (name, dead_from, customer, retry_after, attempt, payload) "
        "VALUES ('emails.dead', 'emails', 'c1', '2000-01-01 00:00:00', 2, ?)",
        b"{}",
    )
    (emails,) = queues_of(app)
    async with opened(app.brokers):
        for to, found in (
            ("", "''"),
            ("emails.dead", "'emails.dead' (the dead letter group itself)"),
        ):
            with pytest.raises(DeclarationError, match=re.escape(f"found to_group={found}; ")):
                await redrive(emails, None, to_group=to)
    assert _rows(case) == [(1, "emails.dead", "emails", 2)]


class Unkept(Inbox[Lease], table="email_jobs"):
    """The matrix's email table declared without its OriginGroup field."""

    job_id: Annotated[int, Id(generated=True)]
    name: Annotated[str, Group()]
    retry_after: Annotated[datetime, RetryAfter()]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@cells(forms=("lease",))
async def test_a_dead_letter_group_needs_an_origin_group(case: Case) -> None:
    broker = case.stand.broker()

    @subscriber(InboxQueue(Unkept, "emails"))
    async def send(email: Email) -> None:
        raise AssertionError("never delivered")

    # The row is there before serve: a subscription that opened would claim it.
    case.stand.execute(
        "INSERT INTO email_jobs (name, retry_after, attempt, payload) "
        "VALUES ('emails', '2000-01-01 00:00:00', 1, ?)",
        b"{}",
    )
    app = make_app()
    app.include(broker, send).max_attempts(3).dead_letter("emails.dead")
    expected = (
        f"subscription 'emails' ({send!r}): a dead letter group keeps the group each row came "
        f"from in an OriginGroup field, for its queue to list and redrive it, found "
        f"dead_letter('emails.dead') on email_jobs (Unkept) without one; add one, like "
        f"origin_group: Annotated[str | None, OriginGroup()] = None"
    )
    with trio.fail_after(10), pytest.raises(DeclarationError, match=f"^{re.escape(expected)}$"):
        await app.serve()
    assert _rows(case) == [(1, "emails", None, 1)]


@cells(forms=("row_lock",))
async def test_deliveries_of_a_queue_counting_at_claim(case: Case) -> None:
    # The row lock form counting at claim reads its column one ahead, as the lease form does;
    # without the opt-in it counts when the retry settles.
    broker = case.stand.broker(poll_interval=0.05)  # polled, as above
    attempts: list[int] = []

    @subscriber(InboxQueue(case.email, "emails").count_attempt_at_claim())
    async def send(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        return HandlerOutcome.retry()

    @subscriber(InboxQueue(case.email, "alerts"))
    async def alert(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
        attempts.append(attempt)
        return HandlerOutcome.retry()

    app = make_app()
    for handler in (send, alert):
        app.include(broker, handler).max_attempts(2).dead_letter("emails.dead")
    async with serving(app):
        await broker.publish(case.email, Email("a@x"), name="emails", customer="c1")
        with trio.fail_after(10):
            await settled(app, send, 2)
        await broker.publish(case.email, Email("b@x"), name="alerts", customer="c2")
        with trio.fail_after(10):
            await settled(app, alert, 2)
    assert attempts == [1, 2, 1, 2]
    assert _rows(case) == [(1, "emails.dead", "emails", 3), (2, "emails.dead", "alerts", 2)]
    emails, alerts = queues_of(app)
    async with opened(app.brokers):
        for q in (emails, alerts):
            listed, _ = await dead_rows(q)
            assert [r.attempts for r in listed] == [2]
