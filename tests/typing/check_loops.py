"""Mounts written the way services write them: subscribers in lists and dicts mounted in a loop,
brokers in variables, queues from helper functions, ``subscriber(q)(fn)``, chained mounts.

A list's element type is mypy's join of its items (pyright's union of them); for subscribers of
different row classes that keeps every row's needs (``Needs[Row, Form, Isolation, Mode] | None``
joins into the union of them), so a loop over valid subscribers type-checks and one invalid
member still fails the include, with a message that names each row's form.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, assert_type

from trinbox import (
    Advisory,
    App,
    Attempt,
    Id,
    Immediate,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    RepeatableRead,
    RowLock,
    Serializable,
    SqlBroker,
    subscriber,
)
from trinbox.typing import Mount, MySql, Plain, Postgres, Sqlite, Subscriber, Transactional


class Job(Inbox[Lease], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    attempt: Annotated[int, Attempt(generated=True)]


class Keyed(Inbox[Advisory, Immediate], table="keyed", advisory_lock="keyed-{id}"):
    id: Annotated[int, Id(generated=True)]


class Locked(Inbox[RowLock], table="locked"):
    id: Annotated[int, Id(generated=True)]


class Snapshot(Inbox[Lease, RepeatableRead], table="snap"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]


class Strict(Inbox[Lease, Serializable], table="strict"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]


@subscriber(InboxQueue(Job, "jobs"))
async def on_job(job: Job) -> None: ...


@subscriber(InboxQueue(Keyed, "keyed").transactional())
async def on_keyed(row: Keyed) -> None: ...


@subscriber(InboxQueue(Locked, "locked"))
async def on_locked(row: Locked) -> None: ...


async def on_snapshot(row: Snapshot) -> None: ...


def jobs_queue(name: str) -> InboxQueue[Job, Plain]:
    return InboxQueue(Job, name).workers(2)


def locked_queue() -> InboxQueue[Locked, Transactional]:
    return InboxQueue(Locked, "locked").transactional()


def check_a_list_in_a_loop(app: App) -> None:
    broker = SqlBroker.sqlite("sqlite:///app.db")
    for sub in [on_job, on_keyed]:
        assert_type(app.include(broker, sub), Mount)
    for mount in [app.include(broker, s).max_attempts(3).dead_letter("dead") for s in [on_job]]:
        assert_type(mount, Mount)


def check_a_dict_and_a_tuple_in_a_loop(app: App, broker: SqlBroker[Sqlite]) -> None:
    subscribers = {"jobs": on_job, "keyed": on_keyed}
    for sub in subscribers.values():
        app.include(broker, sub)
    for sub in (on_job, on_keyed):
        app.include(broker, sub)


def check_one_invalid_member_fails_the_loop(app: App, broker: SqlBroker[Sqlite]) -> None:
    # The joined Needs hold Needs[Locked, RowLock, Default, Plain], which SQLite does not mount.
    for sub in [on_job, on_keyed, on_locked]:
        app.include(broker, sub)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_servers_mount_the_same_list(
    app: App, pg: SqlBroker[Postgres], my: SqlBroker[MySql]
) -> None:
    everything = [on_job, on_locked]
    for sub in everything:
        app.include(pg, sub)
        app.include(my, sub)
    for keyed in [on_keyed]:  # SQLite's Immediate: no server opens it
        app.include(pg, keyed)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_annotated_lists(app: App, broker: SqlBroker[Sqlite]) -> None:
    subs: list[Subscriber[Any, Any]] = [on_job, on_keyed, on_locked]
    for sub in subs:
        app.include(broker, sub)  # untyped as written: include refuses on_locked at runtime
    typed: list[Subscriber[Job, Plain]] = [on_job]
    for job_sub in typed:
        app.include(broker, job_sub)
    locked: list[Subscriber[Locked, Plain]] = [on_locked]
    for locked_sub in locked:
        app.include(broker, locked_sub)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_queues_from_helpers(app: App, broker: SqlBroker[Sqlite]) -> None:
    sub = subscriber(jobs_queue("jobs"))(on_job.handler)
    assert_type(app.include(broker, sub), Mount)
    app.include(broker, subscriber(locked_queue())(on_locked.handler))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_brokers_in_variables(app: App) -> None:
    lite = SqlBroker.sqlite("sqlite:///app.db")
    pg = SqlBroker.postgres("postgresql://db/app")
    my = SqlBroker.mysql("mysql://db/app")
    for broker in (pg, my):
        app.include(broker, on_locked)
    app.include(lite, on_locked)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_the_transactional_lease_rule(
    app: App, pg: SqlBroker[Postgres], my: SqlBroker[MySql]
) -> None:
    # PostgreSQL runs a transactional lease handler at read committed only.
    in_tx = subscriber(InboxQueue(Snapshot, "snap").transactional())(on_snapshot)
    app.include(pg, in_tx)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]
    app.include(my, in_tx)
    app.include(pg, subscriber(InboxQueue(Snapshot, "snap"))(on_snapshot))
    strict = subscriber(InboxQueue(Strict, "strict").transactional())

    @strict
    async def on_strict(row: Strict) -> None: ...

    for sub in [in_tx, on_strict]:
        app.include(pg, sub)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]
        app.include(my, sub)
