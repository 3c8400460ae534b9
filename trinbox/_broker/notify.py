"""PostgreSQL LISTEN/NOTIFY: publishes of other processes wake this process's subscriptions.

The broker keeps one connection of its own listening on the channel of every subscribed table
(the table's qualified name). A notification's payload is a group: it wakes that group's
subscription (and one over every group of the table), and an empty payload wakes every
subscription of the table. A lost listening
connection is opened again every second; once it listens again, every subscription is woken
once, because notifications sent meanwhile are gone. Polling stays the floor either way.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from .._bounds import RELEASE, within
from ..errors import DatabaseError, DeclarationError, StartupError

if TYPE_CHECKING:
    from .broker import SqlBroker

__all__ = ["CHANNEL_LIMIT", "NotifyListener", "check_channel"]

logger = logging.getLogger("trinbox.app")

CHANNEL_LIMIT = 63  # bytes: a PostgreSQL identifier
RECONNECT_WAIT = 1.0


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
        requests = broker.cancel_requests
        # A cancel request's channel too: its payload is the table whose watch it wakes.
        self._cancels = requests.channel if requests is not None else None
        self._channels = sorted(channels | ({self._cancels} if self._cancels else set()))
        self._scope = trio.CancelScope()
        self.reconnects = 0

    def stop(self) -> None:
        self._scope.cancel()

    def _notified(self, channel: str, payload: str) -> None:
        if channel == self._cancels:
            self._broker.cancel_wakes.settled(payload)
            return
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
