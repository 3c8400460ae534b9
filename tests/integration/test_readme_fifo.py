"""README "FIFO groups": its declaration runs on SQLite, PostgreSQL and MariaDB, and postings
published to one account are handled in the order they were published, one at a time, though
the queue asks for four workers (served as one, logged); the subscription over every account
serves each in order, an account opened while it serves included; the advisory alternative
keeps an account's order by retrying at once, and loses it with a backoff; the refusal it
quotes is the one the class statement raises."""

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

from trinbox import Advisory, Backoff, Group, Id, Inbox, InboxQueue, subscriber
from trinbox.errors import DeclarationError
from trinbox.testing import VirtualClock, settled
from trinbox.typing import Subscriber

from .readme import README, block
from .serving import make_app, serving
from .stands import STANDS, StandName, fresh_stand


@pytest.fixture
def readme_module() -> Iterator[types.ModuleType]:
    """The README's blocks of the section, run in order as one module of their own."""
    module = types.ModuleType("readme_fifo")
    sys.modules[module.__name__] = module
    try:
        for tag in ("readme_fifo", "readme_fifo_every", "readme_fifo_advisory"):
            exec(block(tag), module.__dict__)
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


@pytest.mark.parametrize("stand_name", STANDS)
async def test_every_account_in_one_subscription_accounts_opened_later_included(
    stand_name: StandName, tmp_path: Path, readme_module: types.ModuleType, clock: VirtualClock
) -> None:
    m: Any = readme_module
    first = {"acct-1": [100, -30, 250], "acct-2": [5, 12, -1, 40]}
    with fresh_stand(stand_name, tmp_path) as stand:
        broker = stand.broker()
        app = make_app()
        app.include(broker, m.post_any)
        app.on_startup(lambda: broker.create_tables(m.Posting))
        async with serving(app):
            async with broker.transaction() as tx:
                for i in range(4):
                    for account, cents in first.items():
                        if i < len(cents):
                            await tx.publish(
                                m.Posting, m.Posted(account, cents[i]), account=account
                            )
            with trio.fail_after(60):
                await settled(app, m.post_any, 7)
                # An account opened while the app serves.
                for n in (7, 8, 9):
                    await broker.publish(m.Posting, m.Posted("acct-3", n), account="acct-3")
                await settled(app, m.post_any, 10)
    assert m.ledgers == {**first, "acct-3": [7, 8, 9]}


@pytest.mark.parametrize("stand_name", STANDS)
async def test_the_advisory_alternative_keeps_an_account_in_order_retrying_at_once(
    stand_name: StandName, tmp_path: Path, readme_module: types.ModuleType, clock: VirtualClock
) -> None:
    """The advisory block's queue: a posting that fails once is retried at once, before the
    account's later postings, so its order holds."""
    m: Any = readme_module
    failed: list[str] = []

    def failing_once(queue: InboxQueue[Any]) -> Subscriber[Any, Any]:
        async def post(entry: dict[str, Any]) -> None:
            if entry["cents"] == 13 and entry["account"] not in failed:
                failed.append(entry["account"])
                raise RuntimeError("the account is locked")
            m.keyed.setdefault(entry["account"], []).append(entry["cents"])

        found: Subscriber[Any, Any] = subscriber(queue)(post)
        return found

    post_failing_once = failing_once(m.post_keyed.queue)
    # With a backoff, the failing posting waits behind the account's later ones.
    post_with_a_backoff = failing_once(m.post_keyed.queue.backoff(Backoff.constant(1.0)))

    with fresh_stand(stand_name, tmp_path) as stand:
        broker = stand.broker()
        app = make_app()
        app.include(broker, m.post_keyed)
        app.on_startup(lambda: broker.create_tables(m.Keyed))
        async with serving(app):
            async with broker.transaction() as tx:
                for cents in (100, 13, 200, 300):
                    await tx.publish(m.Keyed, m.Posted("acct-1", cents), account="acct-1")
                    await tx.publish(m.Keyed, m.Posted("acct-2", -cents), account="acct-2")
            with trio.fail_after(60):
                await settled(app, m.post_keyed, 8)
        app = make_app()
        app.include(broker, post_failing_once)
        async with serving(app):
            async with broker.transaction() as tx:
                for cents in (100, 13, 200, 300):
                    await tx.publish(m.Keyed, m.Posted("acct-3", cents), account="acct-3")
            with trio.fail_after(60):
                await settled(app, post_failing_once, 5)
        app = make_app()
        app.include(broker, post_with_a_backoff)
        async with serving(app):
            async with broker.transaction() as tx:
                for cents in (100, 13, 200, 300):
                    await tx.publish(m.Keyed, m.Posted("acct-4", cents), account="acct-4")
            with trio.fail_after(60):
                await settled(app, post_with_a_backoff, 5)
    assert m.keyed == {
        "acct-1": [100, 13, 200, 300],
        "acct-2": [-100, -13, -200, -300],
        "acct-3": [100, 13, 200, 300],
        "acct-4": [100, 200, 300, 13],
    }
    assert failed == ["acct-3", "acct-4"]


def test_the_quoted_refusal_is_the_class_statement_s() -> None:
    with pytest.raises(DeclarationError) as caught:

        class Keyed(Inbox[Advisory], table="keyed", advisory_lock="keyed-{account}"):
            id: Annotated[int, Id()]
            account: Annotated[str, Group(fifo=True)]
            created: datetime

    quoted = "use a key on the group column instead"
    assert quoted in str(caught.value)
    assert f'("*... {quoted} ...*"' in " ".join(README.read_text().split())
