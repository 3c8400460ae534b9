"""PostgreSQL LISTEN/NOTIFY: publishes of other processes wake this process's subscriptions.

The broker keeps one connection of its own listening on the channel of every subscribed table
(the table's qualified name). A notification's payload is a group: it wakes that group's
subscription (and one over every group of the table), and an empty payload wakes every
subscription of the table; one on the pause table's channel (its name) has the pause
watcher read the pauses at once. A lost listening
connection is opened again every second; once it listens again, every subscription is woken
once, because notifications sent meanwhile are gone. Polling stays the floor either way.

Settlements travel the same way for ``broker.wait``: the connection also listens on
``SETTLED_CHANNEL``, whose payload names a table whose rows settled, and wakes the waits on
it. ``SettledAnnouncer`` sends those notifications for the broker's own deliveries.
``SlotAnnouncer`` sends a publish's notification on a limited queue's table when its rows
finish here: a slot is free.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from .._bounds import ANNOUNCE, RELEASE, within
from .._holders.connections import give_back
from ..errors import DatabaseError, DeclarationError, StartupError
from .waiting import SETTLED_CHANNEL

if TYPE_CHECKING:
    from .broker import SqlBroker

__all__ = ["CHANNEL_LIMIT", "NotifyListener", "SettledAnnouncer", "SlotAnnouncer", "check_channel"]

logger = logging.getLogger("trinbox.app")

CHANNEL_LIMIT = 63  # bytes: a PostgreSQL identifier
RECONNECT_WAIT = 1.0
ANNOUNCE_SPACING = 0.02
"""Seconds from one settlement notification to the next: a busy queue announces 50 times a
second at most, whatever its settlement rate, and a quiet one at once."""


def check_channel(channel: str, where: str) -> None:
    if len(channel.encode()) > CHANNEL_LIMIT:
        msg = (
            f"{where}: a NOTIFY channel is the table's qualified name, at most "
            f"{CHANNEL_LIMIT} bytes, found {channel!r} ({len(channel.encode())} bytes); use a "
            f"shorter table or schema name, or drop listen_notify"
        )
        raise DeclarationError(msg)


class NotifyListener:
    """The broker's listening connection, run as a task of ``App.serve``."""

    def __init__(self, broker: SqlBroker[Any], channels: set[str]) -> None:
        self._broker = broker
        self._tables = channels
        requests = broker.cancel_requests
        # A cancel request's channel too: its payload is the table whose watch it wakes.
        self._cancels = requests.channel if requests is not None else None
        cancels: set[str] = {self._cancels} if self._cancels else set()
        # The settled channel first: a session's last query then names its last table.
        others = sorted((channels | cancels) - {SETTLED_CHANNEL})
        self._channels = [SETTLED_CHANNEL, *others]
        self._scope = trio.CancelScope()
        self.reconnects = 0

    def stop(self) -> None:
        self._scope.cancel()

    def _notified(self, channel: str, payload: str) -> None:
        if channel == SETTLED_CHANNEL:
            self._broker.settled_rows.settled(payload)
        if channel == self._cancels:
            self._broker.cancel_wakes.settled(payload)
            return
        pauses = self._broker.pauses
        if pauses is not None and channel == pauses.label:
            self._broker.pause_board.poke()  # a pause or resume: the watcher reads them now
            return
        if channel in self._tables:  # a table may be named as the settled channel is
            self._broker.wakes.wake(channel, payload or None)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        started = False
        with self._scope:
            while True:
                try:
                    await self._listen(task_status if not started else None)
                    started = True
                except DatabaseError as exc:
                    if not started:
                        msg = (
                            f"could not LISTEN on {', '.join(self._channels)} for "
                            f"{self._broker.url_label}: {exc}"
                        )
                        raise StartupError(msg) from exc
                    logger.warning("the listening connection failed: %s; again in 1 s", exc)
                except Exception as exc:
                    if not started:
                        raise
                    # Not the database's (a driver's untranslated error, a defect): polling
                    # goes on meanwhile, so it never ends serve; its traceback, once a try.
                    logger.warning(
                        "the listening connection failed: %r; again in 1 s", exc, exc_info=True
                    )
                await trio.sleep(RECONNECT_WAIT)

    async def _listen(self, task_status: trio.TaskStatus[None] | None) -> None:
        pool = await self._broker.open_side_pool()
        try:
            conn: Any = await pool.acquire("listener")
            try:
                for channel in self._channels:
                    await conn.listen(channel, self._notified)
                if task_status is not None:
                    task_status.started()
                else:
                    # Notifications sent while no connection listened are gone.
                    self.reconnects += 1
                    self._broker.wakes.wake_all()
                    self._broker.settled_rows.all_settled()
                    self._broker.cancel_wakes.all_settled()
                    self._broker.pause_board.poke()
                await conn.wait_lost()
                logger.warning("the listening connection was lost; listening again")
            finally:
                with within(RELEASE) as bound:
                    if conn.alive:
                        for channel in self._channels:
                            try:
                                await conn.unlisten(channel)
                            except DatabaseError:
                                break
                    await pool.close(conn)
                if bound.cancelled_caught:
                    pool.abandon(conn)
        finally:
            with trio.CancelScope(shield=True):
                await pool.aclose()


class SettledAnnouncer:
    """Tells other processes, on ``SETTLED_CHANNEL``, which tables' rows the broker's
    deliveries settled, so that their ``broker.wait`` reads at once instead of at its next
    poll. A task of ``App.serve`` where the broker listens and serves a table with a Result
    field. One NOTIFY per table settled since the last, on a pooled connection of its own,
    at most every ``ANNOUNCE_SPACING``: never a statement in a settlement's own round trip.
    A failed NOTIFY loses only the wake-up (the waits poll)."""

    def __init__(self, broker: SqlBroker[Any]) -> None:
        self._broker = broker

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        settled = self._broker.settled_rows
        settled.announcing(True)
        tables: list[str] = []
        try:
            task_status.started()
            while True:
                tables = await settled.unannounced()
                await self._announce(tables)
                tables = []
                await trio.sleep(ANNOUNCE_SPACING)
        finally:
            # Serving ended: the last settlements (a worker that handles a row and exits)
            # are announced too, within a bound.
            rest = sorted({*tables, *settled.take_unannounced()})
            settled.announcing(False)
            if rest:
                with within(ANNOUNCE):
                    await self._announce(rest)

    async def _announce(self, tables: list[str]) -> None:
        notify = self._broker.dialect.notify_statement()
        assert notify is not None, "started only where there is NOTIFY"
        try:
            pool = self._broker.pool
            conn = await pool.acquire("settled announcer")
            try:
                for table in tables:
                    await conn.execute(
                        notify.sql, notify.bind({"channel": SETTLED_CHANNEL, "group": table})
                    )
            finally:
                await give_back(pool, conn)
        except DatabaseError as exc:
            logger.warning(
                "NOTIFY of settled rows of %s failed: %s; waits in other processes see them "
                "at their next poll",
                ", ".join(tables),
                exc,
            )
        except Exception as exc:
            # Not the database's (a driver's untranslated error, a defect): only a wake-up
            # is lost, so it never ends serve; its traceback.
            logger.warning(
                "NOTIFY of settled rows of %s failed: %r; waits in other processes see them "
                "at their next poll",
                ", ".join(tables),
                exc,
                exc_info=True,
            )


class SlotAnnouncer:
    """Tells other processes which limited queues' rows finished here (``freed.FreedSlots``),
    so that their claims, a key at its limit, take the freed slot at once instead of at their
    next poll. A task of ``App.serve`` where the broker listens and serves a limited queue.
    One NOTIFY per (table, group) freed since the last, on the table's own channel with the
    group as payload (as a publish sends: the listeners wake that group's subscriptions), on a
    pooled connection of its own, at most every ``ANNOUNCE_SPACING``: never a statement in a
    settlement's own round trip. A failed NOTIFY loses only the wake-up (the claims poll)."""

    def __init__(self, broker: SqlBroker[Any]) -> None:
        self._broker = broker

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        freed = self._broker.freed_slots
        freed.announcing(True)
        pairs: list[tuple[str, str]] = []
        try:
            task_status.started()
            while True:
                pairs = await freed.unannounced()
                await self._announce(pairs)
                pairs = []
                await trio.sleep(ANNOUNCE_SPACING)
        finally:
            # Serving ended: the last rows to finish (a process that settles and exits) free
            # their slots too, announced within a bound.
            rest = sorted({*pairs, *freed.take_unannounced()})
            freed.announcing(False)
            if rest:
                with within(ANNOUNCE):
                    await self._announce(rest)

    async def _announce(self, pairs: list[tuple[str, str]]) -> None:
        notify = self._broker.dialect.notify_statement()
        assert notify is not None, "started only where there is NOTIFY"
        try:
            pool = self._broker.pool
            conn = await pool.acquire("slot announcer")
            try:
                for table, group in pairs:
                    await conn.execute(notify.sql, notify.bind({"channel": table, "group": group}))
                    self._broker.freed_slots.sent_one(table, group)
            finally:
                await give_back(pool, conn)
        except DatabaseError as exc:
            logger.warning(
                "NOTIFY of freed slots of %s failed: %s; claims in other processes see them "
                "at their next poll",
                ", ".join(table for table, _ in pairs),
                exc,
            )
        except Exception as exc:
            # Not the database's (a driver's untranslated error, a defect): only a wake-up is
            # lost, so it never ends serve; its traceback.
            logger.warning(
                "NOTIFY of freed slots of %s failed: %r; claims in other processes see them "
                "at their next poll",
                ", ".join(table for table, _ in pairs),
                exc,
                exc_info=True,
            )
