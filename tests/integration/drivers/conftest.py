"""Fixtures for the asyncio driver tests: a trio-asyncio loop, a fresh database per test
(``backend`` runs a test once per driver), the pool under test and an observer pool."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from trinbox._drivers.aio import asyncio_loop

from .harness import Backend, Kind, TestPool, fresh_database


@pytest.fixture
async def aio_loop() -> AsyncIterator[None]:
    """The trio-asyncio loop the drivers run on, as App.serve opens it; everything asyncio
    closes inside it."""
    async with asyncio_loop(True):
        yield


@pytest.fixture(params=["postgres", "mysql"])
async def backend(request: pytest.FixtureRequest, aio_loop: None) -> AsyncIterator[Backend]:
    kind: Kind = request.param
    async with fresh_database(kind) as made:
        yield made


@pytest.fixture
async def pg_backend(aio_loop: None) -> AsyncIterator[Backend]:
    async with fresh_database("postgres") as made:
        yield made


@pytest.fixture
async def mysql_backend(aio_loop: None) -> AsyncIterator[Backend]:
    async with fresh_database("mysql") as made:
        yield made


@pytest.fixture
async def pool(backend: Backend) -> AsyncIterator[TestPool]:
    """The pool under test: three connections at most."""
    opened = await backend.open_pool(3)
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
async def observer(backend: Backend) -> AsyncIterator[TestPool]:
    """A second pool on the same database, to look at the first one from outside."""
    opened = await backend.open_pool(2)
    try:
        yield opened
    finally:
        await opened.aclose()
