"""What annotations need and type checkers' messages name: the dialects as types
(``SqlBroker[Postgres]``), the bases of the declaration markers, the subscriber's and mount's
types, and the refusals a broken rule turns a queue argument or a handler into (docs/design.md,
"Typing"). A service rarely imports these; its editor shows them."""

from __future__ import annotations

from ._api.handles import Held as Held
from ._api.published import Published as Published
from ._api.queue import Batched as Batched
from ._api.queue import BatchesNeverTransactional as BatchesNeverTransactional
from ._api.queue import ClaimIds as ClaimIds
from ._api.queue import FetchRows as FetchRows
from ._api.queue import LeaseNeedsLockedUntil as LeaseNeedsLockedUntil
from ._api.queue import Needs as Needs
from ._api.queue import Single as Single
from ._api.queue import Subscribable as Subscribable
from ._api.queue import Subscriber as Subscriber
from ._api.queue import SubscriberFactory as SubscriberFactory
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
from ._api.routed import ByNameNeverTransactional as ByNameNeverTransactional
from ._api.routed import RoutedBatchSubscriberFactory as RoutedBatchSubscriberFactory
from ._api.routed import RoutedSubscriber as RoutedSubscriber
from ._api.routed import RoutedSubscriberFactory as RoutedSubscriberFactory
from ._api.routes import Route as Route
from ._broker.waiting import Settled as Settled
from ._declare._capabilities import AnyDatabase as AnyDatabase
from ._declare._capabilities import MySql as MySql
from ._declare._capabilities import Postgres as Postgres
from ._declare._capabilities import RowOf as RowOf
from ._declare._capabilities import Serves as Serves
from ._declare._capabilities import Sqlite as Sqlite
from ._declare._markers import Form as Form
from ._declare._markers import Isolation as Isolation
from ._declare._markers import IsolationLevel as IsolationLevel
from ._declare._markers import Mode as Mode
from ._declare._markers import Plain as Plain
from ._declare._markers import SqliteMode as SqliteMode
from ._declare._markers import Transactional as Transactional
from ._declare._spec import KeyColumn as KeyColumn
from ._declare._spec import KeyLiteral as KeyLiteral
from ._engine.app import Mount as Mount
from ._engine.app import ShutdownReport as ShutdownReport

__all__ = [
    # the dialects as types: SqlBroker[Postgres], what a dialect serves, the rows it mounts
    "AnyDatabase",
    "MySql",
    "Postgres",
    "Sqlite",
    "Serves",
    "RowOf",
    # the bases of the declaration markers
    "Form",
    "Isolation",
    "IsolationLevel",
    "SqliteMode",
    "Mode",
    "Plain",
    "Transactional",
    # advisory keys of a manual InboxSpec
    "KeyColumn",
    "KeyLiteral",
    # a custom claim's functions and the connection they are lent
    "ClaimIds",
    "FetchRows",
    "Held",
    # the subscriber, its shapes, what it needs of a dialect, and what mounting it returns
    "Subscriber",
    "SubscriberFactory",
    "Subscribable",
    "Single",
    "Batched",
    "Needs",
    "Mount",
    "ShutdownReport",
    # what a publish returns (with a dedup key, the row that holds it)
    "Published",
    # how a row settled (broker.wait)
    "Settled",
    # routes by name, and the subscriptions by name they lead to
    "Route",
    "RoutedSubscriber",
    "RoutedSubscriberFactory",
    "RoutedBatchSubscriberFactory",
    # the refusals a broken rule turns a queue argument or a handler into
    "BatchTakesAList",
    "BatchTakesNoRowKeys",
    "BatchesNeverTransactional",
    "ByNameNeverTransactional",
    "ContextKeyNotOptional",
    "DecorateWithSubscriber",
    "HandlerTakesAnotherRow",
    "LeaseNeedsLockedUntil",
    "ListNeedsBatch",
    "NotAContextKey",
    "NotAHandler",
    "OutcomeListNeedsBatch",
    "PayloadHandlerTakesTheMessage",
    "TxNeedsTransactional",
]
