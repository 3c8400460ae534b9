from typing import Any

from . import connections as connections, constants as constants, converters as converters, cursors as cursors
from .connections import Connection as Connection
from .constants import FIELD_TYPE as FIELD_TYPE
from .err import (
    DatabaseError as DatabaseError,
    DataError as DataError,
    Error as Error,
    IntegrityError as IntegrityError,
    InterfaceError as InterfaceError,
    InternalError as InternalError,
    MySQLError as MySQLError,
    NotSupportedError as NotSupportedError,
    OperationalError as OperationalError,
    ProgrammingError as ProgrammingError,
    Warning as Warning,
)
from .times import (
    Date as Date,
    DateFromTicks as DateFromTicks,
    Time as Time,
    TimeFromTicks as TimeFromTicks,
    Timestamp as Timestamp,
    TimestampFromTicks as TimestampFromTicks,
)

VERSION: tuple[int, int, int, str]
VERSION_STRING: str
version_info: tuple[int, int, int, str, int]
__version__: str
threadsafety: int
apilevel: str
paramstyle: str

def get_client_info() -> str: ...
def install_as_MySQLdb() -> None: ...

class DBAPISet(frozenset[int]):
    def __ne__(self, other: object) -> bool: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

STRING: DBAPISet
BINARY: DBAPISet
NUMBER: DBAPISet
DATE: DBAPISet
TIME: DBAPISet
TIMESTAMP: DBAPISet
DATETIME: DBAPISet
ROWID: DBAPISet

def Binary(x: Any) -> bytes: ...
def thread_safe() -> bool: ...

Connect = Connection
connect = Connection
NULL: str
