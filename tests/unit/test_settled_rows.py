"""``SettledRows``: what wakes a ``broker.wait`` early, and what the broker's announcer sends
(trinbox/_broker/waiting.py). Settlements of one table coalesce into one announcement while
the announcer is busy; a settlement heard of from elsewhere is never announced again."""

from __future__ import annotations

import trio
import trio.testing

from trinbox._broker.waiting import SettledRows


async def test_settlements_while_the_announcer_is_busy_coalesce_per_table() -> None:
    rows = SettledRows()
    rows.announcing(True)
    for _ in range(50):
        rows.settled_here("b_jobs")
        rows.settled_here("a_jobs")
    assert await rows.unannounced() == ["a_jobs", "b_jobs"]
    assert rows.take_unannounced() == []


async def test_the_announcer_waits_for_a_settlement_here() -> None:
    rows = SettledRows()
    rows.announcing(True)
    got: list[list[str]] = []

    async def announcer() -> None:
        got.append(await rows.unannounced())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(announcer)
        await trio.testing.wait_all_tasks_blocked()
        rows.settled("heard_of_jobs")  # from another process: its settler announced it
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        rows.settled_here("jobs")
    assert got == [["jobs"]]


def test_without_an_announcer_nothing_is_kept() -> None:
    rows = SettledRows()
    rows.settled_here("jobs")
    assert rows.take_unannounced() == []
    rows.announcing(True)
    rows.settled_here("jobs")
    rows.announcing(False)
    assert rows.take_unannounced() == []


def test_a_settlement_wakes_the_waits_on_its_table_and_a_reconnect_wakes_all() -> None:
    rows = SettledRows()
    a, b = rows.event("a_jobs"), rows.event("b_jobs")
    rows.settled("a_jobs")
    assert (a.is_set(), b.is_set()) == (True, False)
    assert rows.event("a_jobs") is not a  # the next wait takes a fresh event
    rows.all_settled()
    assert b.is_set()
