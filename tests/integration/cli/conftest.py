"""Each command line test runs on a fresh database of every stand (SQLite, PostgreSQL,
MariaDB) with the matrix's tables and a service module written beside it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..stands import STANDS, fresh_stand
from .kit import Service, service


@pytest.fixture(params=STANDS)
def svc(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    with fresh_stand(request.param, tmp_path) as stand:
        yield service(stand, tmp_path)
