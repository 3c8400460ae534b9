"""Server URLs as messages show them (without the password) and their port, checked.

No driver module is imported here, so the broker checks a URL when it is made, before any
loop or server exists.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._errors import ConnectError

__all__ = ["Kind", "check_server_url", "port_of", "redacted"]

Kind = Literal["postgres", "mysql", "sqlite"]
"""A database family, as the backends (trinbox/_broker/backends.py) and driver modules name it."""

_SECRET_KEYS = ("password", "passwd", "pass", "sslpassword")


def redacted(url: str) -> str:
    """``url`` with its password (in the user part or a ``password=`` query) shown as ``***``
    and the rest as written; never raises, whatever the URL holds."""
    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced [ in the host: mask what could be a password
        return re.sub(r"//([^/@:]*):[^/@]*@", r"//\1:***@", url).partition("?")[0]
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if at:
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}{':***' if colon else ''}@{hostport}"
    else:
        netloc = hostport
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, "***" if k.lower() in _SECRET_KEYS else v) for k, v in pairs], safe="*"
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _written_port(netloc: str) -> str:
    """The port as written after the host (``host:port``, ``[v6]:port``); "" if none."""
    hostport = netloc.rpartition("@")[2]
    if hostport.startswith("["):
        return hostport.partition("]")[2].removeprefix(":")
    return hostport.partition(":")[2]


def port_of(url: str, *, server: str, default: int) -> int:
    """The URL's port, ``default`` when it gives none, or ``ConnectError`` naming the URL
    (without its password) when the port is not a number up to 65535."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        msg = (
            f"a {server} URL reads scheme://user:password@host:port/database, found "
            f"{redacted(url)} ({exc}); check its host part"
        )
        raise ConnectError(msg, statement="connect") from None
    try:
        port = parts.port
    except ValueError:
        written = _written_port(parts.netloc)
        msg = (
            f"a {server} URL's port is a whole number from 0 to 65535, found {written!r} in "
            f"{redacted(url)}; write host:port with a number (or leave the port out for "
            f"{default})"
        )
        raise ConnectError(msg, statement="connect") from None
    return default if port is None else port


def check_server_url(url: str, *, server: str, default: int) -> None:
    """Refuse a URL no connection could be opened with, before any connect."""
    port_of(url, server=server, default=default)
