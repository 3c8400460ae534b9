"""A misbehaving handler never makes a hot loop (issue 9, item 3): a handler that raises, or
returns something that is not an outcome, is retried after a backoff; its failure is logged
once per delivery; a delay past what a time column holds waits until the latest time it holds
instead of crashing serve."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta

import pytest
import trio

from trinbox import Backoff, HandlerOutcome, InboxQueue, subscriber
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR, as_utc, cells, insert_emails

FLOOD = 50  # deliveries of one row within a minute that no backoff allows


@dataclass
class Job:
    n: int


async def deliveries_in_a_minute(case: Case, result: object, backoff: Backoff | None) -> int:
    insert_emails(case.stand, [json.dumps({"n": 0}).encode()])
    count = 0
    flood = trio.Event()

    queue = InboxQueue(case.email, "emails")
    if backoff is not None:
        queue = queue.backoff(backoff)

    @subscriber(queue)
    async def handle(job: Job) -> HandlerOutcome:
        nonlocal count
        count += 1
        if count >= FLOOD:
            flood.set()
        if isinstance(result, BaseException):
            raise result
        return result  # type: ignore[return-value]  # what a buggy handler returns

    app = make_app()
    app.include(case.stand.broker(lease=HOUR), handle)
    async with serving(app):
        with trio.move_on_after(60):
            await flood.wait()
    return count


@cells()
@pytest.mark.parametrize(
    "result", [RuntimeError("broken"), True, "ack"], ids=["raises", "True", "str"]
)
async def test_a_failing_handler_is_retried_after_a_growing_backoff(
    case: Case, clock: VirtualClock, result: object, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox")
    count = await deliveries_in_a_minute(case, result, None)
    # 1 s, 2 s, 4 s, ... each up to half shorter: at most a dozen deliveries in a minute.
    assert 3 <= count <= 12, count
    failures = [r for r in caplog.records if "the handler raised" in r.getMessage()]
    assert len(failures) == count  # one line per delivery, with its traceback
    assert all(r.exc_info is not None for r in failures)


@cells(stands=["sqlite"])
async def test_backoff_none_opts_back_into_retrying_at_once(
    case: Case, clock: VirtualClock
) -> None:
    assert await deliveries_in_a_minute(case, RuntimeError("x"), Backoff.none()) >= FLOOD


@cells()
async def test_a_delay_past_what_the_column_holds_waits_until_the_latest_time_instead_of_crashing(
    case: Case, clock: VirtualClock
) -> None:
    insert_emails(case.stand, [json.dumps({"n": 0}).encode()])

    @subscriber(InboxQueue(case.email, "emails"))
    async def handle(job: Job) -> HandlerOutcome:
        return HandlerOutcome.retry_after(timedelta(seconds=2**40))

    app = make_app()
    app.include(case.stand.broker(lease=HOUR), handle)
    with trio.fail_after(30):
        async with serving(app):
            await settled(app, handle, 1)
    assert as_utc(case.stand.value("SELECT retry_after FROM email_jobs")).year == 9999
