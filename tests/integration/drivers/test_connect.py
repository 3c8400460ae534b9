"""Opening a connection is bounded and fails clearly (issue 9, item 4): a server that accepts
TCP and never answers, a PostgreSQL connect timeout's reason, a port that is not a number.
Each error names the URL without its password. A connect whose caller is cancelled is not cut
halfway: it goes on within the bound around it, and what it opened is closed (issue 17,
item 4)."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from trinbox._bounds import CONNECT, within
from trinbox._drivers import mysql, postgres
from trinbox.errors import ConnectError

LIMIT = 0.5  # the connect bound under test, in seconds
SLACK = 2.0  # how late past it the error may come on a loaded machine

DRIVERS = {"postgres": postgres, "mysql": mysql}
SCHEMES = {"postgres": "postgresql", "mysql": "mysql"}


class SilentServer:
    """A listening socket on 127.0.0.1 that accepts every connection, reads what the client
    sends, and never writes a byte: no greeting (MySQL), no reply to the startup (PostgreSQL)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.accepted = 0
        self.closed_by_client = trio.Event()  # a client closed its end


@asynccontextmanager
async def silent_server() -> AsyncIterator[SilentServer]:
    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    server = SilentServer(listener.socket.getsockname()[1])

    async def hold(stream: trio.SocketStream) -> None:
        server.accepted += 1
        async with stream:
            try:
                while await stream.receive_some():
                    pass
            except trio.BrokenResourceError:
                pass
            server.closed_by_client.set()

    async def accept_all() -> None:
        async with trio.open_nursery() as streams:
            while True:
                streams.start_soon(hold, await listener.accept())

    async with listener, trio.open_nursery() as nursery:
        nursery.start_soon(accept_all)
        yield server
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
async def test_a_server_that_never_answers_fails_within_the_connect_bound(
    kind: str, aio_loop: None
) -> None:
    async with silent_server() as server:
        url = f"{SCHEMES[kind]}://someone:s3cret@127.0.0.1:{server.port}/queue"
        started = time.monotonic()
        with trio.fail_after(LIMIT + SLACK), pytest.raises(ConnectError) as caught:
            await DRIVERS[kind].open_pool(url, max_size=1, connect_timeout=LIMIT)
        elapsed = time.monotonic() - started
        assert LIMIT * 0.8 <= elapsed < LIMIT + SLACK
        message = str(caught.value)
        assert "s3cret" not in message
        assert f"someone:***@127.0.0.1:{server.port}/queue" in message
        assert f"timed out after {LIMIT:g} s connecting to 127.0.0.1:{server.port}" in message
        assert caught.value.statement == "connect"
        assert server.accepted == 1
        # The connect that ran out closed its socket: the server sees the end of the stream.
        with trio.fail_after(SLACK):
            await server.closed_by_client.wait()


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_the_default_connect_bound_is_the_named_one(kind: str) -> None:
    module = DRIVERS[kind]
    for fn in (module.open_pool, module.PgPool if kind == "postgres" else module.MySqlPool):
        default = inspect.signature(fn).parameters["connect_timeout"].default
        assert default == CONNECT


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
@pytest.mark.parametrize("port", ["54x32", "99999", "-1"])
async def test_a_port_that_is_not_a_number_is_a_connect_error_at_open(
    kind: str, port: str, aio_loop: None
) -> None:
    url = f"{SCHEMES[kind]}://someone:s3cret@127.0.0.1:{port}/queue"
    with pytest.raises(ConnectError) as caught:
        await DRIVERS[kind].open_pool(url, max_size=1)
    message = str(caught.value)
    assert "s3cret" not in message
    assert f"found {port!r} in {SCHEMES[kind]}://someone:***@127.0.0.1:{port}/queue" in message
    assert "write host:port with a number" in message


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
async def test_a_connect_whose_caller_is_cancelled_goes_on_within_the_bound_then_closes(
    kind: str, aio_loop: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="trinbox.drivers.asyncio")
    async with silent_server() as server:
        url = f"{SCHEMES[kind]}://someone:s3cret@127.0.0.1:{server.port}/queue"
        started = time.monotonic()
        # The runtime's bound around the connect (a claim, a shutdown), and the caller's cancel.
        with within(LIMIT), trio.move_on_after(LIMIT / 5) as caller:
            await DRIVERS[kind].open_pool(url, max_size=1)
        elapsed = time.monotonic() - started
        assert caller.cancel_called
        # Not cut at the cancel: the connect had until the bound's deadline.
        assert LIMIT * 0.8 <= elapsed < LIMIT + SLACK, elapsed
        assert server.accepted == 1
        with trio.fail_after(SLACK):  # then it was cut, and closed its socket
            await server.closed_by_client.wait()
    # Nothing was left for asyncio to report ("... was never retrieved").
    assert not [r.getMessage() for r in caplog.records if r.name == "trinbox.drivers.asyncio"]
