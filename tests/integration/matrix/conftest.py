"""The integration matrix: every scenario runs once per (stand, form) the stand serves —
SQLite (lease, advisory), PostgreSQL and MariaDB (row lock, lease, advisory) — each on a
fresh database with the shared tables created."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from trinbox import Inbox

from ..stands import STANDS, Stand, StandName, fresh_stand
from .schema import EMAIL, EMAIL_JOBS, FINISHED, FORMS, PLAIN, PLAIN_JOBS

CASES = [
    (stand, form)
    for stand in STANDS
    for form in FORMS
    if not (stand == "sqlite" and form == "row_lock")
]


@dataclass
class Case:
    """One (stand, form) of the matrix, on a fresh database with the shared tables."""

    stand: Stand
    form: str

    @property
    def name(self) -> StandName:
        return self.stand.name

    @property
    def email(self) -> type[Inbox[Any, Any]]:
        return EMAIL[self.form]

    @property
    def finished(self) -> type[Inbox[Any, Any]]:
        return FINISHED[self.form]

    @property
    def plain(self) -> type[Inbox[Any, Any]]:
        return PLAIN[self.form]

    def attempts_after(self, deliveries: int) -> int:
        """The attempt column after ``deliveries`` deliveries: the row lock form counts when a
        retry settles; the lease and advisory forms count at the claim, one ahead."""
        return deliveries if self.form == "row_lock" else deliveries + 1


@pytest.fixture(params=CASES, ids=[f"{s}-{f}" for s, f in CASES])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    stand_name, form = request.param
    with fresh_stand(stand_name, tmp_path) as stand:
        stand.script(EMAIL_JOBS[stand_name])
        stand.script(PLAIN_JOBS[stand_name])
        yield Case(stand, form)
