"""A relay, as declared: ``relay(queue, names=...)(sink)`` makes a subscriber of the record
table whose claim reads the names it names; what it cannot serve is refused where it is
written, naming the rule, what it found and the fix."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import pytest

from trinbox import Id, Inbox, InboxQueue, Lease, LockedUntil, Payload
from trinbox._declare._group_names import GroupNames, group_names
from trinbox.errors import DeclarationError
from trinbox.outbox import Record, relay
from trinbox.typing import Subscriber

from .test_outbox_declaration import Events


async def to_nowhere(record: Record) -> None:
    """Sends nothing."""


def test_a_relay_is_a_subscriber_of_the_record_table_named_after_its_sink() -> None:
    made = relay(InboxQueue(Events, "webhook").workers(3))(to_nowhere)
    assert isinstance(made, Subscriber)
    assert made.queue.row is Events
    assert made.queue.worker_count == 3
    assert made.queue.group_names == GroupNames()
    assert made.queue.whole_rows
    # Every name: the queue's name is a label, and the claim reads every group.
    assert made.queue.group is None
    assert repr(made) == "<Subscriber to_nowhere on 'webhook' of Events>"
    assert made.handler.__doc__ == "Sends nothing."


def test_names_are_whole_names_and_prefixes() -> None:
    made = relay(InboxQueue(Events, "some"), names=["orders.*", "b", "orders.*", "a"])(to_nowhere)
    assert made.queue.group_names == GroupNames(exact=("b", "a"), prefixes=("orders.",))
    assert made.queue.group_names is not None
    assert made.queue.group_names.written == ("b", "a", "orders.*")
    # A * among them is every name.
    assert group_names("x", ["a", "*"]) == GroupNames()
    assert group_names("x", None).written == ("*",)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            "orders.*",
            "relay 'some' of Events: names= takes a list of names, found the string "
            "'orders.*'; write names=['orders.*']",
        ),
        (
            [],
            "relay 'some' of Events: names= lists the names served, found an empty list; name "
            "one, or leave names= out to serve every name",
        ),
        (
            ["a", ""],
            "relay 'some' of Events: a name is a non-empty str, found '' in names=; write the "
            "name, or a prefix ending in * (like 'orders.*')",
        ),
        (
            [3],
            "relay 'some' of Events: a name is a non-empty str, found 3 in names=; write the "
            "name, or a prefix ending in * (like 'orders.*')",
        ),
        (
            ["orders.*.created"],
            "relay 'some' of Events: a * ends a prefix (every name starting with what comes "
            "before it), found one inside 'orders.*.created'; write a whole name, or a prefix "
            "like 'orders.*'",
        ),
    ],
)
def test_names_it_cannot_read_are_refused(names: Any, message: str) -> None:
    with pytest.raises(DeclarationError) as refused:
        relay(InboxQueue(Events, "some"), names=names)
    assert str(refused.value) == message


def test_a_name_no_database_holds_is_refused() -> None:
    with pytest.raises(DeclarationError, match="holds no NUL character"):
        relay(InboxQueue(Events, "some"), names=["a\x00b"])


class Jobs(Inbox[Lease], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


def test_a_relay_serves_an_outbox_record_table_only() -> None:
    with pytest.raises(DeclarationError) as refused:
        relay(InboxQueue(Jobs, "jobs"))  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]
    assert str(refused.value) == (
        "relay 'jobs' of Jobs: a relay serves the records of an outbox record table, found "
        "jobs (Jobs), an Inbox[Lease] table; declare class Jobs(Outbox, table='jobs')"
    )


@pytest.mark.parametrize(
    ("queue", "message"),
    [
        (
            InboxQueue(Events, "q").transactional(),
            "relay 'q' of Events: a relay sends each record outside the database, in no "
            "transaction of its own, found .transactional(); drop it",
        ),
        (
            InboxQueue(Events, "q").batch(10),
            "relay 'q' of Events: a relay hands its sink one record at a time, found "
            ".batch(10); drop it",
        ),
    ],
)
def test_what_a_relay_cannot_do_is_refused(queue: Any, message: str) -> None:
    with pytest.raises(DeclarationError) as refused:
        relay(queue)
    assert str(refused.value) == message


def test_a_custom_claim_is_refused() -> None:
    async def claim(conn: Any, group: str | None, limit: int) -> list[int]:
        return []

    with pytest.raises(DeclarationError, match=r"by name, found \.custom_claim\(\); drop it"):
        relay(InboxQueue(Events, "q").custom_claim(claim))


def test_a_sink_is_an_async_callable() -> None:
    def send(record: Record) -> None: ...

    with pytest.raises(TypeError) as refused:
        relay(InboxQueue(Events, "q"))(send)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert str(refused.value) == (
        "relay 'q' of Events: a sink is an async callable taking a Record, found "
        "test_a_sink_is_an_async_callable.<locals>.send; declare it `async def`"
    )
    with pytest.raises(TypeError, match="relay takes an InboxQueue"):
        relay(Events)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def test_the_record_a_sink_gets() -> None:
    seen: list[Record] = []

    async def keep(record: Record) -> None:
        seen.append(record)

    made = relay(InboxQueue(Events, "q"))(keep)
    row = Events(
        id=7,
        name="orders.placed",
        retry_after=datetime(2026, 1, 1),
        attempt=2,
        locked_until=None,
        processed_at=None,
        payload=b'{"order": 7}',
    )
    await made.handler(row)
    assert seen == [Record(7, "orders.placed", b'{"order": 7}', {"trinbox-outbox-id": "7"}, 2)]
    with pytest.raises(TypeError):
        seen[0].headers["x"] = "y"  # type: ignore[index]
