"""Progress: a ``Progress()`` field on a lease table, a handler taking ``keys.Progress``
mounted on every dialect, ``set`` of a float or int returning None, ``value`` a float or None;
``set`` of a str refused."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, assert_type

from trinbox import (
    App,
    AppInfo,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    Progress,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.typing import MySql, Postgres, Sqlite


@dataclass
class Render:
    n: int


class RenderJob(Inbox[Lease], table="render_jobs"):
    id: Annotated[int, Id()]
    locked_until: Annotated[datetime | None, LockedUntil()]
    done: Annotated[float | None, Progress()] = None
    payload: Annotated[bytes, Payload()]


@subscriber(InboxQueue(RenderJob, "renders"))
async def render(job: Render, progress: keys.Progress) -> None:
    assert_type(progress.set(0.5), None)
    progress.set(1)
    assert_type(progress.value, float | None)
    progress.set("0.5")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def mount(pg: SqlBroker[Postgres], my: SqlBroker[MySql], lite: SqlBroker[Sqlite]) -> None:
    app = App(AppInfo("renders", "1"))
    app.include(pg, render)
    app.include(my, render)
    app.include(lite, render)
