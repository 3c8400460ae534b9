"""``trinbox.asyncapi.document(app)``: valid AsyncAPI 3.0.0 under the vendored JSON Schema, with
the ``x-trinbox`` bindings, payload schemas of every kind of message type, and no credentials.

Rendering opens no database, so these run without one on all three dialects' brokers."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, make_dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, cast

import pydantic
import pytest
import trio

import trinbox
from examples import mailer, reports, transcoder
from trinbox import (
    App,
    AppInfo,
    Group,
    Headers,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    SqlBroker,
    Unique,
    keys,
    subscriber,
)
from trinbox._declare._inbox import spec_of
from trinbox.asyncapi import UndescribableType, document
from trinbox.errors import DeclarationError
from trinbox.outbox import Tracker
from trinbox.typing import Held, Sqlite

from . import apps
from .check import SCHEMA_FILE, problems

KINDS: dict[str, tuple[str, Callable[[], SqlBroker[Any]]]] = {
    "postgres": ("postgresql", lambda: SqlBroker.postgres(apps.PG_URL)),
    "mysql": ("mysql", lambda: SqlBroker.mysql(apps.MYSQL_URL)),
    "sqlite": ("sqlite", lambda: SqlBroker.sqlite(apps.SQLITE_URL)),
}


def _transcoder(broker: SqlBroker[Sqlite]) -> App:
    return transcoder.service(broker, transcoder.Studio(expected=1))


def _mailer(broker: SqlBroker[Sqlite]) -> App:
    return mailer.service(broker, mailer.Outbox([], {}, trio.Event()))


def _reports(broker: SqlBroker[Sqlite]) -> App:
    return reports.service(broker, [], trio.Event())


EXAMPLES: dict[str, tuple[Callable[[SqlBroker[Sqlite]], App], type[Inbox[Any, Any]], str]] = {
    "transcoder": (_transcoder, transcoder.Transcode, "transcode"),
    "mailer": (_mailer, mailer.SendEmail, "send"),
    "reports": (_reports, reports.Report, "render"),
}


def _dumped(doc: dict[str, Any]) -> str:
    return json.dumps(doc)


def _binding(node: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = node["bindings"]["x-trinbox"]
    return found


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_example_documents_are_valid_asyncapi(example: str, kind: str) -> None:
    build, row, handler = EXAMPLES[example]
    protocol, make = KINDS[kind]
    # The examples are typed for SQLite; their forms run on the other two databases as well.
    doc = document(build(cast("SqlBroker[Sqlite]", make())))
    assert problems(doc) == []
    assert doc["asyncapi"] == "3.0.0"
    assert doc["info"] == {"title": example, "version": "0.1.0"}
    assert [s["protocol"] for s in doc["servers"].values()] == [protocol]
    spec = spec_of(row)
    (channel,) = doc["channels"].values()
    binding = _binding(channel)
    assert binding["table"] == spec.qualified_name
    assert binding["form"] == spec.form.name
    assert ("group" in binding) == (spec.group is not None)
    (operation,) = doc["operations"].values()
    assert operation["action"] == "receive"
    assert _binding(operation)["handler"].endswith(f".{handler}")
    assert not any(secret in _dumped(doc) for secret in apps.SECRETS)


def test_every_kind_of_message_type_is_described() -> None:
    doc = document(apps.app())
    assert problems(doc) == []
    schemas = doc["components"]["schemas"]
    messages = doc["components"]["messages"]
    # msgspec Struct, with the Struct it holds as a shared definition.
    assert messages["Order"]["payload"] == {"$ref": "#/components/schemas/Order"}
    assert schemas["Order"]["properties"]["lines"]["items"] == {"$ref": "#/components/schemas/Line"}
    assert schemas["Line"]["required"] == ["sku"]
    # pydantic model, through pydantic (which titles every property).
    assert schemas["Invoice"]["properties"]["total_cents"] == {
        "title": "Total Cents",
        "type": "integer",
    }
    # dataclass, and a batch handler's message is one element of its list.
    assert messages["Parcel"]["payload"] == {"$ref": "#/components/schemas/Parcel"}
    assert schemas["Parcel"]["required"] == ["weight_grams", "to"]
    ship = doc["operations"]["ship_parcels"]
    assert _binding(ship)["batch"] == 10
    assert _binding(ship)["lease"] == 60
    # TypedDict.
    assert set(schemas["Refund"]["properties"]) == {"order", "cents"}
    # bytes: a binary string, not JSON.
    assert messages["bytes"] == {
        "name": "bytes",
        "contentType": "application/octet-stream",
        "payload": {"type": "string", "format": "binary"},
    }
    for name in ("Order", "Invoice", "Parcel", "Refund"):
        assert messages[name]["contentType"] == "application/json"
    # Row mode: the row's columns, in table order, the generated ones read-only.
    signup = schemas["Signup"]
    assert list(signup["properties"]) == ["id", "email", "plan", "created", "attempt"]
    assert signup["required"] == list(signup["properties"])
    read_only = {name for name, s in signup["properties"].items() if s.get("readOnly")}
    assert read_only == {"id", "created", "attempt"}
    assert signup["properties"]["plan"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert "contentType" not in messages["Signup"]
    assert _binding(doc["channels"]["signups"])["mode"] == "row"


def test_bindings_name_table_group_form_and_settings() -> None:
    doc = document(apps.app())
    orders = _binding(doc["channels"]["work.jobs.orders"])
    assert orders == {
        "bindingVersion": "0.1.0",
        "table": "work.jobs",
        "group": "orders",
        "form": "lease",
        "isolation": "default",
        "mode": "payload",
        "columns": {
            "id": "id",
            "queue": "group",
            "dead_from": "origin_group",
            "retry_after": "retry_after",
            "attempt": "attempt",
            "locked_until": "locked_until",
            "payload": "payload",
        },
    }
    # A table without a Group field is one queue: its binding names no group.
    signups = _binding(doc["channels"]["signups"])
    assert "group" not in signups
    assert signups["advisoryLock"] == "signup-{email}"
    assert _binding(doc["operations"]["take_order"]) == {
        "bindingVersion": "0.1.0",
        "handler": "tests.asyncapi.apps.take_order",
        "workers": 3,
        "transactional": False,
        "pollInterval": 0.25,
        "lease": 30,
        "maxAttempts": 5,
        "deadLetter": "orders.dead",
    }
    assert _binding(doc["operations"]["refund"])["transactional"] is True
    # A FIFO group says so; other channels leave the field out.
    assert _binding(doc["channels"]["locked_jobs.refunds"])["fifo"] is True
    assert "fifo" not in orders
    # The same queue on another broker is another channel, on that broker's server.
    assert doc["channels"]["work.jobs.orders_2"]["servers"] == [{"$ref": "#/servers/sqlite"}]
    assert doc["operations"]["take_order_2"]["channel"] == {"$ref": "#/channels/work.jobs.orders_2"}


def test_servers_show_host_and_port_only() -> None:
    doc = document(apps.app())
    servers = doc["servers"]
    assert {name: (s["host"], s["protocol"]) for name, s in servers.items()} == {
        "postgres": ("pg.internal.example:6543", "postgresql"),
        "mysql": ("[2001:db8::7]:3307", "mysql"),
        "sqlite": ("localhost", "sqlite"),
    }
    assert _binding(servers["sqlite"])["inProcess"] is True
    assert _binding(servers["postgres"])["listenNotify"] is True
    text = _dumped(doc)
    leaked = [secret for secret in apps.SECRETS if secret in text]
    assert leaked == []


def test_default_ports_and_several_brokers_of_a_kind() -> None:
    app = App(AppInfo("pair"))
    app.add_broker(SqlBroker.postgres("postgresql://u:pw@one.example/db", pgbouncer="transaction"))
    app.add_broker(SqlBroker.postgres("postgresql:///db?host=/run/postgresql"))
    app.add_broker(SqlBroker.mysql("mysql://u:pw@two.example/db"))
    doc = document(app)
    assert problems(doc) == []
    assert {name: s["host"] for name, s in doc["servers"].items()} == {
        "postgres-1": "one.example:5432",
        "postgres-2": "localhost:5432",  # a local socket: its path is not shown
        "mysql": "two.example:3306",
    }
    assert _binding(doc["servers"]["postgres-1"])["pgbouncer"] == "transaction"
    assert "pgbouncer" not in _binding(doc["servers"]["postgres-2"])
    assert "/run/postgresql" not in _dumped(doc)
    assert "channels" not in doc  # a process that only publishes receives nothing


async def gold_rows(conn: Held, group: str | None, limit: int) -> list[object]:
    return []


async def rows_by_id(conn: Held, ids: list[object]) -> list[tuple[object, ...]]:
    return []


def test_a_custom_claim_names_its_functions() -> None:
    broker = SqlBroker.mysql("mysql://u:pw@two.example/db")

    @subscriber(InboxQueue(apps.Job, "gold").custom_claim(gold_rows, fetch=rows_by_id))
    async def gold(order: apps.Order) -> None:
        pass

    @subscriber(InboxQueue(apps.Job, "silver").custom_claim(gold_rows))
    async def silver(order: apps.Order) -> None:
        pass

    app = App(AppInfo("claims"))
    app.include(broker, gold)
    app.include(SqlBroker.postgres("postgresql://u:pw@one.example/db"), silver)
    doc = document(app)
    assert problems(doc) == []
    found = _binding(doc["operations"]["gold"])
    assert (found["customClaim"], found["customFetch"]) == (
        f"{__name__}.gold_rows",
        f"{__name__}.rows_by_id",
    )
    found = _binding(doc["operations"]["silver"])
    assert (found["customClaim"], "customFetch" in found) == (f"{__name__}.gold_rows", False)
    assert "customClaim" not in _binding(document(apps.app())["operations"]["take_order"])


def test_a_relay_names_the_names_it_serves() -> None:
    doc = document(apps.relayed())
    assert problems(doc) == []
    operation = doc["operations"]["to_webhook"]
    assert operation["description"] == "Send the shop's order events to its webhook."
    found = _binding(operation)
    assert found["handler"] == "tests.asyncapi.apps.to_webhook"
    assert found["relay"] == ["payments.refunded", "orders.*"]
    # Its channel is the record table's, every name of it; the message, the record's row.
    channel = doc["channels"]["order_events"]
    assert "group" not in _binding(channel)
    assert _binding(channel)["columns"]["name"] == "group"
    assert "relay" not in _binding(document(apps.app())["operations"]["take_order"])


def test_a_tracked_subscription_names_its_seen_records_table() -> None:
    @subscriber(InboxQueue(Mail, "billing").tracked(Tracker("billing_seen", schema="ops")))
    async def billing(parcel: apps.Parcel) -> None:
        pass

    @subscriber(InboxQueue(Note, "audit").tracked(Tracker("seen", consumer="audit-v2")))
    async def audit(note: Note) -> None:
        pass

    app = App(AppInfo("tracked"))
    app.include(SqlBroker.postgres("postgresql://u:pw@one.example/db"), billing)
    app.include(SqlBroker.sqlite("sqlite:///notes.db"), audit)
    doc = document(app)
    assert problems(doc) == []
    assert _binding(doc["operations"]["billing"])["tracked"] == {
        "table": "ops.billing_seen",
        "consumer": "mail_jobs:billing",
    }
    assert _binding(doc["operations"]["audit"])["tracked"] == {
        "table": "seen",
        "consumer": "audit-v2",
    }
    assert "tracked" not in _binding(document(apps.app())["operations"]["take_order"])


def test_types_of_one_name_get_names_of_their_own(tmp_path: Path) -> None:
    def video_with(field: str) -> type:
        # Two classes named Video, of different fields (as two modules could declare them).
        return make_dataclass("Video", [(field, str)])

    async def one(video: object) -> None:
        pass

    async def two(video: object) -> None:
        pass

    one.__annotations__["video"] = video_with("url")
    two.__annotations__["video"] = video_with("path")
    first = subscriber(InboxQueue(Lone, "one"))(one)
    second = subscriber(InboxQueue(Lone, "two"))(two)

    lite1 = SqlBroker.sqlite(f"sqlite:///{tmp_path}/a.db")
    lite2 = SqlBroker.sqlite(f"sqlite:///{tmp_path}/b.db")
    app = App(AppInfo("twins"))
    app.include(lite1, first)
    app.include(lite2, second)
    doc = document(app)
    assert problems(doc) == []
    schemas = doc["components"]["schemas"]
    assert {n: list(s["properties"]) for n, s in schemas.items()} == {
        "Video": ["url"],
        "Video_2": ["path"],
    }
    messages = doc["components"]["messages"]
    assert messages["Video_2"]["payload"] == {"$ref": "#/components/schemas/Video_2"}
    assert list(doc["channels"]) == ["lone", "lone_2"]
    assert [c["servers"] for c in doc["channels"].values()] == [
        [{"$ref": "#/servers/sqlite-1"}],
        [{"$ref": "#/servers/sqlite-2"}],
    ]
    assert str(tmp_path) not in _dumped(doc)


class Lone(Inbox[Lease], table="lone"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[Any, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class Money(pydantic.BaseModel):
    cents: int


@dataclass
class Payment:
    """A dataclass msgspec cannot describe: it holds a pydantic model."""

    amount: Money


class Msgpack:
    content_type = "application/msgpack"

    def encode(self, message: object) -> bytes:
        return b""

    def decode(self, data: bytes, into: type[Any]) -> Any:
        return None


def test_pydantic_describes_what_msgspec_cannot_and_codecs_name_their_type() -> None:
    @subscriber(InboxQueue(Lone, "pay").codec(Msgpack()))
    async def pay(payment: Payment) -> None:
        pass

    app = App(AppInfo("pay"))
    app.include(SqlBroker.sqlite(apps.SQLITE_URL), pay)
    doc = document(app)
    assert problems(doc) == []
    schemas = doc["components"]["schemas"]
    assert schemas["Payment"]["properties"]["amount"] == {"$ref": "#/components/schemas/Money"}
    assert schemas["Money"]["required"] == ["cents"]
    assert doc["components"]["messages"]["Payment"]["contentType"] == "application/msgpack"


class Ticket(Inbox[Lease], table="tickets"):
    """A row mode table of groups, its dead letters keeping their group."""

    id: Annotated[int, Id(generated=True)]
    desk: Annotated[str, Group()]
    dead_from: Annotated[str | None, OriginGroup()] = None
    locked_until: Annotated[datetime | None, LockedUntil()]
    subject: str


def test_a_row_shows_what_the_publish_leaves_out_read_only() -> None:
    @subscriber(InboxQueue(Ticket, "help"))
    async def answer(ticket: Ticket) -> None:
        pass

    app = App(AppInfo("desk"))
    app.include(SqlBroker.sqlite(apps.SQLITE_URL), answer).max_attempts(2).dead_letter("dead")
    doc = document(app)
    assert problems(doc) == []
    properties = doc["components"]["schemas"]["Ticket"]["properties"]
    read_only = {name for name, s in properties.items() if s.get("readOnly")}
    # The OriginGroup is written by the move into the dead letter group, never by a publish.
    assert read_only == {"id", "dead_from"}
    assert _binding(doc["channels"]["tickets.help"])["columns"]["dead_from"] == "origin_group"


class Mail(Inbox[Lease], table="mail_jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]
    headers: Annotated[dict[str, str], Headers()]


class Note(Inbox[Lease], table="notes"):
    """A row mode table with headers."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    text: str
    meta: Annotated[dict[str, str], Headers()]


def test_a_message_of_a_table_with_headers_describes_them() -> None:
    @subscriber(InboxQueue(Mail, "mail"))
    async def send(parcel: apps.Parcel, headers: keys.Headers) -> None:
        pass

    @subscriber(InboxQueue(Note, "notes"))
    async def note(row: Note) -> None:
        pass

    app = App(AppInfo("mail"))
    lite = SqlBroker.sqlite(apps.SQLITE_URL)
    app.include(lite, send)
    app.include(lite, note)
    app.include(lite, apps.take_order)  # the same message type as a table without headers
    doc = document(app)
    assert problems(doc) == []
    messages = doc["components"]["messages"]
    headers = messages["Parcel"]["headers"]
    assert headers["type"] == "object"
    assert headers["additionalProperties"] == {"type": "string"}
    assert messages["Note"]["headers"] == headers
    assert "headers" not in messages["Order"]
    # The row's payload leaves the Headers column out: the handler's row holds none.
    assert "meta" not in doc["components"]["schemas"]["Note"]["properties"]
    assert _binding(doc["channels"]["notes"])["columns"]["meta"] == "headers"


def test_a_handler_the_app_refuses_is_refused_here() -> None:
    @subscriber(InboxQueue(apps.Signup, "signups"))
    async def wrong(order: apps.Order) -> None:
        pass

    app = App(AppInfo("wrong"))
    app.include(SqlBroker.sqlite(apps.SQLITE_URL), wrong)
    with pytest.raises(DeclarationError, match="takes the row itself, found Order"):
        document(app)


def test_the_schema_refuses_what_asyncapi_forbids() -> None:
    """The vendored schema is no rubber stamp: a binding without the x- prefix, an unknown
    action and a server without its host are each refused."""
    doc = document(apps.app())
    broken = json.loads(json.dumps(doc))
    broken["channels"]["signups"]["bindings"]["trinbox"] = {}
    broken["operations"]["welcome"]["action"] = "consume"
    del broken["servers"]["sqlite"]["host"]
    broken["operations"]["refund"]["channel"] = {"$ref": "#/channels/nowhere"}
    found = problems(broken)
    assert any(p.startswith("channels/signups:") for p in found)
    assert any(p.startswith("operations/welcome:") for p in found)
    assert any(p.startswith("servers/sqlite:") for p in found)
    assert "#/channels/nowhere: points at nothing" in found


def test_without_msgspec_or_pydantic_the_error_says_what_to_install(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["msgspec"] = None  # neither library importable
        sys.modules["pydantic"] = None
        from dataclasses import dataclass, make_dataclass
        from typing import Annotated
        from trinbox import App, AppInfo, Id, Inbox, InboxQueue, Lease, LockedUntil, Payload
        from trinbox import SqlBroker, subscriber
        from trinbox.asyncapi import document

        class Row(Inbox[Lease], table="jobs"):
            id: Annotated[int, Id(generated=True)]
            locked_until: Annotated[object, LockedUntil()]
            payload: Annotated[bytes, Payload()]

        @dataclass
        class Note:
            text: str

        @subscriber(InboxQueue(Row, "raw"))
        async def raw(data: bytes) -> None: ...

        @subscriber(InboxQueue(Row, "notes"))
        async def note(n: Note) -> None: ...

        app = App(AppInfo("bare"))
        app.include(SqlBroker.sqlite("sqlite:///x.db"), raw)
        print(document(app)["components"]["messages"]["bytes"]["contentType"])
        app.include(SqlBroker.sqlite("sqlite:///y.db"), note)
        try:
            document(app)
        except ImportError as exc:
            print(exc)
        """
    )
    root = str(Path(trinbox.__file__).parents[1])
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert done.stdout.splitlines() == [
        "application/octet-stream",
        "the AsyncAPI document describes payloads through msgspec or pydantic, found neither "
        "installed to describe Note; pip install msgspec (or pydantic)",
    ]


def test_vendored_schema_is_the_published_file() -> None:
    """tests/asyncapi/README.md names the file's source; its checksum pins the copy."""
    digest = hashlib.sha256(SCHEMA_FILE.read_bytes()).hexdigest()
    assert digest == "abe96881dbfaad495ccbb6bd8d3fb43ca18a13b9d7564849ccb66f39d5e5b20f"
    assert digest in (SCHEMA_FILE.parent / "README.md").read_text()


class Opaque:
    """A class neither msgspec nor pydantic knows."""

    def __init__(self, blob: object) -> None:
        self.blob = blob


def test_a_type_neither_library_describes_is_named() -> None:
    @subscriber(InboxQueue(Lone, "opaque"))
    async def take(item: Opaque) -> None:
        pass

    app = App(AppInfo("opaque"))
    app.include(SqlBroker.sqlite(apps.SQLITE_URL), take)
    with pytest.raises(UndescribableType) as caught:
        document(app)
    message = str(caught.value)
    assert message.startswith(
        "the AsyncAPI document describes the payload type Opaque, but msgspec cannot describe "
        "it (type <class 'tests.asyncapi.test_document.Opaque'> is not supported) and "
        "pydantic cannot describe it ("
    )
    assert message.endswith("use a dataclass, msgspec Struct, pydantic model or TypedDict")
    assert "\n" not in message  # one line, also on the command line


def test_a_subscription_over_every_group_is_one_channel_of_its_table() -> None:
    @subscriber(InboxQueue(apps.Locked, "ledger").every_group().workers(4))
    async def post(entry: bytes) -> None:
        pass

    app = App(AppInfo("ledger"))
    app.include(SqlBroker.postgres(apps.PG_URL), post)
    doc = document(app)
    assert problems(doc) == []
    channel = doc["channels"]["locked_jobs"]
    assert channel["title"] == "locked_jobs, every group"
    binding = _binding(channel)
    assert binding["fifo"] is True
    assert binding["everyGroup"] is True
    assert "group" not in binding


class Audit(Inbox[Lease], table="audit_jobs"):
    """One queue: names routed here only pick the table."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


def test_routes_and_subscriptions_by_name_are_shown() -> None:
    doc = document(apps.routed())
    assert problems(doc) == []
    channels = {name: _binding(channel) for name, channel in doc["channels"].items()}
    # orders.placed takes the prefix route (the exact one is another name's).
    assert channels["work.jobs.orders.placed"]["routes"] == ["orders.*"]
    assert channels["work.jobs.orders.placed"]["group"] == "orders.placed"
    assert "routes" not in channels["work.jobs.invoices"]
    operations = {name: _binding(op) for name, op in doc["operations"].items()}
    assert operations["place"]["byName"] is True
    assert "byName" not in operations["send_invoice"]


def test_a_table_without_groups_shows_every_route_into_it() -> None:
    broker = SqlBroker.sqlite(apps.SQLITE_URL)
    broker.route(Audit, "audit.*")
    broker.route(Audit, "billing.audit")

    @subscriber(InboxQueue(Audit, "audit"))
    async def audit(entry: bytes) -> None:
        pass

    app = App(AppInfo("audit"))
    app.include(broker, audit)
    (channel,) = document(app)["channels"].values()
    assert _binding(channel)["routes"] == ["audit.*", "billing.audit"]


def test_a_unique_field_is_named_in_the_channel_with_its_window() -> None:
    class Keyed(Inbox[Lease], table="keyed"):
        id: Annotated[int, Id(generated=True)]
        locked_until: Annotated[datetime | None, LockedUntil()] = None
        payload: Annotated[bytes, Payload()]
        dedup: Annotated[str | None, Unique(window=timedelta(hours=1))] = None

    @subscriber(InboxQueue(Keyed, "keyed"))
    async def keyed(order: apps.Order) -> None:
        pass

    app = App(AppInfo("keyed"))
    lite = SqlBroker.sqlite(apps.SQLITE_URL)
    app.include(lite, keyed)
    app.include(lite, apps.take_order)
    doc = document(app)
    assert problems(doc) == []
    binding = _binding(doc["channels"]["keyed"])
    assert binding["columns"]["dedup"] == "unique"
    assert binding["unique"] == {"column": "dedup", "window": 3600}
    assert all(
        "unique" not in _binding(c) for name, c in doc["channels"].items() if name != "keyed"
    )
