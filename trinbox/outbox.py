"""The transactional outbox: what a service publishes outside its database (Kafka, AMQP, an
HTTP webhook, another database), sent once its own transaction commits, at least once.

    class OrderEvents(Outbox, table="order_outbox"): ...   # the record table

    @relay(InboxQueue(OrderEvents, "kafka"))                # its relay, a subscriber
    async def to_kafka(record: Record) -> None: ...

The service writes a record in its own transaction (``tx.publish(OrderEvents, message,
name=...)``, or ``insert_statement`` on its own driver); once it commits, the relay serves it
to the sink, and marks it processed (or deletes it) once the sink returned.
"""

from __future__ import annotations

from ._api.headers import ID_HEADER as ID_HEADER
from ._api.relay import Record as Record
from ._api.relay import RelayFactory as RelayFactory
from ._api.relay import Sink as Sink
from ._api.relay import into as into
from ._api.relay import relay as relay
from ._declare._outbox import Outbox as Outbox
from ._declare._tracker import Tracker as Tracker
from ._engine.custom_relay import CustomRelay as CustomRelay
from ._engine.custom_relay import CustomRelayStatistics as CustomRelayStatistics
from ._engine.custom_relay import OutboxEvents as OutboxEvents
from ._engine.custom_relay import custom_relay as custom_relay

__all__ = [
    "ID_HEADER",
    "CustomRelay",
    "CustomRelayStatistics",
    "Outbox",
    "OutboxEvents",
    "Record",
    "RelayFactory",
    "Sink",
    "Tracker",
    "custom_relay",
    "into",
    "relay",
]
