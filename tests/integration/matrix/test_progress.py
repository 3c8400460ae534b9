"""Progress (issue 21, item 5): a handler reports how far it has got (``keys.Progress``,
``progress.set(fraction)``, no I/O). In the lease form the keeper's next extension writes the
newest value into the row's ``Progress`` column, in the same statement (a round with nothing
new runs the plain extension), where another connection reads it; in every form
``app.statistics()`` shows the latest value of each delivery in work."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

import pytest
import trio

from trinbox import Id, Inbox, InboxQueue, Lease, LockedUntil, Payload, Progress, keys, subscriber
from trinbox.testing import VirtualClock, settled

from ..serving import make_app, serving
from .conftest import Case
from .kit import cells


@dataclass
class Render:
    n: int


class RenderJob(Inbox[Lease], table="render_jobs"):
    id: Annotated[int, Id()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    done: Annotated[float | None, Progress()] = None
    payload: Annotated[bytes, Payload()]


def progress_of(case: Case, row_id: int) -> Any:
    """The row's Progress column, read by the stand's own driver (another connection)."""
    return case.stand.value("SELECT done FROM render_jobs WHERE id = ?", row_id)


@cells(forms=["lease"])
async def test_the_keepers_next_extension_writes_the_newest_progress_into_the_row(
    case: Case, clock: VirtualClock
) -> None:
    # A lease of 3 s: a round every second. The handler reports 0.25, then 0.5 and 0.75 before
    # the next round: each round writes the newest value, and a round with nothing new keeps it.
    broker = case.stand.broker(lease=3, poll_interval=3600)
    first, second, go, finish = trio.Event(), trio.Event(), trio.Event(), trio.Event()

    @subscriber(InboxQueue(RenderJob, "renders"))
    async def render(job: Render, progress: keys.Progress) -> None:
        assert progress.value is None
        progress.set(0.25)
        first.set()
        await go.wait()
        progress.set(0.5)
        progress.set(0.75)
        assert progress.value == 0.75
        second.set()
        await finish.wait()

    app = make_app()
    app.on_startup(lambda: broker.create_tables(RenderJob))
    app.include(broker, render)
    async with serving(app):
        start = trio.current_time()
        await broker.publish(RenderJob, Render(1), id=7)
        with trio.fail_after(1):
            await first.wait()
        assert app.statistics(render).progress == ((7, 0.25),)
        assert progress_of(case, 7) is None  # no round yet: nothing written
        await trio.sleep_until(start + 1.5)  # the round at 1 s
        assert progress_of(case, 7) == 0.25
        assert app.statistics(render).lease_extensions == 1
        await trio.sleep_until(start + 2.5)  # the round at 2 s: nothing new, the value stays
        assert progress_of(case, 7) == 0.25
        assert app.statistics(render).lease_extensions == 2
        go.set()
        with trio.fail_after(1):
            await second.wait()
        assert app.statistics(render).progress == ((7, 0.75),)
        await trio.sleep_until(start + 3.5)  # the round at 3 s writes the newest
        assert progress_of(case, 7) == 0.75
        assert app.statistics(render).lease_extensions == 3
        assert app.statistics(render).leases_lost == 0
        finish.set()
        with trio.fail_after(5):
            await settled(app, render, 1)
        assert app.statistics(render).progress == ()
        assert app.statistics(render).settle_errors == ()


@cells(forms=["lease"])
async def test_a_round_writes_each_rows_own_value_and_keeps_the_others(
    case: Case, clock: VirtualClock
) -> None:
    # Three rows in work in one round: two reported (different values), one did not.
    broker = case.stand.broker(lease=3, poll_interval=3600)
    started = {n: trio.Event() for n in (1, 2, 3)}
    finish = trio.Event()

    @subscriber(InboxQueue(RenderJob, "renders").workers(3))
    async def render(job: Render, progress: keys.Progress) -> None:
        if job.n != 3:
            progress.set(job.n / 10)
        started[job.n].set()
        await finish.wait()

    app = make_app()
    app.on_startup(lambda: broker.create_tables(RenderJob))
    app.include(broker, render)
    async with serving(app):
        start = trio.current_time()
        for n in (1, 2, 3):
            await broker.publish(RenderJob, Render(n), id=n)
        with trio.fail_after(1):
            for event in started.values():
                await event.wait()
        await trio.sleep_until(start + 1.5)
        assert [progress_of(case, n) for n in (1, 2, 3)] == [0.1, 0.2, None]
        assert sorted(app.statistics(render).progress, key=lambda p: str(p[0])) == [
            (1, 0.1),
            (2, 0.2),
            (3, None),
        ]
        finish.set()
        with trio.fail_after(5):
            await settled(app, render, 3)


async def test_without_a_progress_column_statistics_show_it_in_every_form(
    case: Case, clock: VirtualClock
) -> None:
    # The matrix's table has no Progress column: nothing is written, statistics show it.
    broker = case.stand.broker(lease=3, poll_interval=3600)
    reported, finish = trio.Event(), trio.Event()

    @subscriber(InboxQueue(case.email, "emails"))
    async def send(job: Render, progress: keys.Progress) -> None:
        progress.set(1)
        reported.set()
        await finish.wait()

    app = make_app()
    app.include(broker, send)
    async with serving(app):
        start = trio.current_time()
        await broker.publish(case.email, Render(1), name="emails", customer="c")
        with trio.fail_after(1):
            await reported.wait()
        await trio.sleep_until(start + 1.5)  # a lease round, in the lease form
        ((_, value),) = app.statistics(send).progress
        assert value == 1.0
        finish.set()
        with trio.fail_after(5):
            await settled(app, send, 1)


@pytest.mark.parametrize(
    ("value", "error", "found"),
    [
        (1.5, ValueError, "found 1.5;"),
        (-0.1, ValueError, "found -0.1;"),
        (float("nan"), ValueError, "found nan;"),
        (40, ValueError, "found 40;"),
        (True, TypeError, "found True of type bool"),
        ("0.4", TypeError, "found '0.4' of type str"),
    ],
)
def test_a_fraction_outside_0_to_1_is_refused(
    value: Any, error: type[Exception], found: str
) -> None:
    progress = keys.Progress()
    with pytest.raises(error) as caught:
        progress.set(value)
    message = str(caught.value)
    assert message.startswith(
        "keys.Progress.set takes the fraction of the work done, a number from 0 to 1, "
    )
    assert found in message
    assert "like progress.set(3 / 10)" in message
    assert progress.value is None
    progress.set(0)
    progress.set(1)
    assert progress.value == 1.0
