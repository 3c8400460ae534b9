"""Backoff policies, outcome validation, and handlers refused where they are bound (issue 9,
item 3)."""

from __future__ import annotations

import functools
import random
from datetime import timedelta

import pytest

from trinbox import Backoff, HandlerOutcome, InboxQueue, subscriber

from ._tables import LeasedEmail as LeaseJob

S = timedelta(seconds=1)


def test_exponential_doubles_from_its_base_up_to_its_cap() -> None:
    policy = Backoff.exponential(1.0, cap=10.0, jitter=0.0)
    assert [policy.delay(n) for n in range(1, 7)] == [S, 2 * S, 4 * S, 8 * S, 10 * S, 10 * S]


def test_a_row_retried_for_ever_never_overflows() -> None:
    policy = Backoff.exponential(1.0, cap=3600.0, jitter=0.0)
    assert policy.delay(10**9) == timedelta(hours=1)


def test_jitter_takes_at_most_its_fraction_off() -> None:
    policy = Backoff.exponential(8.0, cap=8.0, jitter=0.5)
    rng = random.Random(7)
    delays = [policy.delay(1, rng) for _ in range(200)]
    assert all(4 * S <= d <= 8 * S for d in delays)
    assert len(set(delays)) > 100  # spread, not one value


def test_linear_constant_and_none() -> None:
    assert [Backoff.linear(2.0, cap=5.0).delay(n) for n in (1, 2, 3)] == [2 * S, 4 * S, 5 * S]
    assert Backoff.constant(timedelta(seconds=3)).delay(9) == 3 * S
    assert Backoff.none().delay(5) == timedelta(0)


def test_the_default_backoff_starts_at_a_second_and_stops_at_five_minutes() -> None:
    from trinbox._api.backoff import DEFAULT_BACKOFF

    assert timedelta(seconds=0.5) <= DEFAULT_BACKOFF.delay(1) <= S
    assert DEFAULT_BACKOFF.delay(100) <= timedelta(minutes=5)


def test_bad_policies_are_refused_where_they_are_made() -> None:
    with pytest.raises(ValueError, match="jitter is a fraction"):
        Backoff.exponential(jitter=2.0)
    with pytest.raises(ValueError, match="waits zero or more"):
        Backoff.constant(-1.0)
    with pytest.raises(TypeError, match="a backoff duration is a timedelta or seconds"):
        Backoff.linear("1s")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"a backoff is a trinbox\.Backoff"):
        InboxQueue(LeaseJob, "q").backoff(5)  # type: ignore[arg-type]


def test_an_outcome_of_an_unknown_kind_is_refused_where_it_is_made() -> None:
    with pytest.raises(
        ValueError, match=r"an outcome is ack, retry, retry_after, snooze or drop, found 'ack '"
    ):
        HandlerOutcome("ack ")
    with pytest.raises(ValueError, match="only retry_after and snooze carry a delay"):
        HandlerOutcome("ack", timedelta(seconds=1))
    with pytest.raises(ValueError, match="only retry_after and snooze carry a delay"):
        HandlerOutcome("snooze")
    with pytest.raises(TypeError, match="a retry delay is a timedelta"):
        HandlerOutcome.retry_after(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^a snooze delay is a timedelta, found 5; pass e\.g\."):
        HandlerOutcome.snooze(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^a snooze delay is zero or more, found -1 day"):
        HandlerOutcome.snooze(timedelta(seconds=-1))
    with pytest.raises(ValueError, match="follow-up messages are written with the ack"):
        HandlerOutcome.snooze(timedelta(seconds=1)).reply("x", b"")


def test_a_sync_handler_or_a_non_callable_is_refused_where_it_is_bound() -> None:
    queue = InboxQueue(LeaseJob, "q")

    def plain(job: bytes) -> None:
        pass

    with pytest.raises(TypeError, match=r"found the plain function .*plain for queue 'q'"):
        subscriber(queue)(plain)
    with pytest.raises(TypeError, match="found 42 for queue 'q'"):
        subscriber(queue)(42)  # type: ignore[call-overload]

    async def handle(job: bytes, extra: int) -> None:
        pass

    subscriber(queue)(functools.partial(handle, extra=1))


@pytest.mark.parametrize("bad", [0, -1.0, timedelta(0)])
def test_a_poll_interval_or_lease_of_zero_or_less_is_refused_where_it_is_set(bad: object) -> None:
    from trinbox import SqlBroker

    with pytest.raises(ValueError, match="a poll interval is positive"):
        InboxQueue(LeaseJob, "q").poll_interval(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a lease is positive"):
        InboxQueue(LeaseJob, "q").lease(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a poll interval is positive"):
        SqlBroker.sqlite("sqlite:///x.db", poll_interval=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a lease is positive"):
        SqlBroker.sqlite("sqlite:///x.db", lease=bad)  # type: ignore[arg-type]
