"""A TCP relay of the tests' own in front of a real server: it forwards each connection's bytes
both ways until the test freezes it. Frozen, the server seems to have stopped answering: the
relay still accepts connections and reads what clients send, but nothing reaches the server
and nothing comes back, and every socket stays open. A client that closes its socket is seen
at once (frozen or not), and the relay closes its server side, so the server ends the session
as it would for the client itself."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import trio

__all__ = ["Relay", "relay"]


class Relay:
    def __init__(self, upstream: str, port: int) -> None:
        parts = urlsplit(upstream)
        assert parts.hostname is not None and parts.port is not None
        self._host = parts.hostname
        self._port = parts.port
        credentials = parts.netloc.rpartition("@")[0]
        netloc = f"{credentials}@127.0.0.1:{port}" if credentials else f"127.0.0.1:{port}"
        #: The server's URL with the relay's address in place of the server's.
        self.url = urlunsplit(parts._replace(netloc=netloc))
        self.accepted = 0  # client connections the relay took
        self.open = 0  # ... that the client has not closed yet
        self.held = 0  # client sends held back while frozen
        self._flowing = trio.Event()
        self._flowing.set()
        self._changed = trio.Event()

    @property
    def frozen(self) -> bool:
        return not self._flowing.is_set()

    def freeze(self) -> None:
        """From now on nothing reaches the server and nothing comes back."""
        if not self.frozen:
            self._flowing = trio.Event()

    def thaw(self) -> None:
        """Everything held back flows again."""
        self._flowing.set()

    async def wait_held(self) -> None:
        """Until a client sent something while frozen: it now waits for a server that does
        not answer."""
        while not self.held:
            await self._wait_changed()

    async def wait_closed(self) -> None:
        """Until every client has closed its connection."""
        while self.open:
            await self._wait_changed()

    async def _wait_changed(self) -> None:
        await self._changed.wait()

    def _change(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def serve(self, client: trio.SocketStream) -> None:
        self.accepted += 1
        self.open += 1
        self._change()
        try:
            async with client:
                server = await trio.open_tcp_stream(self._host, self._port)
                async with server, trio.open_nursery() as pipes:
                    pipes.start_soon(self._pipe, client, server, pipes.cancel_scope, True)
                    pipes.start_soon(self._pipe, server, client, pipes.cancel_scope, False)
        finally:
            self.open -= 1
            self._change()

    async def _pipe(
        self,
        source: trio.SocketStream,
        sink: trio.SocketStream,
        both: trio.CancelScope,
        from_client: bool,
    ) -> None:
        """Forward ``source`` to ``sink``; the end of either ends the connection's both
        directions. Reads go on while frozen (so an end is seen at once); sends wait."""
        send, receive = trio.open_memory_channel[bytes](math.inf)

        async def forward() -> None:
            try:
                async for data in receive:
                    await self._flowing.wait()
                    await sink.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                both.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(forward)
            try:
                while data := await source.receive_some():
                    if from_client and self.frozen:
                        self.held += 1
                        self._change()
                    send.send_nowait(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            both.cancel()


@asynccontextmanager
async def relay(upstream: str) -> AsyncIterator[Relay]:
    """A relay on a free port of 127.0.0.1 in front of the server of the URL ``upstream``,
    for the block."""
    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    made = Relay(upstream, listener.socket.getsockname()[1])

    async def accept_all() -> None:
        async with trio.open_nursery() as connections:
            while True:
                connections.start_soon(made.serve, await listener.accept())

    async with listener, trio.open_nursery() as nursery:
        nursery.start_soon(accept_all)
        try:
            yield made
        finally:
            nursery.cancel_scope.cancel()
