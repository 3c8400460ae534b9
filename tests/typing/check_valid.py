"""What must type-check, with the types mypy and pyright must infer.

mypy checks this file (mypy.ini ``files``), and tests/unit/test_typing_behaviour.py runs mypy
and pyright on it as on a user's code; pytest never collects it (not ``test_*``) and nothing
runs it. Every scenario is a function with typed parameters, so that no database is
needed and one case cannot leak a wrong inference into the next.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, LiteralString, TypeAlias, assert_type

from trinbox import (
    Advisory,
    App,
    Attempt,
    Default,
    HandlerOutcome,
    Id,
    Immediate,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RowLock,
    Serializable,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.typing import (
    Batched,
    Mount,
    MySql,
    Needs,
    Plain,
    Postgres,
    Single,
    Sqlite,
    Subscriber,
    Transactional,
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


@dataclass
class Email:
    to: str


# Job has a payload field: its handlers take the decoded message (here an Email), never a Job.
async def handle_job(email: Email) -> None: ...
async def handle_keyed(row: Keyed) -> HandlerOutcome:
    return HandlerOutcome.ack()


async def handle_locked(row: Locked) -> None: ...
async def handle_with_keys(email: Email, attempt: keys.Attempt, pool: keys.Pool) -> None: ...
async def handle_in_tx(
    email: Email, tx: keys.Tx, attempt: keys.Attempt
) -> HandlerOutcome | None: ...
async def handle_batch(emails: list[Email]) -> list[HandlerOutcome]:
    return [HandlerOutcome.ack() for _ in emails]


@subscriber(InboxQueue(Job, "jobs"))
async def decorated(email: Email, attempt: keys.Attempt) -> HandlerOutcome:
    return HandlerOutcome.ack()


# A subscriber keeps its handler's type (parameters and return) and what it needs of a dialect.
assert_type(
    decorated,
    Subscriber[
        Job,
        Plain,
        Callable[[Email, keys.Attempt], Awaitable[HandlerOutcome]],
        Needs[Job, Lease, Default, Plain] | None,
    ],
)
# Annotations name the row and mode; the rest defaults to "any handler" and the row's needs
# (``tuple[Job, Plain] | None``, which a decorated handler's ``Needs`` is).
as_annotated: Subscriber[Job, Plain] = decorated


def check_brokers_carry_their_dialect() -> None:
    assert_type(SqlBroker.sqlite("sqlite:///jobs.db"), SqlBroker[Sqlite])
    assert_type(SqlBroker.postgres("postgresql://localhost/jobs"), SqlBroker[Postgres])
    assert_type(SqlBroker.mysql("mysql://localhost/jobs"), SqlBroker[MySql])


def check_queue_settings_keep_row_and_mode() -> None:
    assert_type(InboxQueue(Job, "jobs"), InboxQueue[Job, Plain])
    assert_type(InboxQueue(Job, "jobs"), InboxQueue[Job, Plain, Single])
    assert_type(InboxQueue(Job, "jobs").transactional(), InboxQueue[Job, Transactional])
    assert_type(
        InboxQueue(Locked, "locked").transactional().workers(4).poll_interval(0.5),
        InboxQueue[Locked, Transactional],
    )
    assert_type(
        InboxQueue(Locked, "locked").workers(4).batch(10).poll_interval(0.5).batch(5),
        InboxQueue[Locked, Plain, Batched],
    )
    assert_type(InboxQueue(Job, "jobs").lease(timedelta(seconds=30)), InboxQueue[Job, Plain])
    # Over every group of a FIFO table (refused at runtime on other tables).
    assert_type(
        InboxQueue(Job, "ledger").every_group().transactional().workers(8),
        InboxQueue[Job, Transactional],
    )
    assert_type(InboxQueue(Job, "ledger").every_group().group, str | None)
    assert_type(InboxQueue(Job, "jobs").transactional().lease(30), InboxQueue[Job, Transactional])


def check_lease_setting_on_any_row(queue: InboxQueue[Any, Plain]) -> None:
    assert_type(queue.lease(30), InboxQueue[Any, Plain])


# Type aliases for the assertions below (a type checker reads an alias, not a variable).
JobNeeds: TypeAlias = Needs[Job, Lease, Default, Plain] | None
JobTxNeeds: TypeAlias = Needs[Job, Lease, Default, Transactional] | None
WithKeys: TypeAlias = Callable[[Email, keys.Attempt, keys.Pool], Awaitable[None]]
Batch: TypeAlias = Callable[[list[Email]], Awaitable[list[HandlerOutcome]]]
TxKeys: TypeAlias = Callable[[Email, keys.Tx, keys.Attempt], Awaitable[HandlerOutcome | None]]
Positional: TypeAlias = tuple[LiteralString, tuple[object, ...]]
Named: TypeAlias = tuple[LiteralString, dict[str, object]]


def check_handlers() -> None:
    plain = subscriber(InboxQueue(Job, "jobs"))
    assert_type(
        plain(handle_job), Subscriber[Job, Plain, Callable[[Email], Awaitable[None]], JobNeeds]
    )
    assert_type(plain(handle_with_keys), Subscriber[Job, Plain, WithKeys, JobNeeds])
    assert_type(
        subscriber(InboxQueue(Job, "jobs").batch(10))(handle_batch),
        Subscriber[Job, Plain, Batch, JobNeeds],
    )
    in_tx = subscriber(InboxQueue(Job, "jobs").transactional())
    assert_type(in_tx(handle_in_tx), Subscriber[Job, Transactional, TxKeys, JobTxNeeds])
    assert_type(in_tx(handle_with_keys), Subscriber[Job, Transactional, WithKeys, JobTxNeeds])


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
    broker's own driver, a dict for the named ones. The text is a LiteralString (made of the
    declaration's names, never of a value), as psycopg's typing asks of SQL text."""
    assert_type(broker.insert_statement(Job, b"m"), Positional)
    assert_type(broker.insert_statement(Job, b"m", paramstyle=None), Positional)
    assert_type(broker.insert_statement(Job, b"m", paramstyle="format"), Positional)
    assert_type(broker.insert_statement(Job, b"m", paramstyle="qmark"), Positional)
    assert_type(broker.insert_statement(Job, b"m", paramstyle="pyformat"), Named)
    assert_type(broker.insert_statement(Job, b"m", paramstyle="named"), Named)
    assert_type(broker.insert_statement(Job, b"m", paramstyle="sqlalchemy"), Named)
