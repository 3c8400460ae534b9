"""Group settlement (trinbox/_forms/_coalesce.py): single settlements that arrive while a round
runs go to the database together in the next round, each with its own outcome."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio
import trio.testing

from trinbox._forms._coalesce import SettleTogether
from trinbox._holders._base import Ack, Delivery, Retry, Step
from trinbox.errors import LeaseLost, TrinboxError


def delivery(n: int) -> Delivery:
    return Delivery(values={"id": n}, id=n, attempt=1)


class Database:
    """Stands in for the form's many-row settlement: records each round, and lets a test hold
    a round open until it says so."""

    def __init__(self) -> None:
        self.rounds: list[list[int]] = []
        self.hold: trio.Event | None = None
        self.lost: set[object] = set()
        self.fail_round: int | None = None

    async def run_many(self, items: Sequence[tuple[Delivery, Step]]) -> list[TrinboxError | None]:
        self.rounds.append([int(str(d.id)) for d, _ in items])
        if self.hold is not None:
            await self.hold.wait()
        if self.fail_round == len(self.rounds):
            raise RuntimeError("the round broke")
        return [LeaseLost(f"row {d.id}", id=d.id) if d.id in self.lost else None for d, _ in items]


async def test_a_settlement_on_a_quiet_queue_runs_at_once_alone() -> None:
    db = Database()
    together = SettleTogether(db.run_many)
    await together.settle(delivery(1), Ack())
    await together.settle(delivery(2), Retry())
    assert db.rounds == [[1], [2]]


async def test_settlements_arriving_during_a_round_share_the_next_one() -> None:
    db = Database()
    db.hold = trio.Event()
    together = SettleTogether(db.run_many)
    settled: list[int] = []

    async def settle(n: int) -> None:
        await together.settle(delivery(n), Ack())
        settled.append(n)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(settle, 1)
        await trio.testing.wait_all_tasks_blocked()  # round [1] is in the database
        for n in (2, 3, 4):
            nursery.start_soon(settle, n)
        await trio.testing.wait_all_tasks_blocked()
        assert db.rounds == [[1]]
        db.hold.set()
    assert [sorted(r) for r in db.rounds] == [[1], [2, 3, 4]]
    assert sorted(settled) == [1, 2, 3, 4]


async def test_each_settlement_of_a_round_gets_its_own_outcome() -> None:
    db = Database()
    db.hold = trio.Event()
    db.lost = {3}
    together = SettleTogether(db.run_many)
    outcomes: dict[int, str] = {}

    async def settle(n: int) -> None:
        try:
            await together.settle(delivery(n), Ack())
            outcomes[n] = "settled"
        except LeaseLost as exc:
            outcomes[n] = f"lost {exc.id}"

    async with trio.open_nursery() as nursery:
        for n in (1, 2, 3):
            nursery.start_soon(settle, n)
            await trio.testing.wait_all_tasks_blocked()
        db.hold.set()
    assert db.rounds == [[1], [2, 3]]
    assert outcomes == {1: "settled", 2: "settled", 3: "lost 3"}


async def test_a_cancelled_waiter_leaves_and_the_next_round_still_runs() -> None:
    db = Database()
    db.hold = trio.Event()
    together = SettleTogether(db.run_many)
    settled: list[int] = []

    async def settle(n: int, scope: trio.CancelScope | None = None) -> None:
        with scope or trio.CancelScope():
            await together.settle(delivery(n), Ack())
            settled.append(n)

    gone = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(settle, 1)
        await trio.testing.wait_all_tasks_blocked()
        # Row 2 would run the next round; it is cancelled while it waits.
        nursery.start_soon(settle, 2, gone)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(settle, 3)
        await trio.testing.wait_all_tasks_blocked()
        gone.cancel()
        await trio.testing.wait_all_tasks_blocked()
        db.hold.set()
    assert db.rounds == [[1], [3]]
    assert sorted(settled) == [1, 3]


async def test_a_broken_round_fails_its_settlements_and_the_next_round_runs() -> None:
    db = Database()
    db.hold = trio.Event()
    db.fail_round = 1
    together = SettleTogether(db.run_many)
    outcomes: dict[int, str] = {}

    async def settle(n: int) -> None:
        try:
            await together.settle(delivery(n), Ack())
            outcomes[n] = "settled"
        except TrinboxError as exc:
            outcomes[n] = str(exc)
        except RuntimeError as exc:
            outcomes[n] = f"runner: {exc}"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(settle, 1)
        await trio.testing.wait_all_tasks_blocked()
        db.hold.set()
    # The round's own task sees the error itself.
    assert outcomes == {1: "runner: the round broke"}
    db.hold = trio.Event()
    db.fail_round = 3
    outcomes.clear()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(settle, 2)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(settle, 3)
        await trio.testing.wait_all_tasks_blocked()
        db.hold.set()
    # Row 2's round ran first and settled; row 3's round broke: its task ran that round.
    assert db.rounds == [[1], [2], [3]]
    assert outcomes == {2: "settled", 3: "runner: the round broke"}


@pytest.mark.parametrize("waiters", [1, 3])
async def test_a_waiter_of_a_broken_round_is_told_its_row_is_in_doubt(waiters: int) -> None:
    db = Database()
    db.hold = trio.Event()
    db.fail_round = 2
    together = SettleTogether(db.run_many)
    outcomes: dict[int, str] = {}

    async def settle(n: int) -> None:
        try:
            await together.settle(delivery(n), Ack())
            outcomes[n] = "settled"
        except TrinboxError as exc:
            outcomes[n] = str(exc)
        except RuntimeError:
            outcomes[n] = "ran the broken round"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(settle, 1)
        await trio.testing.wait_all_tasks_blocked()
        for n in range(2, 2 + waiters):
            nursery.start_soon(settle, n)
            await trio.testing.wait_all_tasks_blocked()
        db.hold.set()
    assert outcomes[1] == "settled"
    assert outcomes[2] == "ran the broken round"
    for n in range(3, 2 + waiters):
        assert outcomes[n] == (
            f"the settlement of row {n} ran with others and was interrupted "
            f"(RuntimeError('the round broke')); the row is settled, or returns to its queue "
            f"when its hold ends"
        )
