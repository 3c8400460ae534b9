"""The operations behind ``inspect`` and ``dead-letters`` on tables of hostile names (quotes of
every dialect, placeholders, ``%``, braces): depths, dead letter listings and redrives, by the
runtime API on every stand. The test's own SQL quotes names itself and binds no parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from trinbox import InboxQueue, subscriber
from trinbox._operations.queues import dead_rows, depths, opened, queues_of, redrive

from ..._names import FIELDS, Shape, declare
from ..matrix.test_names import create, quote, rows, run, table_of
from ..serving import make_app
from ..stands import STANDS, Stand, StandName, fresh_stand

GROUPED = Shape(
    form="lease",
    table="50% `\"'t",
    schema=None,
    columns={
        "id": "⟩ 'd",
        "grp": 'g`r"p',
        "origin": "o'r{g}",
        "data": "{t}",
        "retry_after": "%s ra",
        "attempt": "$1",
        "locked_until": "lu{}",
        "processed_at": "p%%",
        "payload": "x'y\"",
    },
    literal="",
    dead=None,
)
PLAIN = Shape(
    form="advisory",
    table='pl`ain"%',
    schema=None,
    columns={"id": "i'd", "data": "d%s", "attempt": "a`t"},
    literal="k-",
    dead='de`ad"%',
)


def _ordered(shape: Shape) -> Shape:
    cols = dict(sorted(shape.columns.items(), key=lambda kv: FIELDS.index(kv[0])))
    return Shape(shape.form, shape.table, shape.schema, cols, shape.literal, shape.dead)


def ago(stand: StandName, seconds: int) -> str:
    """A time ``seconds`` before now (negative: after), as SQL text of the stand."""
    if stand == "postgres":
        return f"now() - interval '{seconds} seconds'"
    if stand == "mariadb":
        return f"UTC_TIMESTAMP(6) - INTERVAL {seconds} SECOND"
    return f"strftime('%Y-%m-%d %H:%M:%f000', 'now', '{-seconds} seconds')"


def blob(stand: StandName) -> str:
    return "'\\x7b7d'::bytea" if stand == "postgres" else "X'7b7d'"


def insert(stand: Stand, shape: Shape, table: str, values: dict[str, str]) -> None:
    names = ", ".join(quote(stand.name, shape.columns[f]) for f in values)
    run(stand, [f"INSERT INTO {table} ({names}) VALUES ({', '.join(values.values())})"])


@pytest.mark.parametrize("stand_name", STANDS)
async def test_operations_on_hostile_names(stand_name: StandName, tmp_path: Path) -> None:
    grouped, plain = _ordered(GROUPED), _ordered(PLAIN)
    with fresh_stand(stand_name, tmp_path) as stand:
        create(stand, grouped, dead=False)
        create(stand, plain, dead=True)
        g_row, p_row = declare(grouped), declare(plain)
        g_table = table_of(stand_name, None, grouped.table)
        p_table = table_of(stand_name, None, plain.table)
        dead_table = table_of(stand_name, None, str(plain.dead))

        def email(group: str, due: int, **more: str) -> None:
            values = {"grp": f"'{group}'", "retry_after": ago(stand_name, due)}
            if "dead" in group:
                values["origin"] = "'jobs'"
            values |= {"attempt": "4" if "dead" in group else "1", "payload": blob(stand_name)}
            insert(stand, grouped, g_table, values | more)

        email("jobs", 60)
        email("jobs", 30)
        email("jobs", -3600)
        email("jobs", 5, locked_until=ago(stand_name, -3600))
        email("jobs", 100, processed_at=ago(stand_name, 0))
        for _ in range(3):
            email("jobs%dead", 10)
        insert(stand, plain, p_table, {"data": "'a'"})
        for n in (7, 8):
            insert(stand, plain, dead_table, {"id": str(n), "data": "'b'", "attempt": "4"})

        broker = stand.broker()
        app = make_app()

        async def handle(message: object) -> None:
            pass

        handle.__annotations__ = {"message": bytes, "return": None}
        app.include(broker, subscriber(InboxQueue(g_row, "jobs"))(handle)).max_attempts(
            3
        ).dead_letter("jobs%dead")

        async def handle_row(row: object) -> None:
            pass

        handle_row.__annotations__ = {"row": p_row, "return": None}
        app.include(broker, subscriber(InboxQueue(p_row, "plain"))(handle_row)).max_attempts(
            3
        ).dead_letter(str(plain.dead))
        queues = queues_of(app)
        async with opened(app.brokers):
            jobs, plain_depth = await depths(queues)
            assert (jobs.due, jobs.scheduled, jobs.in_work, jobs.dead) == (2, 1, 1, 3)
            assert jobs.oldest_due_age_seconds is not None
            assert 59 <= jobs.oldest_due_age_seconds < 90
            assert (plain_depth.due, plain_depth.in_work, plain_depth.dead) == (1, None, 2)
            listed, total = await dead_rows(queues[1])
            assert total == 2
            assert [(r.id, r.attempts, r.values["data"]) for r in listed] == [
                (7, 3, "b"),
                (8, 3, "b"),
            ]
            moved = await redrive(queues[1], [8, 9])
            assert (moved.moved, moved.missing) == ((8,), (9,))
            every = await redrive(queues[0], None, chunk=2)
            assert len(every.moved) == 3
            jobs, plain_depth = await depths(queues)
            assert (jobs.due, jobs.dead, plain_depth.due, plain_depth.dead) == (5, 0, 2, 1)
        attempt = quote(stand_name, grouped.columns["attempt"])
        group = quote(stand_name, grouped.columns["grp"])
        assert rows(stand, f"SELECT {group}, {attempt} FROM {g_table} WHERE {attempt} = 4") == []
        left = rows(stand, f"SELECT {quote(stand_name, plain.columns['id'])} FROM {dead_table}")
        assert left == [(7,)]


@pytest.mark.parametrize("stand_name", STANDS)
async def test_two_row_classes_of_one_table_are_read_as_each_declares(
    stand_name: StandName, tmp_path: Path
) -> None:
    # Group "a" is served by a class without ProcessedAt, group "b" by one with it: b's
    # processed rows are finished, a's count (its class does not know the column).
    from ..matrix.schema import EMAIL_JOBS, LeasedEmail, LeasedFinished

    with fresh_stand(stand_name, tmp_path) as stand:
        stand.script(EMAIL_JOBS[stand_name])
        for group in ("a", "b"):
            for processed in ("NULL", ago(stand_name, 0)):
                run(
                    stand,
                    [
                        "INSERT INTO email_jobs (name, retry_after, attempt, processed_at, "
                        f"payload) VALUES ('{group}', {ago(stand_name, 10)}, 1, {processed}, "
                        f"{blob(stand_name)})"
                    ],
                )
        broker = stand.broker()
        app = make_app()

        async def handle(message: bytes) -> None:
            pass

        app.include(broker, subscriber(InboxQueue(LeasedEmail, "a"))(handle))
        app.include(broker, subscriber(InboxQueue(LeasedFinished, "b"))(handle))
        async with opened(app.brokers):
            a, b = await depths(queues_of(app))
        assert (a.group, a.due, b.group, b.due) == ("a", 2, "b", 1)
