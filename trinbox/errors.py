"""Every exception trinbox raises.

    TrinboxError
    ├── DeclarationError        a row class or a mount breaks a rule (import or startup time)
    │   ├── UnsupportedForm     the dialect cannot serve the table's claim form
    │   ├── UnsupportedIsolation  the dialect opens no transaction at the table's isolation/mode
    │   │   └── FifoAtSerializable  a MySQL row lock FIFO table at SERIALIZABLE
    │   ├── UnsupportedFetch    a custom claim on a dialect that reads no rows by a list of ids
    │   ├── IdentifierTooLong   a name is over the dialect's limit
    │   ├── NoRoute             no route leads a published name to a table
    │   └── HeaderRefused       a publish's header the row cannot hold, refused (never dropped)
    ├── StartupError            a subscription could not open
    │   ├── SchemaError         a statement failed to prepare (missing table or column)
    │   ├── ServerTooOld        MySQL/MariaDB below the supported floor
    │   └── AlreadySubscribed   a second subscription to one queue in one process
    ├── DatabaseError           a statement failed while running
    │   ├── ConnectError        no connection could be opened
    │   ├── PoolExhausted       no pooled connection came free in time (names what holds them)
    │   ├── IntegrityError      a constraint refused a write
    │   ├── LockNotAvailable    a lock or serialization conflict (safe to retry)
    │   └── ConnectionLost      the connection broke mid-statement
    ├── SettlementError         a delivery could not be settled as its outcome says
    │   ├── LeaseLost           the lease ran out and another claim took the row
    │   └── BatchRolledBack     an earlier settlement of the row lock batch failed
    ├── ClaimFailed             a queue's custom claim or fetch raised, or returned what no
    │                           claim can take
    ├── Duplicate               a publish's dedup key is held by an unfinished row
    │                           (on_duplicate="raise")
    ├── TransactionHeld         a transaction or connection used after its block ended
    ├── CancelRefused           a cancel this process cannot decide (broker.cancel)
    ├── HandlerFailed           a handler raised under the fail-fast policy (raised by serve)
    ├── Closed                  the broker is shut down
    ├── MissingDriver           a broker's driver is not installed (also an ImportError)
    └── MissingExtra            a library an optional feature reads is not installed (also an
                                ImportError): cronsim, for Cron schedules

Messages state the rule that was broken, what was found, and the fix.
"""

from __future__ import annotations

__all__ = [
    "AlreadySubscribed",
    "BatchRolledBack",
    "CancelRefused",
    "ClaimFailed",
    "Closed",
    "ConnectError",
    "ConnectionLost",
    "DatabaseError",
    "DeclarationError",
    "Duplicate",
    "FifoAtSerializable",
    "HandlerFailed",
    "HeaderRefused",
    "IdentifierTooLong",
    "IntegrityError",
    "LeaseLost",
    "LockNotAvailable",
    "MissingDriver",
    "MissingExtra",
    "NoRoute",
    "PoolExhausted",
    "SchemaError",
    "ServerTooOld",
    "SettlementError",
    "StartupError",
    "TransactionHeld",
    "TrinboxError",
    "UnsupportedFetch",
    "UnsupportedForm",
    "UnsupportedIsolation",
]


class TrinboxError(Exception):
    """Base of every error trinbox raises."""


class DeclarationError(TrinboxError, TypeError):
    """A row class, spec or mount breaks a declaration rule."""


class UnsupportedForm(DeclarationError):
    """The broker's dialect cannot serve the table's claim form."""


class UnsupportedIsolation(DeclarationError):
    """The broker's dialect opens no transaction at the table's isolation level or mode."""


class UnsupportedFetch(DeclarationError):
    """The broker's dialect reads no rows by a list of ids (MySQL, SQLite): a custom claim on
    it brings its own fetch."""


class FifoAtSerializable(UnsupportedIsolation):
    """MySQL and MariaDB serve no row lock FIFO table at SERIALIZABLE: the group guard's count
    would wait on the rows other claims hold."""


class IdentifierTooLong(DeclarationError):
    """A table, schema or column name is longer than the dialect allows."""


class NoRoute(DeclarationError):
    """No route of the broker leads a message name to a table (``name``); the message names
    the route to add, ``broker.route(Row, "name")``."""

    def __init__(self, message: str, *, name: str = "") -> None:
        super().__init__(message)
        self.name = name


class HeaderRefused(DeclarationError):
    """A publish gave a header its row cannot hold as given: a table without a ``Headers``
    field holds none, and a ``Headers`` field holds names and values of text (``str``), none
    of them under trinbox's reserved ``trinbox-`` prefix. Nothing is written; ``header`` is
    the name of the header refused (``None`` when the headers as a whole are)."""

    def __init__(self, message: str, *, header: object = None) -> None:
        super().__init__(message)
        self.header = header


class StartupError(TrinboxError):
    """A subscription could not open."""


class SchemaError(StartupError):
    """A statement of a subscription failed to prepare against the database."""

    def __init__(self, message: str, *, table: str, statement: str) -> None:
        super().__init__(message)
        self.table = table
        self.statement = statement


class ServerTooOld(StartupError):
    """The database server is older than trinbox supports."""

    def __init__(self, message: str, *, server: str, required: str) -> None:
        super().__init__(message)
        self.server = server
        self.required = required


class AlreadySubscribed(StartupError):
    """One queue has one subscription per process."""


class DatabaseError(TrinboxError):
    """A statement failed while running.

    ``statement`` names what was running (an event such as ``"ack"`` or the SQL text),
    ``code`` carries the driver's SQLSTATE / errno / result code when there is one, and when
    a script of several steps failed, ``step`` is the index of the failing step and
    ``results`` holds the results of the steps before it.
    """

    def __init__(self, message: str, *, statement: str = "", code: str | None = None) -> None:
        super().__init__(message)
        self.statement = statement
        self.code = code
        self.step: int | None = None
        self.results: list[object] = []  # a failed script: the results of the steps before


class ConnectError(DatabaseError):
    """No connection to the database could be opened."""


class PoolExhausted(DatabaseError):
    """No connection of the pool came free within ``POOL_WAIT``: every one was held (the
    message says by what)."""


class IntegrityError(DatabaseError):
    """A constraint (unique, foreign key, not null, check) refused a write."""


class LockNotAvailable(DatabaseError):
    """A lock wait, deadlock or serialization conflict; the work may be retried."""


class ConnectionLost(DatabaseError):
    """The connection broke while a statement ran."""


class SettlementError(TrinboxError):
    """A delivery could not be settled as its outcome says; its row returns to the queue."""


class LeaseLost(SettlementError):
    """The lease ran out and another claim took the row; the settlement had no effect."""

    def __init__(self, message: str, *, id: object) -> None:
        super().__init__(message)
        self.id = id


class BatchRolledBack(SettlementError):
    """An earlier settlement of this row lock batch failed, so the whole batch rolls back."""


class ClaimFailed(TrinboxError):
    """A queue's custom claim or fetch (``InboxQueue.custom_claim``) raised, or returned what
    no claim can take (more ids than asked for, a row of another shape). The claim's
    transaction rolled back; the next claim runs after the usual wait."""


class Duplicate(TrinboxError):
    """A publish with ``on_duplicate="raise"`` found its dedup key held by an unfinished row
    of the table, and wrote nothing. ``id`` is that row's id, ``key`` the key as the column
    holds it, ``table`` the table."""

    def __init__(
        self,
        message: str,
        *,
        id: object,
        key: str,
        table: str,
    ) -> None:
        super().__init__(message)
        self.id = id
        self.key = key
        self.table = table


class TransactionHeld(TrinboxError):
    """A handle was used after what it lends ended: a delivery's ``keys.Tx`` after its
    delivery settled (a handler kept it), ``broker.transaction()``'s ``Tx`` after its block,
    or a connection of ``keys.Pool.connection()`` after its block. Nothing ran."""


class CancelRefused(TrinboxError):
    """``broker.cancel(Row, id)`` could not tell whether the row is in work, and changed
    nothing: on SQLite, the advisory keys in work live in the memory of the process serving
    the file, and the cancel ran in another one."""


class HandlerFailed(TrinboxError):
    """A handler raised under the fail-fast policy; the app shut down. The cause is chained."""


class Closed(TrinboxError):
    """The broker is shut down."""


class MissingDriver(TrinboxError, ImportError):
    """The driver a broker talks to its database through is not installed (``name`` is its
    module); the message names the extra that installs it: ``pip install "trinbox[postgres]"``
    or ``"trinbox[mysql]"``. SQLite needs none."""


class MissingExtra(TrinboxError, ImportError):
    """A library an optional feature reads is not installed (``name`` is its module): the
    message names the extra that installs it, ``pip install "trinbox[cron]"`` for a ``Cron``
    schedule's cronsim."""
