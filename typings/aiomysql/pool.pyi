import asyncio
import ssl as _ssl
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self

from .connection import Connection
from .cursors import Cursor
from .utils import _PoolAcquireContextManager, _PoolContextManager

# The keyword arguments after `loop` are passed to connect() for each new connection.
def create_pool(
    minsize: int = 1,
    maxsize: int = 10,
    echo: bool = False,
    pool_recycle: float = -1,
    loop: asyncio.AbstractEventLoop | None = None,
    *,
    host: str = "localhost",
    user: str | None = None,
    password: str = "",
    db: str | None = None,
    port: int = 3306,
    unix_socket: str | None = None,
    charset: str = "",
    sql_mode: str | None = None,
    read_default_file: str | None = None,
    conv: Mapping[Any, Callable[..., Any]] = ...,
    use_unicode: bool | None = None,
    client_flag: int = 0,
    cursorclass: type[Cursor] = ...,
    init_command: str | None = None,
    connect_timeout: float | None = None,
    read_default_group: str | None = None,
    autocommit: bool | None = False,
    local_infile: bool = False,
    ssl: _ssl.SSLContext | None = None,
    auth_plugin: str = "",
    program_name: str = "",
    server_public_key: bytes | None = None,
) -> _PoolContextManager: ...

# At runtime Pool derives from asyncio.AbstractServer, but implements none of its server
# methods (get_loop, is_serving, start_serving, serve_forever): they are left out here.
class Pool:
    def __init__(
        self,
        minsize: int,
        maxsize: int,
        echo: bool,
        pool_recycle: float,
        loop: asyncio.AbstractEventLoop,
        **kwargs: Any,
    ) -> None: ...
    @property
    def echo(self) -> bool: ...
    @property
    def minsize(self) -> int: ...
    # None when the pool was created with maxsize=0 (unbounded)
    @property
    def maxsize(self) -> int | None: ...
    @property
    def size(self) -> int: ...
    @property
    def freesize(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    async def clear(self) -> None: ...
    def close(self) -> None: ...
    def terminate(self) -> None: ...
    async def wait_closed(self) -> None: ...
    def acquire(self) -> _PoolAcquireContextManager: ...
    # Not a coroutine: the connection is back in the pool on return. The future only wakes up
    # waiting acquirers; there is no need to await it.
    def release(self, conn: Connection) -> asyncio.Future[None]: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None: ...
