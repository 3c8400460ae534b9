"""MariaDB's deadlock on a unique index (1213), as its manual draws it: a transaction holds a
key's index entry, two more inserts of the key wait on it, the first rolls back, and the two
waiters, each holding a shared lock on the entry, both ask for it exclusively. A publish on a
connection of its own writes again (the deadlock rolled back its one statement) and finds the
other's row; a publish inside a caller's transaction cannot, since the deadlock rolled that
transaction back whole, and says so."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import trio

from trinbox.errors import LockNotAvailable
from trinbox.schema import ddl
from trinbox.typing import Published

from .matrix.test_unique import PLAIN, PlainLease, Sync
from .serving import make_app, serving
from .stands import MariaStand, fresh_stand

# The inserts of trinbox's sessions waiting on the holder's lock.
WAITING = (
    "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
    f"WHERE COMMAND = 'Query' AND INFO LIKE 'INSERT INTO `{PLAIN}`%'"
)


async def _deadlock(
    stand: MariaStand, publishes: list[Callable[[], Awaitable[object]]]
) -> list[object]:
    """Hold the key ``k`` in a transaction of the stand's own, run ``publishes`` until both
    wait on it, then roll it back: what each publish returned or raised."""
    holder = stand.connect(autocommit=False)
    watch = stand.connect()
    found: list[object] = [None] * len(publishes)

    async def run(n: int) -> None:
        try:
            found[n] = await publishes[n]()
        except LockNotAvailable as exc:
            found[n] = exc

    try:
        with holder.cursor() as cur:
            cur.execute(
                f"INSERT INTO {PLAIN} (attempt, payload, dedup) VALUES (1, %s, 'k')", (b"{}",)
            )
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                for n in range(len(publishes)):
                    nursery.start_soon(run, n)
                while True:
                    with watch.cursor() as cur:
                        cur.execute(WAITING)
                        (count,) = cur.fetchone() or (0,)
                    if count >= len(publishes):
                        break
                    await trio.sleep(0.01)  # the server's state, which no event announces
                holder.rollback()
    finally:
        holder.close()
        watch.close()
    return found


@pytest.fixture
def mariadb(tmp_path: Path) -> Iterator[MariaStand]:
    with fresh_stand("mariadb", tmp_path) as stand:
        assert isinstance(stand, MariaStand)
        for statement in ddl(PlainLease, "mysql"):
            stand.script(statement)
        yield stand


async def test_a_publish_on_its_own_connection_writes_again_after_a_deadlock(
    mariadb: MariaStand, caplog: pytest.LogCaptureFixture
) -> None:
    broker = mariadb.broker()
    app = make_app()
    app.add_broker(broker)
    caplog.set_level(logging.INFO, logger="trinbox.publish")

    async def publish() -> Published:
        return await broker.publish(PlainLease, Sync("a"), unique="k")

    async with serving(app):
        found = await _deadlock(mariadb, [publish, publish])
    assert all(isinstance(f, Published) for f in found), found
    rows = [f for f in found if isinstance(f, Published)]
    assert {r.id for r in rows} == {mariadb.value(f"SELECT id FROM {PLAIN}")}
    assert sorted(r.duplicate for r in rows) == [False, True]
    retried = [r.getMessage() for r in caplog.records if "deadlock" in r.getMessage()]
    assert retried == [
        f"publish into {PLAIN} (PlainLease): a deadlock on the unique index, writing again (try 2)"
    ]


async def test_a_publish_inside_a_transaction_cannot_be_retried_and_says_so(
    mariadb: MariaStand,
) -> None:
    broker = mariadb.broker()
    app = make_app()
    app.add_broker(broker)

    async def publish_in_a_transaction() -> Published:
        async with broker.transaction() as tx:
            return await tx.publish(PlainLease, Sync("a"), unique="k")

    async with serving(app):
        found = await _deadlock(mariadb, [publish_in_a_transaction, publish_in_a_transaction])
    (refused,) = [f for f in found if isinstance(f, LockNotAvailable)]
    (written,) = [f for f in found if isinstance(f, Published)]
    assert not written.duplicate
    assert str(refused).startswith(
        f"publish into {PLAIN} (PlainLease): a deadlock on the unique index of the Unique field "
        f"dedup ("
    )
    assert str(refused).endswith(
        ") ended the caller's transaction (the database rolled it back whole), so the publish "
        "cannot be retried inside it; retry the whole transaction"
    )
    assert refused.code == "1213"
    assert mariadb.rows(f"SELECT id FROM {PLAIN}") == [(written.id,)]
