"""A real sink for the outbox tests: an HTTP server the test starts (``Receiver``, Trio on a
loopback port) and the relay's sink that POSTs each record to it (``post_to``, the standard
library's HTTP client on a worker thread), in the test's process or in a relay process.

The receiver keeps every request it read (``received``), answers 200, or 503 to the next
``refuse`` requests, and holds unanswered the requests ``hold`` picks until ``release()``:
a relay killed while it waits there died mid-send, its record received and never marked."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from trinbox.outbox import Record

__all__ = ["Receiver", "post_to", "receiver"]

Body = dict[str, Any]


@dataclass
class Receiver:
    url: str = ""
    received: list[Body] = field(default_factory=list[Body])
    refuse: int = 0  # answer 503 to this many requests more
    refused: int = 0
    hold: Callable[[Body], bool] | None = None
    held: list[Body] = field(default_factory=list[Body])
    _released: trio.Event = field(default_factory=trio.Event)
    _changed: trio.Event = field(default_factory=trio.Event)

    def release(self) -> None:
        """Let every held request (and those held from now on) go unanswered no longer."""
        self.hold = None
        self._released.set()

    async def wait_until(self, done: Callable[[Receiver], bool]) -> None:
        while not done(self):
            await self._changed.wait()

    async def wait_received(self, count: int) -> None:
        await self.wait_until(lambda r: len(r.received) >= count)

    def ids(self) -> list[int]:
        return [int(body["id"]) for body in self.received]

    def _changes(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def serve(self, stream: trio.SocketStream) -> None:
        try:
            await self._answer(stream)
        except trio.BrokenResourceError:
            pass  # the relay died before it read the answer (killed mid-send)

    async def _answer(self, stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(body) < length:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                body += chunk
            found: Body = json.loads(body)
            headers = {
                k.strip().decode().lower(): v.strip().decode()
                for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:])
            }
            found["http_headers"] = headers
            status = b"200 OK"
            if self.refuse:
                self.refuse -= 1
                self.refused += 1
                status = b"503 Service Unavailable"
            else:
                self.received.append(found)
                if self.hold is not None and self.hold(found):
                    self.held.append(found)
                    self._changes()
                    await self._released.wait()
            self._changes()
            await stream.send_all(
                b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )


@asynccontextmanager
async def receiver() -> AsyncIterator[Receiver]:
    """A receiver serving on a loopback port for the block."""
    found = Receiver()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, found.serve, 0)
        port = listeners[0].socket.getsockname()[1]
        found.url = f"http://127.0.0.1:{port}/records"
        try:
            yield found
        finally:
            found.release()
            nursery.cancel_scope.cancel()


def _post(url: str, body: bytes, headers: dict[str, str]) -> None:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json", **headers}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            answer.read()
    except urllib.error.HTTPError as refused:  # a 503: its response is closed here
        refused.close()
        raise ConnectionError(f"the receiver answered {refused.code}") from None


def post_to(url: str) -> Callable[[Record], Awaitable[None]]:
    """The sink: each record POSTed as JSON, its headers as the request's; a refusal raises."""

    async def post_record(record: Record) -> None:
        body = json.dumps(
            {
                "id": record.id,
                "name": record.name,
                "payload": record.payload.decode(),
                "headers": dict(record.headers),
                "attempt": record.attempt,
            }
        ).encode()
        await trio.to_thread.run_sync(_post, url, body, dict(record.headers))

    return post_record
