"""Limit records on every stand, in virtual time: two brokers (two processes' worth) serve one
limited queue with different limits; the second is told (a warning, or with
``on_mismatch="refuse"`` its serve fails), the same limits say nothing, and a record older
than 10 poll intervals is a process gone."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

from trinbox import (
    Attempt,
    Group,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LimitRecords,
    LockedUntil,
    Payload,
    SqlBroker,
    subscriber,
)
from trinbox.errors import SchemaError, StartupError
from trinbox.schema import DialectName, ddl_script
from trinbox.testing import VirtualClock

from .serving import make_app, serving
from .stands import STANDS, Stand, StandName, fresh_stand

DIALECT: dict[StandName, DialectName] = {
    "sqlite": "sqlite",
    "postgres": "postgres",
    "mariadb": "mysql",
}

RECORDS = LimitRecords("app_limits")
POLL = 1.0

MESSAGE = (  # after the subscription's name: subscription 'jobs' (<Subscriber ...>):
    "another process serving limit_jobs declared "
    ".limit(concurrency=3), this one declares .limit(concurrency=4); each process keeps its "
    "own limits, so declare the same limits in every process"
)


class Job(Inbox[Lease], table="limit_jobs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Ordered(Inbox[Lease], table="limit_ordered"):
    id: Annotated[int, Id(generated=True)]
    account: Annotated[str, Group(fifo=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


@pytest.fixture(params=STANDS)
def stand(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stand]:
    name: StandName = request.param
    with fresh_stand(name, tmp_path) as found:
        dialect = DIALECT[found.name]
        found.script(
            ddl_script(Job, dialect) + ddl_script(Ordered, dialect) + ddl_script(RECORDS, dialect)
        )
        yield found


def broker_of(stand: Stand, on_mismatch: Any = "warn") -> SqlBroker[Any]:
    broker = stand.broker(poll_interval=POLL)
    broker.use_limit_records(RECORDS, on_mismatch=on_mismatch)
    return broker


def app_of(broker: SqlBroker[Any], concurrency: int) -> Any:
    @subscriber(InboxQueue(Job, "jobs").limit(concurrency=concurrency))
    async def handle(message: str) -> None:
        del message

    app = make_app()
    app.include(broker, handle)
    return app


def warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings of other limits, after the subscription's name."""
    found = [r.getMessage() for r in caplog.records if r.name == "trinbox.app"]
    told = [m for m in found if "another process serving" in m]
    assert all(m.startswith("subscription 'jobs' (") for m in told)
    return [m.split("): ", 1)[1] for m in told]


async def test_the_second_process_with_other_limits_is_warned(
    stand: Stand, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox.app")
    async with serving(app_of(broker_of(stand), 3)):
        assert warned(caplog) == []
        async with serving(app_of(broker_of(stand), 4)):
            pass
    assert warned(caplog) == [MESSAGE]
    rows = sorted(str(d) for (d,) in stand.rows("SELECT declared FROM app_limits"))
    assert rows == [".limit(concurrency=3)", ".limit(concurrency=4)"]


async def test_the_same_limits_say_nothing(
    stand: Stand, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox.app")
    async with serving(app_of(broker_of(stand), 3)), serving(app_of(broker_of(stand), 3)):
        pass
    assert warned(caplog) == []


async def test_on_mismatch_refuse_fails_the_second_serve(stand: Stand, clock: VirtualClock) -> None:
    async with serving(app_of(broker_of(stand), 3)):
        with pytest.raises(StartupError) as caught, trio.fail_after(60):
            await app_of(broker_of(stand, "refuse"), 4).serve()
    assert str(caught.value).startswith("subscription 'jobs' (")
    assert str(caught.value).endswith("): " + MESSAGE)


async def test_a_record_older_than_ten_poll_intervals_is_a_process_gone(
    stand: Stand, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox.app")
    async with serving(app_of(broker_of(stand), 3)):
        pass
    await trio.sleep(POLL * 10 + 1)
    async with serving(app_of(broker_of(stand, "refuse"), 4)):
        pass
    assert warned(caplog) == []
    # The gone process's record was deleted as the new one started: no row per start for ever.
    rows = [str(d) for (d,) in stand.rows("SELECT declared FROM app_limits")]
    assert rows == [".limit(concurrency=4)"]


async def test_a_missing_record_table_stops_the_startup(stand: Stand, clock: VirtualClock) -> None:
    broker = stand.broker(poll_interval=POLL)
    broker.use_limit_records(LimitRecords("no_limits"))
    with pytest.raises(SchemaError) as caught, trio.fail_after(60):
        await app_of(broker, 3).serve()
    assert "a broker that uses limit records reads them at startup" in str(caught.value)


async def test_a_long_serving_process_keeps_its_record_and_a_new_one_is_told(
    stand: Stand, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A serving process refreshes its record every few poll intervals: one that has served
    for far longer than 10 of them is still seen by a process that starts now."""
    caplog.set_level(logging.WARNING, logger="trinbox.app")
    first = app_of(broker_of(stand), 3)
    async with serving(first):
        await trio.sleep(POLL * 100)
        async with serving(app_of(broker_of(stand), 4)):
            pass
    assert warned(caplog) == [MESSAGE]
    # Counted in its statistics: the write at startup, then one every 3 poll intervals.
    (stats,) = first.statistics()
    assert (stats.limit_record_writes, stats.failed_limit_record_writes) == (1 + 100 // 3, 0)


async def test_a_fifo_table_s_limits_are_recorded_for_the_table_whatever_the_group(
    stand: Stand, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    # A FIFO table's limits span its groups: a subscription to one group and one over every
    # group count the same leases, so their records are compared.
    caplog.set_level(logging.WARNING, logger="trinbox.app")

    def fifo_app(queue: InboxQueue[Any, Any, Any]) -> Any:
        @subscriber(queue)
        async def handle(message: str) -> None:
            del message

        app = make_app()
        app.include(broker_of(stand), handle)
        return app

    one = fifo_app(InboxQueue(Ordered, "a1").limit(concurrency=3))
    every = fifo_app(InboxQueue(Ordered, "all").every_group().limit(concurrency=4))
    async with serving(one), serving(every):
        pass
    told = [
        r.getMessage().split("): ", 1)[1]
        for r in caplog.records
        if r.name == "trinbox.app" and "another process serving" in r.getMessage()
    ]
    assert told == [
        "another process serving limit_ordered declared .limit(concurrency=3), this one "
        "declares .limit(concurrency=4); each process keeps its own limits, so declare the "
        "same limits in every process"
    ]
    assert stand.rows("SELECT DISTINCT grp FROM app_limits") == [("",)]
