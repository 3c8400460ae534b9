"""README "FIFO groups": its declaration runs on SQLite, PostgreSQL and MariaDB, and postings
published to one account are handled in the order they were published, one at a time, though
the queue asks for four workers (served as one, logged); the refusal it quotes is the one the
class statement raises."""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio

from trinbox import Advisory, DeclarationError, Group, Id, Inbox
from trinbox.testing import VirtualClock, settled

from .readme import README, block
from .serving import make_app, serving
from .stands import STANDS, StandName, fresh_stand


@pytest.fixture
def readme_module() -> Iterator[types.ModuleType]:
    """The README's block, run as a module of its own."""
    module = types.ModuleType("readme_fifo")
    sys.modules[module.__name__] = module
    try:
        exec(block("readme_fifo"), module.__dict__)
        yield module
    finally:
        del sys.modules[module.__name__]


@pytest.mark.parametrize("stand_name", STANDS)
async def test_postings_of_an_account_are_handled_in_order(
    stand_name: StandName,
    tmp_path: Path,
    readme_module: types.ModuleType,
    clock: VirtualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    m: Any = readme_module
    cents = [100, -30, 250, -70, 5, 12, -1, 40]
    with fresh_stand(stand_name, tmp_path) as stand:
        broker = stand.broker()
        app = make_app()
        app.include(broker, m.post)
        app.on_startup(lambda: broker.create_tables(m.Posting))
        with caplog.at_level(logging.INFO, logger="trinbox.app"):
            async with serving(app):
                async with broker.transaction() as tx:
                    for n in cents:
                        await tx.publish(m.Posting, m.Entry(n), account="acct-42")
                with trio.fail_after(60):
                    await settled(app, m.post, len(cents))
    assert m.balance == cents
    assert "is a FIFO group, handled one row at a time; workers(4) serves as workers(1)" in (
        caplog.text
    )


def test_the_quoted_refusal_is_the_class_statement_s() -> None:
    with pytest.raises(DeclarationError) as caught:

        class Keyed(Inbox[Advisory], table="keyed", advisory_lock="keyed-{account}"):
            id: Annotated[int, Id()]
            account: Annotated[str, Group(fifo=True)]
            created: datetime

    quoted = "use a key on the group column instead"
    assert quoted in str(caught.value)
    assert f'("*... {quoted} ...*"' in " ".join(README.read_text().split())
