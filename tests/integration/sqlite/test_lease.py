"""The lease form on SQLite: what only SQLite's text times ask (docs/reference.md#scenarios-lease,
Lite). Every lease scenario of every stand runs in tests/integration/matrix/test_lease.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from trinbox import SqlBroker
from trinbox._declare._inbox import spec_of
from trinbox._dialects.plans import build_plan
from trinbox._holders._base import Ack, FormContext, whole_seconds

from ..matrix.kit import lease_form
from .harness import Db
from .tables import EMAIL_JOBS, LeasedEmail

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass
class Email:
    to: str


class ManualClock:
    """A broker clock the test moves by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def test_the_lease_token_is_stored_as_fixed_width_text_and_compares_as_time(
    db: Db,
) -> None:
    # SQLite keeps times as text and compares them as text: the token is written with six
    # fraction digits, so the lease-ended check and the settlement by token compare as times.
    db.script(EMAIL_JOBS)
    clock = ManualClock(T0 + timedelta(seconds=0.5))
    broker = SqlBroker.sqlite(db.url, clock=clock)
    await broker.open()
    try:
        spec = spec_of(LeasedEmail)
        ctx = FormContext(
            spec=spec,
            dialect=broker.dialect,
            statements=build_plan(broker.dialect, spec),
            pool=broker.pool,
            clock=broker.clock,
            group="emails",
            lease=whole_seconds(broker.lease),
        )
        await broker.publish(LeasedEmail, Email("a@example.com"), name="emails", customer="c1")
        first = lease_form(ctx)
        (held,) = await first.claim(1)
        assert db.value("SELECT locked_until FROM email_jobs") == "2030-01-01 00:00:31.000000"
        # Half a second before the lease ends the row stays held; at its end it is free.
        clock.now = T0 + timedelta(seconds=30.5)
        assert await lease_form(ctx).claim(1) == []
        clock.now = T0 + timedelta(seconds=31)
        again = lease_form(ctx)
        (taken,) = await again.claim(1)
        assert (taken.id, taken.attempt) == (held.id, 2)
        assert db.value("SELECT locked_until FROM email_jobs") == "2030-01-01 00:01:01.000000"
        await again.settle(taken, Ack())
    finally:
        await broker.aclose()
    assert db.rows("SELECT * FROM email_jobs") == []
