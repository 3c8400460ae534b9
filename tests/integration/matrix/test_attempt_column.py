"""What the README says of the ``attempt`` column as SQL reads it: the forms that count at the
claim (lease, advisory, and row lock with ``count_attempt_at_claim()``) hold the *next*
attempt, so a row dead-lettered after ``max_attempts(3)`` reads 4 where its handler saw
attempts 1, 2 and 3; the row lock form counts when a retry settles, and reads 3."""

from __future__ import annotations

from dataclasses import dataclass

import trio

from trinbox import HandlerOutcome, InboxQueue, keys, subscriber
from trinbox.testing import settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import HOUR, cells


@dataclass
class Job:
    n: int


async def _dead_letter_after_three(case: Case, *, at_claim: bool) -> tuple[list[int], object]:
    broker = case.stand.broker(poll_interval=HOUR)
    seen: list[int] = []
    queue = InboxQueue(case.finished, "emails")
    if at_claim:
        queue = queue.count_attempt_at_claim()

    @subscriber(queue)
    async def fail(job: Job, attempt: keys.Attempt) -> HandlerOutcome:
        seen.append(attempt)
        return HandlerOutcome.retry()

    app = make_app()
    app.include(broker, fail).max_attempts(3).dead_letter("dead")
    async with serving(app):
        await broker.publish(case.finished, Job(1), name="emails", customer="c1")
        with trio.fail_after(30):
            await settled(app, fail, 3)
    (column,) = case.stand.rows("SELECT attempt FROM email_jobs WHERE name = 'dead'")
    return seen, column[0]


async def test_the_dead_letters_attempt_column_after_three_deliveries(case: Case) -> None:
    seen, column = await _dead_letter_after_three(case, at_claim=False)
    assert seen == [1, 2, 3]
    assert column == (3 if case.form == "row_lock" else 4)


@cells(forms=["row_lock"])
async def test_counting_at_claim_the_row_lock_column_is_one_ahead_too(case: Case) -> None:
    seen, column = await _dead_letter_after_three(case, at_claim=True)
    assert seen == [1, 2, 3]
    assert column == 4
