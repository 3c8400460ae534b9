"""trinbox: task queues in your own SQL tables, for Trio.

Layers (a module imports only from layers below it):

    trinbox, trinbox.keys, trinbox.testing      public facades (re-exports only)
    _operations                                 queue depths, dead letters, redrive
    _engine                                     app, subscriptions, claim loop, deliveries
    _broker                                     broker, publishing, clocks, wakes, LISTEN
    _api                                        queues, subscriber, outcomes, codecs, events
    _forms                                      row lock, lease and advisory claim forms
    _holders                                    what holds a claimed row, per kind of hold
    _dialects | _drivers                        SQL text (pure) | database I/O (only here)
    _declare, _errors                           row declarations, specs, markers; errors
"""

from __future__ import annotations

from types import ModuleType as _ModuleType

from . import keys as keys
from ._api.backoff import Backoff as Backoff
from ._api.codecs import Codec as Codec
from ._api.codecs import JsonCodec as JsonCodec
from ._api.codecs import RawCodec as RawCodec
from ._api.events import ClaimEvent as ClaimEvent
from ._api.events import Events as Events
from ._api.events import EventSource as EventSource
from ._api.events import HandleEnd as HandleEnd
from ._api.events import HandleEvent as HandleEvent
from ._api.events import LeaseEvent as LeaseEvent
from ._api.events import PublishEvent as PublishEvent
from ._api.events import ReleaseEvent as ReleaseEvent
from ._api.events import SettleEvent as SettleEvent
from ._api.outcome import FailurePolicy as FailurePolicy
from ._api.outcome import HandlerOutcome as HandlerOutcome
from ._api.outcome import OnFailure as OnFailure
from ._api.queue import Batched as Batched
from ._api.queue import BatchesNeverTransactional as BatchesNeverTransactional
from ._api.queue import InboxQueue as InboxQueue
from ._api.queue import LeaseNeedsLockedUntil as LeaseNeedsLockedUntil
from ._api.queue import Needs as Needs
from ._api.queue import Single as Single
from ._api.queue import Subscribable as Subscribable
from ._api.queue import Subscriber as Subscriber
from ._api.queue import SubscriberFactory as SubscriberFactory
from ._api.queue import subscriber as subscriber
from ._api.refusals import BatchTakesAList as BatchTakesAList
from ._api.refusals import BatchTakesNoRowKeys as BatchTakesNoRowKeys
from ._api.refusals import ContextKeyNotOptional as ContextKeyNotOptional
from ._api.refusals import DecorateWithSubscriber as DecorateWithSubscriber
from ._api.refusals import HandlerTakesAnotherRow as HandlerTakesAnotherRow
from ._api.refusals import ListNeedsBatch as ListNeedsBatch
from ._api.refusals import NotAContextKey as NotAContextKey
from ._api.refusals import NotAHandler as NotAHandler
from ._api.refusals import OutcomeListNeedsBatch as OutcomeListNeedsBatch
from ._api.refusals import PayloadHandlerTakesTheMessage as PayloadHandlerTakesTheMessage
from ._api.refusals import TxNeedsTransactional as TxNeedsTransactional
from ._broker.broker import SqlBroker as SqlBroker
from ._broker.clocks import DatabaseClock as DatabaseClock
from ._broker.clocks import SystemClock as SystemClock
from ._broker.publisher import Publisher as Publisher
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
from ._engine.app import App as App
from ._engine.app import AppInfo as AppInfo
from ._engine.app import Mount as Mount
from ._engine.app import ShutdownReport as ShutdownReport
from ._engine.statistics import SubscriptionStatistics as SubscriptionStatistics
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
    not ``trinbox._api.queue.X``: the private module layout is nobody's business."""
    namespace = globals()
    for name in __all__:
        obj = namespace[name]
        if not isinstance(obj, _ModuleType):  # ``keys`` keeps its own name
            obj.__module__ = __name__


_present_as_public()
del _present_as_public
