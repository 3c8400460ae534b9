"""Handlers: what type checkers accept, and what they turn into a named refusal that nothing
mounts.

Each rule's refusal is pinned twice: ``assert_type`` names the type the decorator returns (the
rule), and an ``App.include`` of it fails, with the codes its markers name: ``# type:
ignore[call-overload]`` for mypy, ``# pyright: ignore[...]`` for pyright (the markers are read by
tests/unit/test_typing_behaviour.py).
"""
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, TypeAlias, assert_type

from trinbox import (
    Advisory,
    App,
    Attempt,
    Default,
    HandlerOutcome,
    Id,
    Inbox,
    InboxQueue,
    Lease,
    LockedUntil,
    Payload,
    RowLock,
    SqlBroker,
    keys,
    subscriber,
)
from trinbox.typing import (
    Batched,
    BatchesNeverTransactional,
    BatchTakesAList,
    BatchTakesNoRowKeys,
    ContextKeyNotOptional,
    HandlerTakesAnotherRow,
    ListNeedsBatch,
    Mount,
    Needs,
    NotAContextKey,
    NotAHandler,
    OutcomeListNeedsBatch,
    PayloadHandlerTakesTheMessage,
    Plain,
    Sqlite,
    Subscriber,
    Transactional,
    TxNeedsTransactional,
)


class Job(Inbox[Lease], table="jobs"):
    """Payload mode: its handlers take the decoded message."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    attempt: Annotated[int, Attempt(generated=True)]
    payload: Annotated[bytes, Payload()]


class Keyed(Inbox[Advisory], table="keyed", advisory_lock="keyed-{id}"):
    """Row mode (no payload field): its handlers take the row."""

    id: Annotated[int, Id(generated=True)]
    attempt: Annotated[int, Attempt(generated=True)]


class Locked(Inbox[RowLock], table="locked"):
    id: Annotated[int, Id(generated=True)]


@dataclass
class Email:
    to: str


JOBS = InboxQueue(Job, "jobs")
KEYED = InboxQueue(Keyed, "keyed")


# -- accepted ------------------------------------------------------------------------------------


async def on_email(email: Email) -> None: ...
async def on_bytes(raw: bytes) -> HandlerOutcome: ...
async def on_anything(message: object, attempt: keys.Attempt) -> None: ...
async def on_json_list(numbers: list[int]) -> None: ...
async def on_row(row: Keyed, attempt: keys.Attempt, pool: keys.Pool) -> HandlerOutcome | None: ...
async def on_row_in_tx(row: Keyed, tx: keys.Tx, attempt: keys.Attempt) -> None: ...
async def on_rows(rows: list[Keyed], pool: keys.Pool) -> list[HandlerOutcome]: ...
async def on_row_seq(rows: Sequence[Keyed]) -> None: ...
async def on_emails(emails: list[Email]) -> HandlerOutcome: ...


JobNeeds: TypeAlias = Needs[Job, Lease, Default, Plain] | None
RowHandler: TypeAlias = Callable[[Keyed, keys.Attempt, keys.Pool], Awaitable[HandlerOutcome | None]]
InTx: TypeAlias = Callable[[Keyed, keys.Tx, keys.Attempt], Awaitable[None]]
Rows: TypeAlias = Callable[[list[Keyed], keys.Pool], Awaitable[list[HandlerOutcome]]]
TxFourth: TypeAlias = Callable[[Keyed, keys.Attempt, keys.Pool, keys.Tx], Awaitable[None]]


def check_accepted(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(
        subscriber(JOBS)(on_email),
        Subscriber[Job, Plain, Callable[[Email], Awaitable[None]], JobNeeds],
    )
    assert_type(
        subscriber(JOBS)(on_bytes),
        Subscriber[Job, Plain, Callable[[bytes], Awaitable[HandlerOutcome]], JobNeeds],
    )
    assert_type(
        subscriber(JOBS)(on_anything),
        Subscriber[Job, Plain, Callable[[object, keys.Attempt], Awaitable[None]], JobNeeds],
    )
    assert_type(
        subscriber(JOBS)(on_json_list),
        Subscriber[Job, Plain, Callable[[list[int]], Awaitable[None]], JobNeeds],
    )
    assert_type(
        subscriber(KEYED)(on_row),
        Subscriber[Keyed, Plain, RowHandler, Needs[Keyed, Advisory, Default, Plain] | None],
    )
    assert_type(
        subscriber(KEYED.transactional())(on_row_in_tx),
        Subscriber[
            Keyed, Transactional, InTx, Needs[Keyed, Advisory, Default, Transactional] | None
        ],
    )
    assert_type(
        subscriber(KEYED.batch(10))(on_rows),
        Subscriber[Keyed, Plain, Rows, Needs[Keyed, Advisory, Default, Plain] | None],
    )
    assert_type(app.include(broker, subscriber(KEYED.batch(10))(on_row_seq)), Mount)
    assert_type(app.include(broker, subscriber(JOBS.workers(2).batch(5))(on_emails)), Mount)


def check_handler_keeps_its_signature() -> None:
    sub = subscriber(KEYED)(on_row)
    assert_type(
        sub.handler, Callable[[Keyed, keys.Attempt, keys.Pool], Awaitable[HandlerOutcome | None]]
    )
    sub.handler(Keyed(id=1, attempt=1), "one", "two")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def check_decorated(app: App, broker: SqlBroker[Sqlite]) -> None:
    @subscriber(KEYED)
    async def handle(row: Keyed, attempt: keys.Attempt) -> HandlerOutcome:
        return HandlerOutcome.retry()

    assert_type(app.include(broker, handle).max_attempts(3).dead_letter("keyed_dead"), Mount)


def check_outcomes() -> None:
    assert_type(HandlerOutcome.snooze(timedelta(seconds=5)), HandlerOutcome)
    assert_type(HandlerOutcome.retry_after(timedelta(seconds=5)), HandlerOutcome)
    HandlerOutcome.snooze(5)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


# -- refused -------------------------------------------------------------------------------------
# No overload of App.include takes a refusal: mypy names it among the argument types ("No
# overload variant of "include" of "App" matches argument types "SqlBroker[Sqlite]",
# "<the rule>""), pyright as the argument it cannot assign. (A handler of no known shape, like
# ``subscriber(q)(42)``, fails at the decoration.)


async def batch_attempt(rows: list[Keyed], attempt: keys.Attempt) -> None: ...
async def batch_pool_attempt(rows: list[Keyed], pool: keys.Pool, attempt: keys.Attempt) -> None: ...
async def batch_tx(rows: list[Keyed], tx: keys.Tx) -> None: ...


def check_batch_takes_no_row_keys(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(subscriber(KEYED.batch(10))(batch_attempt), BatchTakesNoRowKeys)
    assert_type(subscriber(KEYED.batch(10))(batch_pool_attempt), BatchTakesNoRowKeys)
    assert_type(subscriber(KEYED.batch(10))(batch_tx), BatchTakesNoRowKeys)
    app.include(broker, subscriber(KEYED.batch(10))(batch_attempt))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]
    app.include(broker, subscriber(KEYED.batch(10))(batch_tx))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def one_row(row: Keyed) -> None: ...
async def one_object(message: object) -> None: ...
async def one_email(email: Email) -> None: ...


def check_batch_takes_a_list(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(subscriber(KEYED.batch(10))(one_row), BatchTakesAList)
    assert_type(subscriber(KEYED.batch(10))(one_object), BatchTakesAList)
    assert_type(subscriber(JOBS.batch(10))(one_email), BatchTakesAList)
    app.include(broker, subscriber(KEYED.batch(10))(one_row))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def many_rows(rows: list[Keyed]) -> None: ...
async def many_rows_seq(rows: Sequence[Keyed], attempt: keys.Attempt) -> None: ...


def check_list_needs_batch(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(subscriber(KEYED)(many_rows), ListNeedsBatch)
    assert_type(subscriber(KEYED)(many_rows_seq), ListNeedsBatch)
    assert_type(subscriber(KEYED.transactional())(many_rows), ListNeedsBatch)
    app.include(broker, subscriber(KEYED)(many_rows))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def takes_locked(row: Locked) -> None: ...
async def takes_locked_rows(rows: list[Locked]) -> None: ...
async def takes_keyed(row: Keyed, attempt: keys.Attempt) -> None: ...


def check_handler_takes_another_row(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(subscriber(KEYED)(takes_locked), HandlerTakesAnotherRow)
    assert_type(subscriber(KEYED.transactional())(takes_locked), HandlerTakesAnotherRow)
    assert_type(subscriber(KEYED.batch(2))(takes_locked_rows), HandlerTakesAnotherRow)
    assert_type(subscriber(JOBS)(takes_keyed), HandlerTakesAnotherRow)
    app.include(broker, subscriber(KEYED)(takes_locked))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def takes_job(job: Job) -> None: ...
async def takes_job_with_keys(job: Job, attempt: keys.Attempt) -> HandlerOutcome: ...
async def takes_jobs(jobs: list[Job]) -> None: ...


def check_payload_handler_takes_the_message(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(subscriber(JOBS)(takes_job), PayloadHandlerTakesTheMessage)
    assert_type(subscriber(JOBS)(takes_job_with_keys), PayloadHandlerTakesTheMessage)
    assert_type(subscriber(JOBS.transactional())(takes_job), PayloadHandlerTakesTheMessage)
    assert_type(subscriber(JOBS.batch(5))(takes_jobs), PayloadHandlerTakesTheMessage)
    app.include(broker, subscriber(JOBS)(takes_job))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def returns_a_list(row: Keyed) -> list[HandlerOutcome]: ...
async def returns_a_sequence(email: Email, pool: keys.Pool) -> Sequence[HandlerOutcome]: ...


def check_outcome_list_needs_batch(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(subscriber(KEYED)(returns_a_list), OutcomeListNeedsBatch)
    assert_type(subscriber(JOBS)(returns_a_sequence), OutcomeListNeedsBatch)
    assert_type(subscriber(KEYED.transactional())(returns_a_list), OutcomeListNeedsBatch)
    app.include(broker, subscriber(KEYED)(returns_a_list))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def optional_tx(row: Keyed, tx: keys.Tx | None = None) -> None: ...
async def optional_attempt(row: Keyed, pool: keys.Pool, attempt: keys.Attempt | None) -> None: ...


def check_context_keys_are_never_optional(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(subscriber(KEYED.transactional())(optional_tx), ContextKeyNotOptional)
    assert_type(subscriber(KEYED)(optional_tx), ContextKeyNotOptional)
    assert_type(subscriber(KEYED)(optional_attempt), ContextKeyNotOptional)
    assert_type(subscriber(KEYED.batch(3))(optional_attempt), ContextKeyNotOptional)
    app.include(broker, subscriber(KEYED.transactional())(optional_tx))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def int_attempt(row: Keyed, attempt: int) -> None: ...
async def object_key(row: Keyed, pool: keys.Pool, extra: object) -> None: ...
async def str_key(row: Keyed, name: str) -> None: ...


def check_further_parameters_are_context_keys(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(subscriber(KEYED)(int_attempt), NotAContextKey)
    assert_type(subscriber(KEYED.transactional())(object_key), NotAContextKey)
    assert_type(subscriber(KEYED)(str_key), NotAHandler)
    app.include(broker, subscriber(KEYED)(int_attempt))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]
    app.include(broker, subscriber(KEYED)(str_key))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


async def tx_fourth(row: Keyed, attempt: keys.Attempt, pool: keys.Pool, tx: keys.Tx) -> None: ...


def check_tx_needs_transactional(app: App, broker: SqlBroker[Sqlite]) -> None:
    # The Plain handler taking (row, attempt, pool, tx) names the Tx rule too.
    assert_type(subscriber(KEYED)(tx_fourth), TxNeedsTransactional)
    assert_type(
        subscriber(KEYED.transactional())(tx_fourth),
        Subscriber[
            Keyed,
            Transactional,
            TxFourth,
            Needs[Keyed, Advisory, Default, Transactional] | None,
        ],
    )
    app.include(broker, subscriber(KEYED)(tx_fourth))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


def not_async(row: Keyed) -> None: ...
async def returns_an_int(row: Keyed) -> int: ...


def check_not_a_handler(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(subscriber(KEYED)(not_async), NotAHandler)
    assert_type(subscriber(KEYED)(returns_an_int), NotAHandler)
    app.include(broker, subscriber(KEYED)(not_async))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]
    subscriber(KEYED)(42)  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


# -- batches never run in transactional mode -----------------------------------------------------
# .batch(n) on a transactional queue expects a BatchesNeverTransactional (nothing is one), and
# .transactional() on a batch queue is one, which subscriber() does not take.


def check_batches_never_run_in_transactional_mode() -> None:
    KEYED.transactional().batch(10)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    KEYED.transactional().workers(2).batch(10)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert_type(KEYED.batch(10).transactional(), BatchesNeverTransactional)
    subscriber(KEYED.batch(10).transactional())  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    KEYED.batch(10).transactional().workers(2)  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    assert_type(KEYED.batch(10).batch(20), InboxQueue[Keyed, Plain, Batched])


# -- a Subscriber is made by the decorator only ---------------------------------------------------
# Subscriber(..) takes two DecorateWithSubscriber (nothing is one).


def check_subscriber_is_made_by_decorating() -> None:
    Subscriber(KEYED, on_row)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


# -- what type checkers take for payload mode: a bytes field named payload ----------------------


class Renamed(Inbox[Lease], table="renamed"):
    """Payload mode under another name: mypy cannot tell, so only startup refuses its row."""

    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]
    body: Annotated[bytes, Payload()]


class TextPayload(Inbox[Advisory], table="text", advisory_lock="{id}"):
    """Row mode with a data field named payload that is not bytes: its handler takes the row."""

    id: Annotated[int, Id(generated=True)]
    payload: str


async def takes_renamed(row: Renamed) -> None: ...
async def takes_text(row: TextPayload) -> None: ...


def check_payload_mode_as_mypy_sees_it() -> None:
    assert_type(
        subscriber(InboxQueue(Renamed, "r"))(takes_renamed),
        Subscriber[
            Renamed,
            Plain,
            Callable[[Renamed], Awaitable[None]],
            Needs[Renamed, Lease, Default, Plain] | None,
        ],
    )
    assert_type(
        subscriber(InboxQueue(Renamed, "r"))(on_email),
        Subscriber[
            Renamed,
            Plain,
            Callable[[Email], Awaitable[None]],
            Needs[Renamed, Lease, Default, Plain] | None,
        ],
    )
    assert_type(
        subscriber(InboxQueue(TextPayload, "t"))(takes_text),
        Subscriber[
            TextPayload,
            Plain,
            Callable[[TextPayload], Awaitable[None]],
            Needs[TextPayload, Advisory, Default, Plain] | None,
        ],
    )


# -- keys.RowId: the row's id, in every mode but a batch -------------------------------------------


async def with_row_id(email: Email, row_id: keys.RowId) -> None: ...
async def with_all_keys(
    email: Email, attempt: keys.Attempt, row_id: keys.RowId, pool: keys.Pool
) -> None: ...
async def with_all_keys_in_tx(
    row: Keyed, tx: keys.Tx, row_id: keys.RowId, attempt: keys.Attempt, pool: keys.Pool
) -> None: ...
async def batch_row_id(rows: list[Keyed], row_id: keys.RowId) -> None: ...
async def batch_pool_row_id(rows: list[Keyed], pool: keys.Pool, row_id: keys.RowId) -> None: ...
async def optional_row_id(row: Keyed, row_id: keys.RowId | None) -> None: ...
async def tx_fifth(
    row: Keyed, attempt: keys.Attempt, row_id: keys.RowId, pool: keys.Pool, tx: keys.Tx
) -> None: ...


_RowIdNeeds: TypeAlias = Needs[Job, Lease, Default, Plain] | None
_AllKeys: TypeAlias = Callable[[Email, keys.Attempt, keys.RowId, keys.Pool], Awaitable[None]]
_AllKeysInTx: TypeAlias = Callable[
    [Keyed, keys.Tx, keys.RowId, keys.Attempt, keys.Pool], Awaitable[None]
]


def check_row_id(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(
        subscriber(JOBS)(with_row_id),
        Subscriber[Job, Plain, Callable[[Email, keys.RowId], Awaitable[None]], _RowIdNeeds],
    )
    assert_type(subscriber(JOBS)(with_all_keys), Subscriber[Job, Plain, _AllKeys, _RowIdNeeds])
    assert_type(app.include(broker, subscriber(JOBS)(with_all_keys)), Mount)
    assert_type(
        subscriber(KEYED.transactional())(with_all_keys_in_tx),
        Subscriber[
            Keyed,
            Transactional,
            _AllKeysInTx,
            Needs[Keyed, Advisory, Default, Transactional] | None,
        ],
    )
    assert_type(subscriber(KEYED.batch(10))(batch_row_id), BatchTakesNoRowKeys)
    assert_type(subscriber(KEYED.batch(10))(batch_pool_row_id), BatchTakesNoRowKeys)
    assert_type(subscriber(KEYED)(optional_row_id), ContextKeyNotOptional)
    assert_type(subscriber(KEYED)(tx_fifth), TxNeedsTransactional)
    app.include(broker, subscriber(KEYED.batch(10))(batch_row_id))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]
    # A row id is whatever the table's Id field holds: an object to mypy.
    row_id = keys.RowId(7)
    row_id + 1  # type: ignore[operator]  # pyright: ignore[reportOperatorIssue, reportUnusedExpression]


# -- keys.Headers: the delivery's headers, a read-only mapping, in every mode but a batch ---------


async def with_headers(email: Email, headers: keys.Headers) -> None: ...
async def with_every_key(
    email: Email,
    attempt: keys.Attempt,
    row_id: keys.RowId,
    pool: keys.Pool,
    headers: keys.Headers,
) -> None: ...
async def with_every_key_in_tx(
    row: Keyed,
    tx: keys.Tx,
    row_id: keys.RowId,
    attempt: keys.Attempt,
    pool: keys.Pool,
    headers: keys.Headers,
) -> None: ...
async def batch_headers(rows: list[Keyed], headers: keys.Headers) -> None: ...
async def batch_pool_headers(rows: list[Keyed], pool: keys.Pool, headers: keys.Headers) -> None: ...
async def optional_headers(row: Keyed, headers: keys.Headers | None) -> None: ...
async def mapping_headers(email: Email, headers: Mapping[str, str]) -> None: ...
async def int_fifth(
    email: Email,
    attempt: keys.Attempt,
    row_id: keys.RowId,
    headers: keys.Headers,
    extra: int,
) -> None: ...


_EveryKey: TypeAlias = Callable[
    [Email, keys.Attempt, keys.RowId, keys.Pool, keys.Headers], Awaitable[None]
]
_EveryKeyInTx: TypeAlias = Callable[
    [Keyed, keys.Tx, keys.RowId, keys.Attempt, keys.Pool, keys.Headers], Awaitable[None]
]


def check_headers(app: App, broker: SqlBroker[Sqlite]) -> None:
    assert_type(
        subscriber(JOBS)(with_headers),
        Subscriber[Job, Plain, Callable[[Email, keys.Headers], Awaitable[None]], _RowIdNeeds],
    )
    assert_type(subscriber(JOBS)(with_every_key), Subscriber[Job, Plain, _EveryKey, _RowIdNeeds])
    assert_type(app.include(broker, subscriber(JOBS)(with_every_key)), Mount)
    assert_type(
        subscriber(KEYED.transactional())(with_every_key_in_tx),
        Subscriber[
            Keyed,
            Transactional,
            _EveryKeyInTx,
            Needs[Keyed, Advisory, Default, Transactional] | None,
        ],
    )
    assert_type(subscriber(KEYED.batch(10))(batch_headers), BatchTakesNoRowKeys)
    assert_type(subscriber(KEYED.batch(10))(batch_pool_headers), BatchTakesNoRowKeys)
    assert_type(subscriber(KEYED)(optional_headers), ContextKeyNotOptional)
    # A mapping that is not keys.Headers is no context key (keys.Headers is a Mapping).
    assert_type(subscriber(JOBS)(mapping_headers), NotAContextKey)
    assert_type(subscriber(JOBS)(int_fifth), NotAContextKey)
    app.include(broker, subscriber(KEYED.batch(10))(batch_headers))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]
    app.include(broker, subscriber(JOBS)(mapping_headers))  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue]


def check_headers_read_only(headers: keys.Headers) -> None:
    assert_type(headers["tenant"], str)
    assert_type(headers.get("tenant"), str | None)
    assert_type(dict(headers), dict[str, str])
    headers["tenant"] = "acme"  # type: ignore[index]  # pyright: ignore[reportIndexIssue]
