"""README "Snooze": its service, run in virtual time on SQLite from an empty directory, prints
what the README shows, and its statistics are the ones the README reads; the refusal quoted for
a table without a RetryAfter field is the one a snooze there logs."""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

from trinbox import Attempt, HandlerOutcome, Id, Inbox, InboxQueue, Lease, LockedUntil, Payload
from trinbox import subscriber as subscribe
from trinbox.testing import TrioClock, VirtualClock, settled

from .readme import README, block, shown
from .serving import make_app, serving
from .stands import fresh_stand


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    monkeypatch.chdir(tmp_path)  # its sqlite:///reports.db
    module = types.ModuleType("report")
    sys.modules[module.__name__] = module
    try:
        exec(block("readme_snooze"), module.__dict__)
        yield module
    finally:
        del sys.modules[module.__name__]


async def test_the_report_snoozes_three_times_and_goes_out(
    report: types.ModuleType, clock: VirtualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    m: Any = report
    m.broker.clock = TrioClock()  # the snoozes come due in virtual time
    with trio.fail_after(3600):
        async with trio.open_nursery() as nursery:
            await nursery.start(m.app.serve)
            await settled(m.app, m.mail_report, 4)
            m.app.shutdown()
    assert capsys.readouterr().out.splitlines() == shown("readme_snooze_output").splitlines()
    stats = m.app.statistics(m.mail_report)
    counts = ", ".join(
        f"`{name}={getattr(stats, name)}`"
        for name in ("snoozed", "retried", "retried_after", "acked", "dead_lettered")
    )
    assert f"counts them apart from retries: {counts}." in _flat(README.read_text())
    assert (stats.snoozed, stats.acked, stats.dead_lettered) == (3, 1, 0)


class Job(Inbox[Lease], table="plain_jobs"):
    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt()]
    locked_until: Annotated[Any, LockedUntil()]
    payload: Annotated[bytes, Payload()]


async def test_the_refusal_without_retry_after_is_the_one_quoted(
    tmp_path: Path, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trinbox")

    @subscribe(InboxQueue(Job, "jobs"))
    async def poll(job: bytes) -> HandlerOutcome:
        return HandlerOutcome.snooze(timedelta(seconds=60))

    with fresh_stand("sqlite", tmp_path) as stand:
        broker = stand.broker()
        app = make_app()
        app.include(broker, poll).max_attempts(1).dead_letter("plain_jobs_dead")
        app.on_startup(lambda: broker.create_tables(Job, dead_letter="plain_jobs_dead"))
        async with serving(app):
            await broker.publish(Job, b"{}")
            with trio.fail_after(60):
                await settled(app, poll, 1)
    (error,) = {str(r.exc_info[1]) for r in caplog.records if r.exc_info and r.exc_info[1]}
    quoted = error.split("): ", 1)[1]
    assert quoted.startswith("a snooze holds the row back")
    assert f"*{_flat(quoted)}*" in _flat(README.read_text())
