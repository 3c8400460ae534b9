"""Names are names in the DDL too: a row class of drawn table, schema and column names
(tests/_names.py) gets its table, claim index and dead letter table from
``broker.create_tables`` on every stand and form, and serves two rows (one acked, one spent
into its dead letter destination), checked by the same SQL of the test's own as
test_names.py. Shapes that the class statement, the mount or the start refuses are left to
test_names.py, which checks those refusals."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from trinbox import HandlerOutcome, InboxQueue, keys, subscriber

from ..._names import declare
from ..serving import make_app
from ..stands import StandName
from .test_names import (
    CELLS,
    DEAD_GROUP,
    GROUP,
    Msg,
    check_tables,
    examples,
    quote,
    run,
    serve_two_rows,
    stand_for,
)

EXAMPLES = 12


@pytest.mark.parametrize(("stand_name", "form"), CELLS, ids=[f"{s}-{f}" for s, f in CELLS])
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
async def test_tables_of_any_names_from_their_declaration_serve(
    stand_name: StandName, form: str, data: st.DataObject
) -> None:
    shape, first, second, row_mode = data.draw(examples(stand_name, form))
    assume(not shape.refused_at_declaration() and not shape.refused_by(stand_name))
    assume(not shape.dead_refused_by(stand_name))
    row = declare(shape)
    delivered: list[tuple[str, int]] = []

    async def handle(message: Any, attempt: keys.Attempt) -> HandlerOutcome:
        which = message.to if not row_mode else ("a" if message.data == first else "b")
        delivered.append((which, attempt))
        return HandlerOutcome.ack() if which == "a" else HandlerOutcome.retry()

    handle.__annotations__ = {
        "message": row if row_mode else Msg,
        "attempt": keys.Attempt,
        "return": HandlerOutcome,
    }
    grouped = "grp" in shape.columns
    sub = subscriber(InboxQueue(row, GROUP if grouped else "jobs"))(handle)
    if shape.dead is not None:
        dest = shape.dead if shape.schema is None else f"{shape.schema}.{shape.dead}"
    else:
        dest = DEAD_GROUP
    with stand_for(stand_name) as stand:
        broker = stand.broker(poll_interval=3600)
        app = make_app()
        app.include(broker, sub).max_attempts(2).dead_letter(dest)

        @app.on_startup
        async def create() -> None:
            await broker.create_tables(row, dead_letter=dest)
            await broker.create_tables(row, dead_letter=dest)

        cleanup: list[str] = []
        if shape.schema is not None:
            # The schema is the user's to make (the DDL qualifies the table with it).
            name = quote(stand_name, shape.schema)
            if stand_name == "postgres":
                run(stand, [f"CREATE SCHEMA {name}"])
            else:
                run(stand, [f"CREATE DATABASE {name} CHARACTER SET utf8mb4"])
                cleanup.append(f"DROP DATABASE IF EXISTS {name}")
        try:
            await serve_two_rows(app, broker, sub, shape, row, first, second, row_mode)
            check_tables(stand, shape, first, second)
        finally:
            run(stand, cleanup)
    assert sorted(delivered) == [("a", 1), ("b", 1), ("b", 2)]
