"""The transactional outbox: what a service publishes outside its database (Kafka, AMQP, an
HTTP webhook, another database), sent exactly when its own transaction commits, at least once.

    class OrderEvents(Outbox, table="order_outbox"): ...   # the record table

The service writes a record in its own transaction (``tx.publish(OrderEvents, message,
name=...)``, or ``insert_statement`` on its own driver), and the record is a row like any
other until the transaction commits.
"""

from __future__ import annotations

from ._declare._outbox import Outbox as Outbox

__all__ = ["Outbox"]
