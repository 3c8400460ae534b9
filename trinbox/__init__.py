"""trinbox: task queues in your own SQL tables, for Trio.

Layers (a module imports only from layers below it):

    trinbox, keys, events, typing, testing      public facades (re-exports only)
    _operations                                 queue depths, dead letters, redrive
    _engine                                     app, subscriptions, claim loop, deliveries
    _broker                                     broker, publishing, clocks, wakes, LISTEN
    _api                                        queues, subscriber, outcomes, codecs, events
    _forms                                      row lock, lease and advisory claim forms
    _holders                                    what holds a claimed row, per kind of hold
    _dialects | _drivers                        SQL text (pure) | database I/O (only here)
    _declare, errors                            row declarations, specs, markers; exceptions
"""

from __future__ import annotations

from . import errors as errors
from . import events as events
from . import keys as keys
from . import typing as typing
from ._api.backoff import Backoff as Backoff
from ._api.cancelled import CancelResult as CancelResult
from ._api.codecs import Codec as Codec
from ._api.codecs import JsonCodec as JsonCodec
from ._api.codecs import RawCodec as RawCodec
from ._api.message import Message as Message
from ._api.outcome import FailurePolicy as FailurePolicy
from ._api.outcome import HandlerOutcome as HandlerOutcome
from ._api.outcome import OnFailure as OnFailure
from ._api.queue import InboxQueue as InboxQueue
from ._api.queue import subscriber as subscriber
from ._api.routed import RoutedQueue as RoutedQueue
from ._broker.broker import SqlBroker as SqlBroker
from ._broker.clocks import DatabaseClock as DatabaseClock
from ._broker.clocks import SystemClock as SystemClock
from ._broker.publisher import Publisher as Publisher
from ._declare._cancels import CancelRequests as CancelRequests
from ._declare._inbox import GENERATED as GENERATED
from ._declare._inbox import Inbox as Inbox
from ._declare._limit_records import LimitRecords as LimitRecords
from ._declare._manual import InboxSpec as InboxSpec
from ._declare._markers import Advisory as Advisory
from ._declare._markers import Default as Default
from ._declare._markers import Deferred as Deferred
from ._declare._markers import Exclusive as Exclusive
from ._declare._markers import Immediate as Immediate
from ._declare._markers import Lease as Lease
from ._declare._markers import ReadCommitted as ReadCommitted
from ._declare._markers import ReadUncommitted as ReadUncommitted
from ._declare._markers import RepeatableRead as RepeatableRead
from ._declare._markers import RowLock as RowLock
from ._declare._markers import Serializable as Serializable
from ._declare._pauses import Pauses as Pauses
from ._declare._rates import Rate as Rate
from ._declare._rates import Rates as Rates
from ._declare._roles import Attempt as Attempt
from ._declare._roles import Column as Column
from ._declare._roles import DeadLetteredAt as DeadLetteredAt
from ._declare._roles import Generated as Generated
from ._declare._roles import Group as Group
from ._declare._roles import Headers as Headers
from ._declare._roles import Id as Id
from ._declare._roles import LockedUntil as LockedUntil
from ._declare._roles import OriginGroup as OriginGroup
from ._declare._roles import Payload as Payload
from ._declare._roles import Priority as Priority
from ._declare._roles import ProcessedAt as ProcessedAt
from ._declare._roles import Progress as Progress
from ._declare._roles import Result as Result
from ._declare._roles import RetryAfter as RetryAfter
from ._declare._roles import Unique as Unique
from ._declare._sqltype import SqlType as SqlType
from ._engine.app import App as App
from ._engine.app import AppInfo as AppInfo

__all__ = [
    # declaring a table: the row class, its roles, the types of its columns
    "Inbox",
    "InboxSpec",
    "GENERATED",
    "Id",
    "Group",
    "DeadLetteredAt",
    "Progress",
    "OriginGroup",
    "Priority",
    "RetryAfter",
    "Attempt",
    "LockedUntil",
    "ProcessedAt",
    "Payload",
    "Headers",
    "Unique",
    "Result",
    "Generated",
    "Column",
    "SqlType",
    # claim forms
    "RowLock",
    "Lease",
    "Advisory",
    # isolation levels (SQLite: how its transaction begins)
    "Default",
    "ReadUncommitted",
    "ReadCommitted",
    "RepeatableRead",
    "Serializable",
    "Deferred",
    "Immediate",
    "Exclusive",
    # running: the broker, queues and their handlers, the app that serves them
    "SqlBroker",
    "DatabaseClock",
    "SystemClock",
    "Pauses",
    "Publisher",
    "Message",
    "InboxQueue",
    "Rate",
    "Rates",
    "RoutedQueue",
    "subscriber",
    "HandlerOutcome",
    "CancelResult",
    "CancelRequests",
    "LimitRecords",
    "Backoff",
    "FailurePolicy",
    "OnFailure",
    "Codec",
    "JsonCodec",
    "RawCodec",
    "App",
    "AppInfo",
    # namespaces: what a handler asks for, exceptions, event hooks and statistics, annotations
    "keys",
    "errors",
    "events",
    "typing",
]
