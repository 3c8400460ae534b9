"""Helpers of the batch, transactional, wake, failure, mode, lifecycle and concurrency tests of
the matrix: choosing cells, writing rows by raw SQL (which wakes nobody), handler SQL in each
driver's placeholders, reading times back, and a watch on every claim."""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
import trio

from trinbox._forms.advisory import AdvisoryForm
from trinbox._forms.lease import LeaseForm
from trinbox._forms.rowlock import RowLockForm
from trinbox._forms.table import make_form
from trinbox._holders._base import Delivery, FormContext
from trinbox.typing import Subscriber

from ..stands import STANDS, Stand, StandName
from .schema import FORMS

# Due long before any broker clock (TrioClock starts in 2030).
DUE = datetime(2000, 1, 1, tzinfo=UTC)
HOUR = 3600.0


def cells(
    *,
    forms: Sequence[str] = FORMS,
    stands: Sequence[StandName] = STANDS,
    leave_out: Sequence[tuple[StandName, str]] = (),
) -> pytest.MarkDecorator:
    """Run a test on the matrix cells of these forms and stands only (the ``case`` fixture),
    leaving out the (stand, form) cells named."""
    chosen = [
        (stand, form)
        for stand in STANDS
        for form in FORMS
        if stand in stands
        and form in forms
        and (stand, form) not in leave_out
        and not (stand == "sqlite" and form == "row_lock")
    ]
    return pytest.mark.parametrize(
        "case", chosen, ids=[f"{s}-{f}" for s, f in chosen], indirect=True
    )


def where(handler: Subscriber[Any, Any]) -> str:
    """How messages name a subscription."""
    return f"subscription {handler.queue.name!r} ({handler!r})"


def native(stand: StandName, sql: str) -> str:
    """``?`` placeholders in the driver's own style, for SQL a handler runs through
    ``keys.Tx`` / ``keys.Pool`` (``$1`` PostgreSQL, ``%s`` MySQL, ``?`` SQLite)."""
    if stand == "postgres":
        count = iter(range(1, sql.count("?") + 1))
        return re.sub(r"\?", lambda _: f"${next(count)}", sql)
    if stand == "mariadb":
        return sql.replace("?", "%s")
    return sql


def stored(stand: StandName, value: object) -> object:
    """A value as a raw insert writes it: SQLite keeps times as text."""
    if stand == "sqlite" and isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return value


def insert_rows(stand: Stand, table: str, rows: Sequence[dict[str, object]]) -> None:
    """Write rows (with the same columns) by raw SQL, in one statement: nothing is woken."""
    if not rows:
        return
    names = list(rows[0])
    marks = ", ".join(f"({', '.join('?' for _ in names)})" for _ in rows)
    values = [stored(stand.name, row[name]) for row in rows for name in names]
    stand.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES {marks}", *values)


def insert_emails(
    stand: Stand, payloads: Sequence[bytes], *, name: str = "emails", keyed: bool = True
) -> None:
    """Due email_jobs rows of group ``name``, one per payload; ``keyed`` gives each its own
    customer (the advisory key of LockedEmail), so a claim may take them all."""
    insert_rows(
        stand,
        "email_jobs",
        [
            {
                "name": name,
                "customer": f"c{i}" if keyed else "c",
                "retry_after": DUE,
                "payload": payload,
            }
            for i, payload in enumerate(payloads)
        ],
    )


def as_utc(value: object) -> datetime:
    """A time read back by a stand (SQLite text, PostgreSQL aware, MariaDB naive UTC)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime), value
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def sessions(stand: Stand) -> int:
    """Sessions open on a server stand's database, besides the one asking."""
    if stand.name == "postgres":
        sql = (
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    else:
        assert stand.name == "mariadb"
        sql = (
            "SELECT count(*) FROM information_schema.processlist "
            "WHERE db = DATABASE() AND id <> CONNECTION_ID()"
        )
    return int(stand.value(sql))


Hook = Callable[[int], Awaitable[None]]


class ClaimWatch:
    """Watches every claim of every form in one test.

    ``before(n)`` runs as claim ``n`` (1-based, across subscriptions) begins and ``after(n)``
    once it has read its rows, before the claim loop sees them; ``times`` holds when each
    claim began (``trio.current_time()``); ``failed`` the errors claims raised.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self.done = 0
        self.times: list[float] = []
        self.failed: list[BaseException] = []
        self.before: Hook | None = None
        self.after: Hook | None = None
        self._changed = trio.Event()
        for form in (LeaseForm, AdvisoryForm, RowLockForm):
            monkeypatch.setattr(form, "claim", self._wrap(form.claim))

    def _wrap(
        self, original: Callable[[Any, int], Awaitable[list[Delivery]]]
    ) -> Callable[[Any, int], Awaitable[list[Delivery]]]:
        async def claim(form: Any, limit: int) -> list[Delivery]:
            self.count += 1
            n = self.count
            self.times.append(trio.current_time())
            try:
                if self.before is not None:
                    await self.before(n)
                found = await original(form, limit)
                if self.after is not None:
                    await self.after(n)
                return found
            except Exception as exc:
                self.failed.append(exc)
                raise
            finally:
                self.done += 1
                self._changed.set()
                self._changed = trio.Event()

        return claim

    async def wait_done(self, count: int) -> None:
        """Wait until ``count`` claims have returned (or failed)."""
        while self.done < count:
            await self._changed.wait()


def sessions_after_close(stand: Stand, *, within: float = 5.0) -> int:
    """Sessions still open on a server stand's database once the server has had ``within``
    seconds (real time) to see the client's goodbyes; 0 as soon as it has seen them all."""
    deadline = time.monotonic() + within
    while True:
        found = sessions(stand)
        if found == 0 or time.monotonic() > deadline:
            return found
        time.sleep(0.02)  # the server ends a session shortly after the client's goodbye


def lease_form(ctx: FormContext) -> LeaseForm:
    """The lease form of ``ctx``, over the holder the form table builds for it."""
    form = make_form(ctx)
    assert isinstance(form, LeaseForm)
    return form
