"""Declaring limits (``InboxQueue.limit``): what a queue records, and every refusal's whole
message (the rule, what was found, the fix)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Annotated, Any

import pytest

from trinbox import (
    Advisory,
    Attempt,
    Group,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    Rate,
    Rates,
    RetryAfter,
    RowLock,
)
from trinbox._declare._inbox import spec_of
from trinbox._declare._limits import ClaimLimits
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.plans import build_plan
from trinbox.errors import DeclarationError, UnsupportedForm
from trinbox.schema import DialectName


class Job(Inbox[Lease], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group()]
    tenant: str | None
    due: Annotated[datetime, RetryAfter()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Ordered(Inbox[Lease], table="ordered"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group(fifo=True)]
    tenant: str
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Locked(Inbox[RowLock], table="locked"):
    id: Annotated[int, Id(generated=True)]
    tenant: str
    payload: Annotated[bytes, Payload()]


class Keyed(Inbox[Advisory], table="keyed", advisory_lock="keyed-{tenant}"):
    id: Annotated[int, Id(generated=True)]
    tenant: str
    payload: Annotated[bytes, Payload()]


def whole(message: str) -> str:
    return "^" + re.escape(message) + "$"


async def ids(conn: Any, group: str | None, limit: int) -> list[object]:
    return []


def test_a_per_key_limit_and_a_whole_queue_cap_are_recorded_on_the_queue() -> None:
    queue = InboxQueue(Job, "sync")
    assert queue.limits is None
    limited = queue.limit(key="tenant", concurrency=3).limit(concurrency=20)
    assert limited.limits is not None
    assert limited.limits.key is not None and limited.limits.key.column == "tenant"
    assert (limited.limits.per_key, limited.limits.whole) == (3, 20)
    assert limited.limits.label == ".limit(key='tenant', concurrency=3).limit(concurrency=20)"
    # A new queue each time: the first is as it was.
    assert queue.limits is None
    assert InboxQueue(Job, "sync").limit(concurrency=2).limits == ClaimLimits(whole=2)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_a_limit_is_one_row_or_more(bad: object) -> None:
    with pytest.raises(
        ValueError,
        match=whole(
            f"jobs (Job): a limit lets one row or more be in work at once, found "
            f".limit(key='tenant', concurrency={bad!r}); pass concurrency=N with an int N >= 1"
        ),
    ):
        InboxQueue(Job, "sync").limit(key="tenant", concurrency=bad)  # type: ignore[call-overload]


def test_a_key_is_a_field_of_the_row() -> None:
    fields = "'id', 'queue', 'tenant', 'due', 'payload'"
    with pytest.raises(
        DeclarationError,
        match=whole(
            "jobs (Job): a limit's key is a field of the row, found .limit(key='customer', "
            f"concurrency=3) and no field 'customer'; pass key= one of {fields}"
        ),
    ):
        InboxQueue(Job, "sync").limit(key="customer", concurrency=3)
    # The lease's own field is no key: every live row's lease differs.
    with pytest.raises(DeclarationError, match="no field 'locked_until'"):
        InboxQueue(Job, "sync").limit(key="locked_until", concurrency=3)
    with pytest.raises(
        TypeError,
        match=whole(
            "jobs (Job): a limit's key is the name of a field of the row, found .limit(key=3, "
            f"concurrency=3) (int); pass key= one of {fields}"
        ),
    ):
        InboxQueue(Job, "sync").limit(key=3, concurrency=3)  # type: ignore[call-overload]


def test_a_row_lock_table_takes_a_limit() -> None:
    limited = InboxQueue(Locked, "q").limit(key="tenant", concurrency=3).limit(concurrency=5)
    assert limited.limits is not None
    assert limited.limits.label == ".limit(key='tenant', concurrency=3).limit(concurrency=5)"


def test_an_advisory_table_takes_a_concurrency_but_no_rate() -> None:
    limited = InboxQueue(Keyed, "q").limit(key="tenant", concurrency=3).limit(concurrency=5)
    assert limited.limits is not None
    assert limited.limits.label == ".limit(key='tenant', concurrency=3).limit(concurrency=5)"
    with pytest.raises(
        DeclarationError,
        match=whole(
            "keyed (Keyed): a rate is supported for now on Inbox[Lease] tables only (its "
            "starts are spent in the claim's short transaction, behind the table's limit "
            "lock), found .limit(key='tenant', rate=Rate(2, "
            "per=datetime.timedelta(seconds=1)), rates=Rates(table='app_rates', schema=None)) "
            "on an Inbox[Advisory] table; declare the table Inbox[Lease] with a LockedUntil "
            "field, or limit its concurrency instead (.limit(key=..., concurrency=N))"
        ),
    ):
        InboxQueue(Keyed, "q").limit(
            key="tenant", rate=Rate(2, per=timedelta(seconds=1)), rates=Rates("app_rates")
        )


class Counted(Inbox[RowLock], table="counted"):
    id: Annotated[int, Id(generated=True)]
    tenant: str
    attempt: Annotated[int, Attempt()]
    payload: Annotated[bytes, Payload()]


def test_a_limit_and_the_count_at_claim_refuse_each_other() -> None:
    with pytest.raises(
        DeclarationError,
        match=whole(
            "counted (Counted): .count_attempt_at_claim() commits each claim's transaction at "
            "the count, and a limit's slots are locks of that transaction, held until the row "
            "settles, found .limit(key='tenant', concurrency=3); drop .limit() or "
            ".count_attempt_at_claim()"
        ),
    ):
        InboxQueue(Counted, "q").limit(key="tenant", concurrency=3).count_attempt_at_claim()
    with pytest.raises(
        DeclarationError,
        match=whole(
            "counted (Counted): .count_attempt_at_claim() commits each claim's transaction at "
            "the count, and a limit's slots are locks of that transaction, held until the row "
            "settles, found .limit(concurrency=2) after .count_attempt_at_claim(); drop "
            ".limit() or .count_attempt_at_claim()"
        ),
    ):
        InboxQueue(Counted, "q").count_attempt_at_claim().limit(concurrency=2)


def test_a_fifo_lease_table_takes_a_concurrency_and_a_custom_claim_none() -> None:
    one = InboxQueue(Ordered, "q").limit(key="tenant", concurrency=3).limit(concurrency=5)
    assert one.limits is not None and one.limits.key is not None
    assert (one.limits.key.field, one.limits.per_key, one.limits.whole) == ("tenant", 3, 5)
    every = InboxQueue(Ordered, "q").every_group().limit(key="tenant", concurrency=2)
    assert every.serves_every_group and every.limits is not None and every.limits.per_key == 2
    with pytest.raises(
        DeclarationError,
        match=whole(
            "jobs (Job): .limit() is supported for now beside no .custom_claim() (the limit "
            "lives in trinbox's claim), found .limit(concurrency=3); drop one of them"
        ),
    ):
        InboxQueue(Job, "q").custom_claim(ids).limit(concurrency=3)


def test_a_fifo_table_takes_no_rate_for_now() -> None:
    from datetime import timedelta

    from trinbox import Rate, Rates

    rate = Rate(3, per=timedelta(seconds=10))
    refused = whole(
        "ordered (Ordered): a rate is supported for now beside no Group(fifo=True) (a rate's "
        "state is kept per group of a queue, and a FIFO table's limits span its groups), "
        "found .limit(key='tenant', rate=Rate(3, per=datetime.timedelta(seconds=10)), "
        "rates=Rates(table='app_rates', schema=None)); limit the concurrency there "
        "(.limit(key=..., concurrency=N)), or drop the rate or fifo=True"
    )
    with pytest.raises(DeclarationError, match=refused):
        InboxQueue(Ordered, "q").limit(key="tenant", rate=rate, rates=Rates("app_rates"))
    with pytest.raises(DeclarationError, match=refused):
        InboxQueue(Ordered, "q").limit(key="tenant", concurrency=2).limit(
            key="tenant", rate=rate, rates=Rates("app_rates")
        )
    with pytest.raises(
        DeclarationError,
        match=whole(
            "jobs (Job): .custom_claim() claims rows of a row lock or lease table by the "
            "queue's own function, found .limit(concurrency=3); drop it or the custom claim"
        ),
    ):
        InboxQueue(Job, "q").limit(concurrency=3).custom_claim(ids)


def test_each_kind_of_limit_is_declared_once() -> None:
    with pytest.raises(
        DeclarationError,
        match=whole(
            "jobs (Job): a queue takes one limit for the whole queue, found "
            ".limit(concurrency=3) and then .limit(concurrency=4); keep one of them"
        ),
    ):
        InboxQueue(Job, "q").limit(concurrency=3).limit(concurrency=4)
    with pytest.raises(
        DeclarationError,
        match=whole(
            "jobs (Job): a queue takes one per-key limit for now, found .limit(key='tenant', "
            "concurrency=3) and then .limit(key='queue', concurrency=2); keep one of them"
        ),
    ):
        InboxQueue(Job, "q").limit(key="tenant", concurrency=3).limit(key="queue", concurrency=2)


class OrderedLocked(Inbox[RowLock], table="ordered_locked"):
    id: Annotated[int, Id(generated=True)]
    queue: Annotated[str, Group(fifo=True)]
    tenant: str
    payload: Annotated[bytes, Payload()]


def test_a_fifo_row_lock_table_takes_a_limit_over_one_group_or_every_group() -> None:
    one = InboxQueue(OrderedLocked, "q").limit(key="tenant", concurrency=2)
    assert one.limits is not None and one.limits.per_key == 2
    every = InboxQueue(OrderedLocked, "q").every_group().limit(concurrency=4)
    assert every.serves_every_group and every.limits is not None and every.limits.whole == 4


def test_a_rate_is_n_starts_per_period() -> None:
    from datetime import timedelta

    from trinbox import Rate, Rates

    rates = Rates("app_rates")
    limited = InboxQueue(Job, "sync").limit(
        key="tenant", concurrency=2, rate=Rate(3, per=timedelta(seconds=10)), rates=rates
    )
    assert limited.limits is not None
    assert limited.limits.per_key == 2
    assert limited.limits.key_rate == Rate(3, per=timedelta(seconds=10))
    assert limited.limits.rates == rates
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="a rate lets one start or more per period"):
            Rate(bad, per=timedelta(seconds=1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a rate's period is a timedelta of a millisecond"):
        Rate(3, per=timedelta(microseconds=10))
    with pytest.raises(TypeError, match="a rate keeps each key's state in a rate table"):
        InboxQueue(Job, "sync").limit(key="tenant", rate=Rate(3, per=timedelta(seconds=1)))  # type: ignore[call-overload]
    # Per-key limits share one key; a queue keeps its rates in one table.
    with pytest.raises(DeclarationError, match="a queue's per-key limits share one key"):
        InboxQueue(Job, "sync").limit(key="tenant", concurrency=2).limit(
            key="queue", rate=Rate(3, per=timedelta(seconds=1)), rates=rates
        )
    with pytest.raises(DeclarationError, match="keeps its rates in one rate table"):
        InboxQueue(Job, "sync").limit(
            key="tenant", rate=Rate(3, per=timedelta(seconds=1)), rates=rates
        ).limit(rate=Rate(9, per=timedelta(seconds=1)), rates=Rates("other"))
    # The advance is starts x per / n, rounded up to the microsecond.
    assert Rate(3, per=timedelta(seconds=10)).advance_us(3) == 10_000_000
    assert Rate(3, per=timedelta(seconds=10)).advance_us(1) == 3_333_334


@pytest.mark.parametrize("dialect", ["postgres", "mysql", "sqlite"])
def test_a_rate_table_s_ddl(dialect: DialectName) -> None:
    from trinbox import Rates
    from trinbox.schema import ddl

    (create,) = ddl(Rates("app_rates", schema="ops"), dialect)
    assert create.startswith("CREATE TABLE IF NOT EXISTS ")
    assert "tat BIGINT NOT NULL" in create
    assert "PRIMARY KEY (tbl, grp, rate_key)" in create


def test_mysql_s_advisory_slots_take_a_concurrency_of_at_most_1000() -> None:
    spec = spec_of(Keyed)
    fits = InboxQueue(Keyed, "q").limit(key="tenant", concurrency=1000).limits
    assert build_plan(MySqlDialect(), spec, limits=fits).key_slots is not None
    over = InboxQueue(Keyed, "q").limit(key="tenant", concurrency=3).limit(concurrency=1001)
    with pytest.raises(
        UnsupportedForm,
        match=whole(
            "keyed (Keyed): .limit() on an Inbox[Advisory] table tries its slots in recursive "
            "CTEs, which MySQL stops past cte_max_recursion_depth (1000 by default), found "
            ".limit(key='tenant', concurrency=3).limit(concurrency=1001); pass a concurrency "
            "of at most 1000, or declare the table Inbox[Lease]"
        ),
    ):
        build_plan(MySqlDialect(), spec, limits=over.limits)
