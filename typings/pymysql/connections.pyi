import socket
import ssl as _ssl
from collections.abc import Callable, Mapping
from typing import Any, Self, TypeVar, overload

from .cursors import Cursor

_C = TypeVar("_C", bound=Cursor)

class Connection:
    host: str
    port: int
    user: str | None
    password: str | bytes
    db: str | bytes | None
    unix_socket: str | None
    charset: str
    collation: str | None
    encoding: str
    use_unicode: bool
    client_flag: int
    cursorclass: type[Cursor]
    connect_timeout: float | None
    autocommit_mode: bool | None
    server_status: int
    server_version: str
    server_thread_id: tuple[int]
    host_info: str
    protocol_version: int
    def __init__(
        self,
        *,
        user: str | None = None,
        password: str | bytes = "",
        host: str | None = None,
        database: str | bytes | None = None,
        unix_socket: str | None = None,
        port: int = 0,
        charset: str = "",
        collation: str | None = None,
        sql_mode: str | None = None,
        read_default_file: str | None = None,
        conv: Mapping[Any, Callable[..., Any]] | None = None,
        use_unicode: bool = True,
        client_flag: int = 0,
        cursorclass: type[Cursor] = ...,
        init_command: str | None = None,
        connect_timeout: float = 10,
        read_default_group: str | None = None,
        autocommit: bool | None = False,
        local_infile: bool = False,
        max_allowed_packet: int = 16777216,
        defer_connect: bool = False,
        auth_plugin_map: Mapping[str, Any] | None = None,
        read_timeout: float | None = None,
        write_timeout: float | None = None,
        bind_address: str | None = None,
        binary_prefix: bool = False,
        program_name: str | None = None,
        server_public_key: bytes | None = None,
        ssl: Mapping[str, Any] | _ssl.SSLContext | None = None,
        ssl_ca: str | None = None,
        ssl_cert: str | None = None,
        ssl_disabled: bool | None = None,
        ssl_key: str | None = None,
        ssl_key_password: str | bytes | Callable[[], str | bytes] | None = None,
        ssl_verify_cert: bool | None = None,
        ssl_verify_identity: bool | None = None,
        compress: None = None,
        named_pipe: None = None,
        passwd: str | bytes | None = None,
        db: str | bytes | None = None,
    ) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc_info: object) -> None: ...
    def close(self) -> None: ...
    @property
    def open(self) -> bool: ...
    def autocommit(self, value: bool) -> None: ...
    def get_autocommit(self) -> bool: ...
    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def show_warnings(self) -> tuple[tuple[Any, ...], ...]: ...
    def select_db(self, db: str) -> None: ...
    def escape(self, obj: object, mapping: Mapping[Any, Callable[..., str]] | None = None) -> str: ...
    def literal(self, obj: object) -> str: ...
    def escape_string(self, s: str) -> str: ...
    @overload
    def cursor(self, cursor: None = None) -> Cursor: ...
    @overload
    def cursor(self, cursor: type[_C]) -> _C: ...
    def query(self, sql: str | bytes, unbuffered: bool = False) -> int: ...
    def next_result(self, unbuffered: bool = False) -> int: ...
    def affected_rows(self) -> int: ...
    def kill(self, thread_id: int) -> None: ...
    def ping(self, reconnect: bool = True) -> None: ...
    def set_charset(self, charset: str) -> None: ...
    def set_character_set(self, charset: str, collation: str | None = None) -> None: ...
    def connect(self, sock: socket.socket | None = None) -> None: ...
    def insert_id(self) -> int: ...
    def thread_id(self) -> int: ...
    def character_set_name(self) -> str: ...
    def get_host_info(self) -> str: ...
    def get_proto_info(self) -> int: ...
    def get_server_info(self) -> str: ...
