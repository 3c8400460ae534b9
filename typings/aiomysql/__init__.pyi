from pymysql.converters import (
    escape_dict as escape_dict,
    escape_sequence as escape_sequence,
    escape_string as escape_string,
)
from pymysql.err import (
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

from .connection import Connection as Connection, connect as connect
from .cursors import (
    Cursor as Cursor,
    DictCursor as DictCursor,
    SSCursor as SSCursor,
    SSDictCursor as SSDictCursor,
)
from .pool import Pool as Pool, create_pool as create_pool

version: str
__version__: str

__all__ = [
    "Error",
    "DataError",
    "DatabaseError",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "MySQLError",
    "NotSupportedError",
    "OperationalError",
    "ProgrammingError",
    "Warning",
    "escape_dict",
    "escape_sequence",
    "escape_string",
    "Connection",
    "Pool",
    "connect",
    "create_pool",
    "Cursor",
    "SSCursor",
    "DictCursor",
    "SSDictCursor",
]
