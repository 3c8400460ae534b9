"""What mypy and pyright must refuse, one statement per line, each ending in ``# type:
ignore[<mypy code>]  # pyright: ignore[<pyright rules>]``.

mypy.ini turns on ``warn_unused_ignores`` and ``ignore-without-code``: a line that stops failing,
or fails with another code, breaks the build; tests/unit/test_typing_behaviour.py runs both
checkers on this file as on a user's code and checks every line against its markers. The
whole dialect x form x isolation level x mode matrix is in check_matrix.py. Nothing here depends on
the project's extra error codes: the file type-checks the same under plain ``--strict``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from trinbox import (
    Advisory,
    App,
    Id,
    Immediate,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    ReadUncommitted,
    RowLock,
    Serializable,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.typing import MySql, Postgres, Sqlite


class Locked(Inbox[RowLock], table="locked"):
    id: Annotated[int, Id(generated=True)]


class Keyed(Inbox[Advisory], table="keyed", advisory_lock="keyed-{id}"):
    id: Annotated[int, Id(generated=True)]


class Job(Inbox[Lease], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]


class Strict(Inbox[Lease, Serializable], table="strict"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]


class Eager(Inbox[Lease, Immediate], table="eager"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]


class Dirty(Inbox[RowLock, ReadUncommitted], table="dirty"):
    id: Annotated[int, Id(generated=True)]


async def handle(message: object) -> None: ...
async def handle_in_tx(job: Job, tx: keys.Tx) -> None: ...
async def handle_tx_then_key(job: Job, tx: keys.Tx, attempt: keys.Attempt) -> None: ...
async def handle_key_then_tx(job: Job, pool: keys.Pool, tx: keys.Tx) -> None: ...


# -- a form the dialect does not serve ----------------------------------------------------------
# The subscriber's Needs (its row, the row's form and isolation level, its mode) are not among the
# (row, mode) pairs the dialect mounts: no overload of App.include takes the pair.


def check_sqlite_has_no_row_locks(app: App, broker: SqlBroker[Sqlite]) -> None:
    app.include(broker, subscriber(InboxQueue(Locked, "locked"))(handle))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_sqlite_has_no_row_locks_in_tx(app: App, broker: SqlBroker[Sqlite]) -> None:
    locked = subscriber(InboxQueue(Locked, "locked").transactional())(handle)
    app.include(broker, locked)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


# -- an isolation level the dialect does not open --------------------------------------------------


def check_sqlite_opens_no_isolation_level(app: App, broker: SqlBroker[Sqlite]) -> None:
    app.include(broker, subscriber(InboxQueue(Strict, "strict"))(handle))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_postgres_has_no_sqlite_modes(app: App, broker: SqlBroker[Postgres]) -> None:
    app.include(broker, subscriber(InboxQueue(Eager, "eager"))(handle))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_mysql_has_no_sqlite_modes(app: App, broker: SqlBroker[MySql]) -> None:
    app.include(broker, subscriber(InboxQueue(Eager, "eager"))(handle))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_postgres_opens_no_read_uncommitted(app: App, broker: SqlBroker[Postgres]) -> None:
    app.include(broker, subscriber(InboxQueue(Dirty, "dirty"))(handle))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]


# -- .lease(..) on a table without LockedUntil ----------------------------------------------------
# .lease(..) expects a LeaseNeedsLockedUntil there (nothing is one).


def check_row_lock_table_takes_no_lease() -> None:
    InboxQueue(Locked, "locked").lease(30)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def check_advisory_table_takes_no_lease() -> None:
    InboxQueue(Keyed, "keyed").transactional().lease(timedelta(seconds=30))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


# -- keys.Tx outside transactional mode -----------------------------------------------------------
# The decorator returns a TxNeedsTransactional, which no overload of App.include takes.


def check_tx_needs_transactional_mode(app: App, broker: SqlBroker[Sqlite]) -> None:
    app.include(broker, subscriber(InboxQueue(Job, "jobs"))(handle_in_tx))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_tx_before_a_key_needs_transactional_mode(app: App, broker: SqlBroker[Sqlite]) -> None:
    tx_handler = subscriber(InboxQueue(Job, "jobs"))(handle_tx_then_key)
    app.include(broker, tx_handler)  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_tx_after_a_key_needs_transactional_mode(app: App, broker: SqlBroker[Sqlite]) -> None:
    tx_handler = subscriber(InboxQueue(Job, "jobs"))(handle_key_then_tx)
    app.include(broker, tx_handler)  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_decorated_tx_handler(app: App, broker: SqlBroker[Sqlite]) -> None:
    @subscriber(InboxQueue(Job, "jobs"))
    async def in_tx(job: Job, tx: keys.Tx) -> None: ...

    app.include(broker, in_tx)  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


# -- not a row, not a subscriber -----------------------------------------------------------------


def check_queue_takes_a_row_class() -> None:
    InboxQueue(int, "jobs")  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]


def check_include_takes_a_subscriber(app: App, broker: SqlBroker[Sqlite]) -> None:
    app.include(broker, handle)  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


# -- LISTEN/NOTIFY is PostgreSQL's ----------------------------------------------------------------


def check_listen_notify_is_postgres_only() -> None:
    SqlBroker.postgres("postgresql://db/app", listen_notify=True)
    SqlBroker.mysql("mysql://db/app", listen_notify=True)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    SqlBroker.sqlite("sqlite:///app.db", listen_notify=True)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]


def check_paramstyles(broker: SqlBroker[Postgres]) -> None:
    broker.insert_statement(Job, b"m", paramstyle="numeric")  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]
    broker.insert_statement(Job, b"m", paramstyle="dollar")  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]
    _, params = broker.insert_statement(Job, b"m", paramstyle="pyformat")
    params[0]  # type: ignore[index]  # pyright: ignore[reportArgumentType]
