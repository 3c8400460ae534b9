"""Custom events (``trinbox.outbox.custom_relay``) on every stand: a relay over a service's own
record table, through its own fetch, ack, retry, discard and recover statements, sending to a
real HTTP receiver. Committed records are sent and marked; a refused send is retried after the
backoff; a sink's ``drop()`` and spent attempts discard; records a dead relay left taken are
given back by ``recover`` at startup and then sent; fetches of two relays side by side never
take one record twice; a missing table stops the startup; an events object without its
methods is refused where it is given."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
import trio
import trio.lowlevel

from trinbox import Backoff, HandlerOutcome, SqlBroker, keys
from trinbox.outbox import ID_HEADER, Record, custom_relay

from .http_sink import post_to, receiver
from .matrix.kit import native
from .serving import make_app, serving
from .stands import STANDS, Stand, StandName, fresh_stand

FAST = Backoff.constant(0.05)
TAKEN_FOR = 60.0  # seconds after which recover gives a taken record back

TABLE: dict[StandName, str] = {
    "sqlite": (
        "CREATE TABLE shop_outbox (id INTEGER PRIMARY KEY, topic TEXT NOT NULL, body BLOB NOT "
        "NULL, tries INTEGER NOT NULL DEFAULT 0, due_at REAL NOT NULL DEFAULT 0, taken_at REAL, "
        "sent_at REAL, given_up INTEGER NOT NULL DEFAULT 0)"
    ),
    "postgres": (
        "CREATE TABLE shop_outbox (id BIGINT PRIMARY KEY, topic TEXT NOT NULL, body BYTEA NOT "
        "NULL, tries INTEGER NOT NULL DEFAULT 0, due_at DOUBLE PRECISION NOT NULL DEFAULT 0, "
        "taken_at DOUBLE PRECISION, sent_at DOUBLE PRECISION, given_up INTEGER NOT NULL "
        "DEFAULT 0)"
    ),
    "mariadb": (
        "CREATE TABLE shop_outbox (id BIGINT PRIMARY KEY, topic VARCHAR(100) NOT NULL, body "
        "LONGBLOB NOT NULL, tries INTEGER NOT NULL DEFAULT 0, due_at DOUBLE NOT NULL DEFAULT 0, "
        "taken_at DOUBLE, sent_at DOUBLE, given_up INTEGER NOT NULL DEFAULT 0)"
    ),
}


class ShopEvents:
    """The service's own statements: a record is taken by stamping ``taken_at`` (the
    reference's example stamps its own ``taken_at`` too), sent by stamping ``sent_at``."""

    def __init__(self, stand: StandName) -> None:
        self.stand = stand
        self.lock = "" if stand == "sqlite" else " FOR UPDATE SKIP LOCKED"

    def sql(self, text: str) -> str:
        return native(self.stand, text)

    async def fetch(self, tx: keys.Tx, limit: int) -> Sequence[Record]:
        now = trio.current_time()
        rows = await tx.fetch(
            self.sql(
                "SELECT id, topic, body, tries FROM shop_outbox WHERE taken_at IS NULL AND "
                "sent_at IS NULL AND given_up = 0 AND due_at <= ? ORDER BY id LIMIT ?" + self.lock
            ),
            now,
            limit,
        )
        for row in rows:
            await tx.execute(
                self.sql("UPDATE shop_outbox SET taken_at = ?, tries = tries + 1 WHERE id = ?"),
                now,
                row[0],
            )
        return [
            Record(
                id=ident,
                name=str(topic),
                payload=bytes(cast("bytes", body)),
                headers={ID_HEADER: str(ident)},
                attempt=int(cast("int", tries)) + 1,
            )
            for ident, topic, body, tries in rows
        ]

    async def ack(self, tx: keys.Tx, record: Record) -> None:
        await tx.execute(
            self.sql("UPDATE shop_outbox SET sent_at = ?, taken_at = NULL WHERE id = ?"),
            trio.current_time(),
            record.id,
        )

    async def retry(self, tx: keys.Tx, record: Record, delay: timedelta) -> None:
        await tx.execute(
            self.sql("UPDATE shop_outbox SET taken_at = NULL, due_at = ? WHERE id = ?"),
            trio.current_time() + delay.total_seconds(),
            record.id,
        )

    async def discard(self, tx: keys.Tx, record: Record) -> None:
        await tx.execute(
            self.sql("UPDATE shop_outbox SET given_up = 1, taken_at = NULL WHERE id = ?"),
            record.id,
        )

    async def recover(self, tx: keys.Tx) -> int:
        return await tx.execute(
            self.sql(
                "UPDATE shop_outbox SET taken_at = NULL WHERE taken_at < ? AND sent_at IS NULL "
                "AND given_up = 0"
            ),
            trio.current_time() - TAKEN_FOR,
        )


@pytest.fixture(params=STANDS)
def stand(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stand]:
    with fresh_stand(request.param, tmp_path) as found:
        found.script(TABLE[found.name])
        yield found


def insert(stand: Stand, *records: tuple[int, str, int]) -> None:
    for ident, topic, order in records:
        body = json.dumps({"order": order}).encode()
        stand.execute(
            "INSERT INTO shop_outbox (id, topic, body) VALUES (?, ?, ?)", ident, topic, body
        )


def states(stand: Stand) -> list[tuple[int, int, bool, bool, bool]]:
    """Each record: id, tries, whether taken, sent, given up."""
    return [
        (int(i), int(t), k is not None, s is not None, bool(g))
        for i, t, k, s, g in stand.rows(
            "SELECT id, tries, taken_at, sent_at, given_up FROM shop_outbox ORDER BY id"
        )
    ]


def relay_of(stand: Stand, broker: SqlBroker[Any], sink: Any, **options: Any) -> Any:
    return custom_relay(
        broker,
        ShopEvents(stand.name),
        sink,
        poll_interval=0.05,
        backoff=FAST,
        **{"label": "shop", **options},
    )


async def test_records_are_sent_retried_and_marked_by_the_services_statements(
    stand: Stand,
) -> None:
    insert(stand, (1, "orders.placed", 10), (2, "orders.placed", 20), (3, "orders.shipped", 30))
    async with receiver() as http:
        http.refuse = 2  # the service behind it is down for two requests
        broker = stand.broker()
        relay = relay_of(stand, broker, post_to(http.url), workers=2)
        app = make_app()
        app.add_broker(broker)
        app.background(relay)
        async with serving(app):
            with trio.fail_after(20):
                await relay.wait_settled(5)  # two refused sends, three that took
    assert sorted(http.ids()) == [1, 2, 3]
    assert {b["http_headers"][ID_HEADER] for b in http.received} == {"1", "2", "3"}
    assert sorted(json.loads(b["payload"])["order"] for b in http.received) == [10, 20, 30]
    stats = relay.statistics
    assert (stats.sent, stats.retried, stats.discarded, stats.failed_events) == (3, 2, 0, 0)
    found = states(stand)
    assert [(i, taken, sent, gone) for i, _, taken, sent, gone in found] == [
        (1, False, True, False),
        (2, False, True, False),
        (3, False, True, False),
    ]
    assert sum(tries for _, tries, *_ in found) == 5  # three sends, two refused


async def test_a_drop_and_spent_attempts_discard(stand: Stand) -> None:
    insert(stand, (1, "orders.placed", 1), (2, "orders.unknown", 2))
    tried: list[tuple[object, int]] = []

    async def sink(record: Record) -> HandlerOutcome | None:
        tried.append((record.id, record.attempt))
        if record.name == "orders.unknown":
            return HandlerOutcome.drop()
        raise ConnectionError("the receiver is down")

    broker = stand.broker()
    relay = relay_of(stand, broker, sink, max_attempts=3)
    app = make_app()
    app.add_broker(broker)
    app.background(relay)
    async with serving(app):
        with trio.fail_after(20):
            await relay.wait_settled(4)  # two retries, then two discards
    assert sorted(tried, key=str) == sorted([(1, 1), (1, 2), (1, 3), (2, 1)], key=str)
    assert states(stand) == [(1, 3, False, False, True), (2, 1, False, False, True)]
    assert relay.statistics.retried == 2


async def test_records_a_dead_relay_left_taken_are_recovered_at_startup(stand: Stand) -> None:
    insert(stand, (1, "orders.placed", 1), (2, "orders.placed", 2))
    # Record 1 was taken long ago by a relay that died mid-send; record 2 is being sent by a
    # live relay elsewhere right now.
    stand.execute(
        "UPDATE shop_outbox SET taken_at = ?, tries = 1 WHERE id = 1",
        trio.current_time() - 10 * TAKEN_FOR,
    )
    stand.execute("UPDATE shop_outbox SET taken_at = ? WHERE id = 2", trio.current_time())
    sent: list[tuple[object, int]] = []

    async def sink(record: Record) -> None:
        sent.append((record.id, record.attempt))

    broker = stand.broker()
    relay = relay_of(stand, broker, sink)
    app = make_app()
    app.add_broker(broker)
    app.background(relay)
    async with serving(app):
        with trio.fail_after(20):
            await relay.wait_settled(1)
    assert sent == [(1, 2)]
    assert relay.statistics.recovered == 1
    assert states(stand) == [(1, 2, False, True, False), (2, 0, True, False, False)]


async def test_two_relays_side_by_side_send_each_record_once(stand: Stand) -> None:
    insert(stand, *((n, "orders.placed", n) for n in range(1, 41)))
    sent: list[object] = []
    all_sent = trio.Event()

    async def sink(record: Record) -> None:
        sent.append(record.id)
        if len(sent) == 40:
            all_sent.set()
        await trio.lowlevel.checkpoint()

    one, two = stand.broker(), stand.broker()
    relays = [relay_of(stand, b, sink, workers=4, label="r") for b in (one, two)]
    app = make_app()
    for broker, relay in zip((one, two), relays, strict=True):
        app.add_broker(broker)
        app.background(relay)
    async with serving(app):
        with trio.fail_after(30):
            await all_sent.wait()
    assert sorted(int(str(i)) for i in sent) == list(range(1, 41))  # one taken twice: one left out
    assert all(r.statistics.sent for r in relays)  # both relays took some


async def test_a_send_that_returned_as_the_app_shuts_down_is_settled(stand: Stand) -> None:
    insert(stand, (1, "orders.placed", 1))
    app = make_app()

    async def sink(record: Record) -> None:
        app.shutdown()  # the shutdown's cancel reaches the relay as the send returns

    broker = stand.broker()
    relay = relay_of(stand, broker, sink)
    app.add_broker(broker)
    app.background(relay)
    with trio.fail_after(20):
        await app.serve()
    assert relay.statistics.sent == 1
    assert states(stand) == [(1, 1, False, True, False)]


async def test_a_missing_table_stops_the_startup(tmp_path: Path) -> None:
    broker = SqlBroker.sqlite(f"sqlite:///{tmp_path / 'empty.db'}")
    relay = custom_relay(broker, ShopEvents("sqlite"), post_to("http://127.0.0.1:9/"))
    app = make_app()
    app.add_broker(broker)
    app.background(relay)
    with pytest.RaisesGroup(
        pytest.RaisesExc(Exception, match="shop_outbox"), flatten_subgroups=True
    ):
        async with serving(app):
            pass
    assert relay.statistics.failed_events == 1


def test_custom_events_are_checked_where_they_are_given(tmp_path: Path) -> None:
    broker = SqlBroker.sqlite(f"sqlite:///{tmp_path / 'x.db'}")

    class Half:
        async def fetch(self, tx: keys.Tx, limit: int) -> list[Record]:
            return []

    rule = (
        r"^custom_relay\('custom relay'\): custom events are an object with async methods "
        r"fetch, ack, retry, discard and recover, found Half without ack, retry, discard, "
        r"recover; define them \(trinbox.outbox.OutboxEvents says how\)$"
    )
    with pytest.raises(TypeError, match=rule):
        custom_relay(broker, Half(), post_to("http://x/"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="workers counts one or more, found 0"):
        custom_relay(broker, ShopEvents("sqlite"), post_to("http://x/"), workers=0)
    with pytest.raises(ValueError, match="max_attempts counts one or more, found 0"):
        custom_relay(broker, ShopEvents("sqlite"), post_to("http://x/"), max_attempts=0)
