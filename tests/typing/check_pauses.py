"""Pauses: ``pauses=`` takes a ``Pauses`` on every constructor; ``broker.pause`` and
``resume`` take a row class (and a group by name) and return nothing to read; ``paused`` is
a bool, as ``SubscriptionStatistics.paused`` is."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, assert_type

from trinbox import App, Id, Inbox, Lease, LockedUntil, Pauses, Payload, SqlBroker

PAUSES = Pauses("app_pauses")


class Sync(Inbox[Lease], table="sync_jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    payload: Annotated[bytes, Payload()]


class NotARow:
    pass


async def pauses_typed(app: App) -> None:
    broker = SqlBroker.postgres("postgresql://db/app", pauses=PAUSES, listen_notify=True)
    SqlBroker.sqlite("sqlite:///app.db", pauses=Pauses("p", schema=None))
    SqlBroker.mysql("mysql://db/app", pauses=PAUSES)
    SqlBroker.from_url("sqlite:///app.db", pauses=PAUSES)
    assert_type(await broker.pause(Sync), None)
    assert_type(await broker.resume(Sync, group="sync"), None)
    assert_type(broker.paused(Sync), bool)
    assert_type(app.statistics()[0].paused, bool)
    await broker.pause(NotARow)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    await broker.pause(Sync, group=1)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    SqlBroker.sqlite("sqlite:///app.db", pauses="app_pauses")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
