"""trinbox: task queues in your own SQL tables, for Trio.

Layers (a module imports only from layers below it):

    trinbox, trinbox.keys, trinbox.testing      public facades (re-exports only)
    _runtime                                    app, broker, subscriptions, handlers, codecs
    _forms                                      row lock, lease and advisory claim forms
    _dialects | _drivers                        SQL text (pure) | database I/O (only here)
    _declare, _errors                           row declarations, specs, markers; errors
"""

from __future__ import annotations

from types import ModuleType as _ModuleType

from . import keys as keys
from ._declare._capabilities import AnyDatabase as AnyDatabase
from ._declare._capabilities import MySql as MySql
from ._declare._capabilities import Postgres as Postgres
from ._declare._capabilities import RowOf as RowOf
from ._declare._capabilities import Serves as Serves
from ._declare._capabilities import Sqlite as Sqlite
from ._declare._inbox import GENERATED as GENERATED
from ._declare._inbox import Inbox as Inbox
from ._declare._manual import InboxSpec as InboxSpec
from ._declare._markers import Advisory as Advisory
from ._declare._markers import Default as Default
from ._declare._markers import Deferred as Deferred
from ._declare._markers import Exclusive as Exclusive
from ._declare._markers import Form as Form
from ._declare._markers import Immediate as Immediate
from ._declare._markers import Isolation as Isolation
from ._declare._markers import Lease as Lease
from ._declare._markers import Mode as Mode
from ._declare._markers import Opening as Opening
from ._declare._markers import Plain as Plain
from ._declare._markers import ReadCommitted as ReadCommitted
from ._declare._markers import ReadUncommitted as ReadUncommitted
from ._declare._markers import RepeatableRead as RepeatableRead
from ._declare._markers import RowLock as RowLock
from ._declare._markers import Serializable as Serializable
from ._declare._markers import SqliteMode as SqliteMode
from ._declare._markers import Transactional as Transactional
from ._declare._roles import Attempt as Attempt
from ._declare._roles import Column as Column
from ._declare._roles import Generated as Generated
from ._declare._roles import Group as Group
from ._declare._roles import Id as Id
from ._declare._roles import LockedUntil as LockedUntil
from ._declare._roles import OriginGroup as OriginGroup
from ._declare._roles import Payload as Payload
from ._declare._roles import Priority as Priority
from ._declare._roles import ProcessedAt as ProcessedAt
from ._declare._roles import RetryAfter as RetryAfter
from ._declare._spec import KeyColumn as KeyColumn
from ._declare._spec import KeyLiteral as KeyLiteral
from ._declare._sqltype import SqlType as SqlType
from ._errors import AlreadySubscribed as AlreadySubscribed
from ._errors import BatchRolledBack as BatchRolledBack
from ._errors import Closed as Closed
from ._errors import ConnectError as ConnectError
from ._errors import ConnectionLost as ConnectionLost
from ._errors import DatabaseError as DatabaseError
from ._errors import DeclarationError as DeclarationError
from ._errors import FifoAtSerializable as FifoAtSerializable
from ._errors import HandlerFailed as HandlerFailed
from ._errors import IdentifierTooLong as IdentifierTooLong
from ._errors import IntegrityError as IntegrityError
from ._errors import LeaseLost as LeaseLost
from ._errors import LockNotAvailable as LockNotAvailable
from ._errors import MissingDriver as MissingDriver
from ._errors import PoolExhausted as PoolExhausted
from ._errors import SchemaError as SchemaError
from ._errors import ServerTooOld as ServerTooOld
from ._errors import SettlementError as SettlementError
from ._errors import StartupError as StartupError
from ._errors import TransactionHeld as TransactionHeld
from ._errors import TrinboxError as TrinboxError
from ._errors import UnsupportedForm as UnsupportedForm
from ._errors import UnsupportedOpening as UnsupportedOpening
from ._runtime.app import App as App
from ._runtime.app import AppInfo as AppInfo
from ._runtime.app import Mount as Mount
from ._runtime.app import ShutdownReport as ShutdownReport
from ._runtime.backoff import Backoff as Backoff
from ._runtime.broker import SqlBroker as SqlBroker
from ._runtime.clocks import DatabaseClock as DatabaseClock
from ._runtime.clocks import SystemClock as SystemClock
from ._runtime.codecs import Codec as Codec
from ._runtime.codecs import JsonCodec as JsonCodec
from ._runtime.codecs import RawCodec as RawCodec
from ._runtime.events import ClaimEvent as ClaimEvent
from ._runtime.events import Events as Events
from ._runtime.events import EventSource as EventSource
from ._runtime.events import HandleEnd as HandleEnd
from ._runtime.events import HandleEvent as HandleEvent
from ._runtime.events import LeaseEvent as LeaseEvent
from ._runtime.events import PublishEvent as PublishEvent
from ._runtime.events import ReleaseEvent as ReleaseEvent
from ._runtime.events import SettleEvent as SettleEvent
from ._runtime.factories import Subscribable as Subscribable
from ._runtime.factories import SubscriberFactory as SubscriberFactory
from ._runtime.factories import subscriber as subscriber
from ._runtime.outcome import FailurePolicy as FailurePolicy
from ._runtime.outcome import HandlerOutcome as HandlerOutcome
from ._runtime.outcome import OnFailure as OnFailure
from ._runtime.publisher import Publisher as Publisher
from ._runtime.queue import Batched as Batched
from ._runtime.queue import BatchesNeverTransactional as BatchesNeverTransactional
from ._runtime.queue import InboxQueue as InboxQueue
from ._runtime.queue import LeaseNeedsLockedUntil as LeaseNeedsLockedUntil
from ._runtime.queue import Single as Single
from ._runtime.refusals import BatchTakesAList as BatchTakesAList
from ._runtime.refusals import BatchTakesNoRowKeys as BatchTakesNoRowKeys
from ._runtime.refusals import ContextKeyNotOptional as ContextKeyNotOptional
from ._runtime.refusals import DecorateWithSubscriber as DecorateWithSubscriber
from ._runtime.refusals import HandlerTakesAnotherRow as HandlerTakesAnotherRow
from ._runtime.refusals import ListNeedsBatch as ListNeedsBatch
from ._runtime.refusals import NotAContextKey as NotAContextKey
from ._runtime.refusals import NotAHandler as NotAHandler
from ._runtime.refusals import OutcomeListNeedsBatch as OutcomeListNeedsBatch
from ._runtime.refusals import PayloadHandlerTakesTheMessage as PayloadHandlerTakesTheMessage
from ._runtime.refusals import TxNeedsTransactional as TxNeedsTransactional
from ._runtime.statistics import SubscriptionStatistics as SubscriptionStatistics
from ._runtime.subscribers import Needs as Needs
from ._runtime.subscribers import Subscriber as Subscriber

__all__ = [
    # declaring a table
    "Inbox",
    "InboxSpec",
    "GENERATED",
    "KeyColumn",
    "KeyLiteral",
    "Id",
    "Group",
    "OriginGroup",
    "Priority",
    "RetryAfter",
    "Attempt",
    "LockedUntil",
    "ProcessedAt",
    "Payload",
    "Generated",
    "Column",
    "SqlType",
    # claim forms, openings, modes
    "RowLock",
    "Lease",
    "Advisory",
    "Default",
    "ReadUncommitted",
    "ReadCommitted",
    "RepeatableRead",
    "Serializable",
    "Deferred",
    "Immediate",
    "Exclusive",
    "Plain",
    "Transactional",
    "Single",
    "Batched",
    # dialects as types
    "Serves",
    "Postgres",
    "MySql",
    "Sqlite",
    "AnyDatabase",
    # running
    "App",
    "AppInfo",
    "Mount",
    "ShutdownReport",
    "SqlBroker",
    "DatabaseClock",
    "SystemClock",
    "InboxQueue",
    "Subscriber",
    "subscriber",
    "Publisher",
    "keys",
    "HandlerOutcome",
    "Backoff",
    "FailurePolicy",
    "OnFailure",
    "Codec",
    "JsonCodec",
    "RawCodec",
    # observing
    "SubscriptionStatistics",
    "Events",
    "EventSource",
    "PublishEvent",
    "ClaimEvent",
    "HandleEvent",
    "HandleEnd",
    "SettleEvent",
    "LeaseEvent",
    "ReleaseEvent",
    # errors
    "TransactionHeld",
    "TrinboxError",
    "DeclarationError",
    "UnsupportedForm",
    "UnsupportedOpening",
    "FifoAtSerializable",
    "IdentifierTooLong",
    "StartupError",
    "SchemaError",
    "ServerTooOld",
    "AlreadySubscribed",
    "DatabaseError",
    "ConnectError",
    "PoolExhausted",
    "IntegrityError",
    "LockNotAvailable",
    "ConnectionLost",
    "SettlementError",
    "LeaseLost",
    "BatchRolledBack",
    "HandlerFailed",
    "Closed",
    "MissingDriver",
    # what type checkers' messages name: the bases of the markers, the decorator's types, and the
    # named refusals a broken rule turns a queue argument or a handler into; what a
    # subscriber needs of a dialect, and the rows a dialect mounts
    "Needs",
    "RowOf",
    "Form",
    "Opening",
    "Isolation",
    "SqliteMode",
    "Mode",
    "Subscribable",
    "SubscriberFactory",
    "LeaseNeedsLockedUntil",
    "BatchesNeverTransactional",
    "TxNeedsTransactional",
    "BatchTakesNoRowKeys",
    "BatchTakesAList",
    "ListNeedsBatch",
    "OutcomeListNeedsBatch",
    "HandlerTakesAnotherRow",
    "PayloadHandlerTakesTheMessage",
    "ContextKeyNotOptional",
    "NotAContextKey",
    "NotAHandler",
    "DecorateWithSubscriber",
]


def _present_as_public() -> None:
    """Name every exported class and function ``trinbox.X`` (in reprs, tracebacks and pickles),
    not ``trinbox._runtime.queue.X``: the private module layout is nobody's business."""
    namespace = globals()
    for name in __all__:
        obj = namespace[name]
        if not isinstance(obj, _ModuleType):  # ``keys`` keeps its own name
            obj.__module__ = __name__


_present_as_public()
del _present_as_public
