"""``broker.transaction()`` ends its ``Tx`` with its block (issue 17, item 5): a ``Tx`` kept
past the block raises ``TransactionHeld`` and runs nothing, neither in autocommit on the
connection back in the pool nor inside the transaction another task opened on it, whether
the block committed or rolled back."""

from __future__ import annotations

import pytest

from trinbox import keys
from trinbox._drivers.aio import asyncio_loop
from trinbox.errors import TransactionHeld

from .conftest import Case
from .kit import cells, native


class Boom(Exception):
    pass


@cells(forms=["lease"])
async def test_a_tx_kept_past_its_block_raises_transaction_held_and_runs_nothing(
    case: Case,
) -> None:
    stand = case.stand
    insert = native(case.name, "INSERT INTO plain_jobs (tenant) VALUES (?)")
    kept: list[keys.Tx] = []
    async with asyncio_loop(stand.name != "sqlite"):
        # Two connections: the next transaction takes the kept one's connection or its twin.
        broker = stand.broker(pool_size=2)
        await broker.open()
        try:
            async with broker.transaction() as tx:
                await tx.execute(insert, "committed")
                kept.append(tx)
            with pytest.raises(Boom):
                async with broker.transaction() as tx:
                    await tx.execute(insert, "rolled back")
                    kept.append(tx)
                    raise Boom
            for old in kept:
                with pytest.raises(TransactionHeld, match="ends with its async with block"):
                    await old.execute(insert, "kept, autocommit")
                with pytest.raises(TransactionHeld):
                    await old.fetchval("SELECT count(*) FROM plain_jobs")
                with pytest.raises(TransactionHeld):
                    await old.publish(case.email, {"n": 1}, name="emails", customer="c")
            # Inside another transaction, on one of the same two connections.
            with pytest.raises(Boom):
                async with broker.transaction() as other:
                    await other.execute(insert, "other")
                    for old in kept:
                        with pytest.raises(TransactionHeld):
                            await old.execute(insert, "kept, inside another")
                    raise Boom
            async with broker.transaction() as tx:
                assert await tx.fetchval("SELECT count(*) FROM plain_jobs") == 1
        finally:
            await broker.aclose()
    assert stand.rows("SELECT tenant FROM plain_jobs") == [("committed",)]
    assert stand.value("SELECT count(*) FROM email_jobs") == 0


@cells(forms=["lease"])
async def test_a_connection_kept_past_its_block_raises_transaction_held_and_runs_nothing(
    case: Case,
) -> None:
    """``keys.Pool.connection()`` lends its connection for its block alone: one kept past it
    runs nothing on the connection back in the pool, in autocommit or inside the transaction
    another task opened on it."""
    stand = case.stand
    insert = native(case.name, "INSERT INTO plain_jobs (tenant) VALUES (?)")
    async with asyncio_loop(stand.name != "sqlite"):
        broker = stand.broker(pool_size=2)
        await broker.open()
        try:
            pool = broker.database
            async with pool.connection() as conn:
                await conn.execute(insert, "in the block")
            kept = conn
            with pytest.raises(TransactionHeld, match="goes back to the pool with its async"):
                await kept.execute(insert, "kept, autocommit")
            with pytest.raises(TransactionHeld):
                await kept.fetch("SELECT tenant FROM plain_jobs")
            with pytest.raises(Boom):
                async with broker.transaction() as other:
                    await other.execute(insert, "other")
                    with pytest.raises(TransactionHeld):
                        await kept.execute(insert, "kept, inside another")
                    raise Boom
        finally:
            await broker.aclose()
    assert stand.rows("SELECT tenant FROM plain_jobs") == [("in the block",)]
