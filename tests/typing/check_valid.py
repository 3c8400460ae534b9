"""What must type-check, with the types mypy must infer (DESIGN.md §4).

mypy checks this file (mypy.ini ``files``); pytest never collects it (not ``test_*``) and
nothing runs it. Every scenario is a function with typed parameters, so that no database is
needed and one case cannot leak a wrong inference into the next.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, assert_type

from trinbox import (
    Advisory,
    App,
    Attempt,
    HandlerOutcome,
    Id,
    Immediate,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Mount,
    MySql,
    Payload,
    Plain,
    Postgres,
    RowLock,
    Serializable,
    SqlBroker,
    Sqlite,
    Subscriber,
    Transactional,
    keys,
    subscriber,
)


class Job(Inbox[Lease], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]


class Keyed(Inbox[Advisory, Immediate], table="keyed", advisory_lock="keyed-{id}"):
    id: Annotated[int, Id(generated=True)]


class Locked(Inbox[RowLock, Serializable], table="locked"):
    id: Annotated[int, Id(generated=True)]


async def handle_job(job: Job) -> None: ...
async def handle_keyed(row: Keyed) -> HandlerOutcome:
    return HandlerOutcome.ack()


async def handle_locked(row: Locked) -> None: ...
async def handle_with_keys(job: Job, attempt: keys.Attempt, pool: keys.Pool) -> None: ...
async def handle_in_tx(job: Job, tx: keys.Tx, attempt: keys.Attempt) -> HandlerOutcome | None: ...
async def handle_batch(jobs: list[Job]) -> list[HandlerOutcome]:
    return [HandlerOutcome.ack() for _ in jobs]


@subscriber(InboxQueue(Job, "jobs"))
async def decorated(job: Job, attempt: keys.Attempt) -> HandlerOutcome:
    return HandlerOutcome.ack()


assert_type(decorated, Subscriber[Job, Plain])


def check_brokers_carry_their_dialect() -> None:
    assert_type(SqlBroker.sqlite("sqlite:///jobs.db"), SqlBroker[Sqlite])
    assert_type(SqlBroker.postgres("postgresql://localhost/jobs"), SqlBroker[Postgres])
    assert_type(SqlBroker.mysql("mysql://localhost/jobs"), SqlBroker[MySql])


def check_queue_settings_keep_row_and_mode() -> None:
    assert_type(InboxQueue(Job, "jobs"), InboxQueue[Job, Plain])
    assert_type(InboxQueue(Job, "jobs").transactional(), InboxQueue[Job, Transactional])
    assert_type(
        InboxQueue(Locked, "locked").transactional().workers(4).poll_interval(0.5).batch(1),
        InboxQueue[Locked, Transactional],
    )
    assert_type(InboxQueue(Job, "jobs").lease(timedelta(seconds=30)), InboxQueue[Job, Plain])
    assert_type(InboxQueue(Job, "jobs").transactional().lease(30), InboxQueue[Job, Transactional])


def check_lease_setting_on_any_row(queue: InboxQueue[Any, Plain]) -> None:
    assert_type(queue.lease(30), InboxQueue[Any, Plain])


def check_handlers() -> None:
    plain = subscriber(InboxQueue(Job, "jobs"))
    assert_type(plain(handle_job), Subscriber[Job, Plain])
    assert_type(plain(handle_with_keys), Subscriber[Job, Plain])
    assert_type(subscriber(InboxQueue(Job, "jobs").batch(10))(handle_batch), Subscriber[Job, Plain])
    in_tx = subscriber(InboxQueue(Job, "jobs").transactional())
    assert_type(in_tx(handle_in_tx), Subscriber[Job, Transactional])
    assert_type(in_tx(handle_with_keys), Subscriber[Job, Transactional])


def check_sqlite_serves_lease_and_advisory(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(app.include(broker, subscriber(InboxQueue(Job, "jobs"))(handle_job)), Mount)
    assert_type(app.include(broker, subscriber(InboxQueue(Keyed, "k"))(handle_keyed)), Mount)
    in_tx = subscriber(InboxQueue(Job, "jobs").transactional())(handle_in_tx)
    assert_type(app.include(broker, in_tx).max_attempts(3).dead_letter("jobs_dead"), Mount)


def check_servers_serve_row_locks(
    app: App, postgres: SqlBroker[Postgres], mysql: SqlBroker[MySql]
) -> None:
    locked = subscriber(InboxQueue(Locked, "locked"))(handle_locked)
    assert_type(app.include(postgres, locked), Mount)
    assert_type(app.include(mysql, locked), Mount)


def check_untyped_callers_mount_anything(
    app: App, broker: SqlBroker[Any], sub: Subscriber[Any, Any]
) -> None:
    assert_type(app.include(broker, sub), Mount)
    assert_type(app.include(broker, subscriber(InboxQueue(Locked, "l"))(handle_locked)), Mount)


def insert_statements_by_paramstyle(broker: SqlBroker[Postgres]) -> None:
    """The parameters' type follows the paramstyle: a tuple for the positional styles and the
    broker's own driver, a dict for the named ones."""
    positional = tuple[str, tuple[object, ...]]
    named = tuple[str, dict[str, object]]
    assert_type(broker.insert_statement(Job, b"m"), positional)
    assert_type(broker.insert_statement(Job, b"m", paramstyle=None), positional)
    assert_type(broker.insert_statement(Job, b"m", paramstyle="format"), positional)
    assert_type(broker.insert_statement(Job, b"m", paramstyle="qmark"), positional)
    assert_type(broker.insert_statement(Job, b"m", paramstyle="pyformat"), named)
    assert_type(broker.insert_statement(Job, b"m", paramstyle="named"), named)
    assert_type(broker.insert_statement(Job, b"m", paramstyle="sqlalchemy"), named)
