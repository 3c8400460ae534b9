"""A tracked subscription's seen records (``InboxQueue(...).tracked(Tracker(...))``): a
delivery whose headers carry an outbox record's id runs its handler once per (consumer,
record id).

On a transactional mount the mark is written in the delivery's transaction before the
handler runs: a duplicate being handled elsewhere waits on the key, and once that commits
finds it; the mark commits with the ack and rolls back with every other outcome, so the
record's effects and its mark are one (exactly once, where the handler writes only through
``keys.Tx``). On a plain mount the mark is looked up before the handler and written after it
acked, before the ack settles: a duplicate handled at the same moment, or a process that died
between the handler and the mark, runs the handler again (at least once, fewer duplicates).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from .._api.headers import ID_HEADER
from .._broker.broker import SqlBroker
from .._declare._spec import TableSpec
from .._declare._tracker import Tracker
from .._dialects._statement import Statement
from .._dialects.seen import KEY_LENGTH, SeenPlan, seen_plan
from .._drivers._base import Connection
from .._holders._base import ClaimForm, Delivery
from .._holders.connections import give_back
from ..errors import DeclarationError

__all__ = ["SeenRecords", "consumer_of"]

T = TypeVar("T")


def consumer_of(tracker: Tracker, spec: TableSpec, queue: str) -> str:
    """The consumer's name in the seen-records table: the tracker's, or the queue's table
    and name."""
    return tracker.consumer or f"{spec.qualified_name}:{queue}"


class SeenRecords:
    """The seen-records table of one tracked subscription."""

    def __init__(
        self,
        broker: SqlBroker[Any],
        tracker: Tracker,
        consumer: str,
        *,
        transactional: bool,
        where: str,
    ) -> None:
        self._broker = broker
        self.transactional = transactional
        self.consumer = consumer
        self._where = where
        self.plan: SeenPlan = seen_plan(broker.dialect, tracker.table, tracker.schema, where)
        if len(consumer) > KEY_LENGTH:
            msg = (
                f"{where}: a consumer's name in the seen-records table {tracker.label} is at "
                f"most {KEY_LENGTH} characters, found {len(consumer)} ({consumer[:40]!r}...); "
                f"name it shorter with Tracker({tracker.table!r}, consumer=...)"
            )
            raise DeclarationError(msg)

    @property
    def statements(self) -> list[Statement]:
        """What startup prepares: both statements, so a missing table stops it."""
        return [self.plan.mark, self.plan.find]

    def record_of(self, headers: Mapping[str, str]) -> str | None:
        """The outbox record id a delivery carries, if any (none: handled untracked)."""
        found = headers.get(ID_HEADER)
        if found is not None and len(found) > KEY_LENGTH:
            msg = (
                f"{self._where}: an outbox record id is at most {KEY_LENGTH} characters (the "
                f"seen-records table's key), found {len(found)} in the header {ID_HEADER}; "
                f"give the record table a shorter id (an int or a UUID)"
            )
            raise DeclarationError(msg)
        return found

    def _values(self, record: str) -> dict[str, object]:
        dialect = self._broker.dialect
        now = dialect.driver_value(self._broker.clock())
        return {"consumer": self.consumer, "record_id": record, "now": now}

    async def first_sight(self, form: ClaimForm, delivery: Delivery, record: str) -> bool:
        """Whether ``record`` is handled here for the first time: on a transactional mount
        marked now in the delivery's transaction, else looked up."""
        if self.transactional:
            conn = await form.open_transaction(delivery)
            mark = self.plan.mark
            return await conn.execute(mark.sql, mark.bind(self._values(record))) == 1
        find = self.plan.find
        rows = await self._on_pool(lambda c: c.fetch(find.sql, find.bind(self._values(record))))
        return not rows

    async def handled(self, record: str) -> None:
        """A plain mount's mark, once the handler acked (a transactional mount's is in its
        transaction already)."""
        if self.transactional:
            return
        mark = self.plan.mark
        await self._on_pool(lambda c: c.execute(mark.sql, mark.bind(self._values(record))))

    async def _on_pool(self, run: Callable[[Connection], Awaitable[T]]) -> T:
        pool = self._broker.pool
        conn: Connection = await pool.acquire("seen records")
        try:
            return await run(conn)
        finally:
            await give_back(pool, conn)
