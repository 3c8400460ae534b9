"""A bound is live (issue 17, item 6): the clean-ups under it follow its deadline when the
runtime shortens it (a claim cut as its subscription stops), whether they open after the
shortening or were already running; shortened with a release, a block cut at its deadline
has that much more for its clean-ups, and no more. Virtual time: every wait here is a Trio
sleep."""

from __future__ import annotations

import trio

from trinbox._bounds import CLEANUP, cleanup_scope, within
from trinbox.testing import VirtualClock


async def test_a_clean_up_opened_after_its_bound_was_shortened_gets_the_new_deadline(
    clock: VirtualClock,
) -> None:
    start = trio.current_time()
    with within(60) as bound:
        bound.shorten(start + 5)
        with cleanup_scope() as scope:
            assert scope.deadline == start + 5
            await trio.sleep(30)  # a rollback that never answers
    assert scope.cancelled_caught
    assert trio.current_time() == start + 5


async def test_a_clean_up_running_when_its_bound_is_shortened_is_cut_at_the_new_deadline(
    clock: VirtualClock,
) -> None:
    start = trio.current_time()
    with within(60) as bound:
        async with trio.open_nursery() as nursery:

            async def shorten() -> None:
                await trio.sleep(1)
                bound.shorten(trio.current_time() + 5)

            nursery.start_soon(shorten)
            with cleanup_scope() as scope:  # opened before the shortening, at 60 s
                await trio.sleep(30)
    assert scope.cancelled_caught
    assert trio.current_time() == start + 6


async def test_a_bound_inside_a_shortened_bound_follows_it(clock: VirtualClock) -> None:
    start = trio.current_time()
    with within(60) as outer:
        with within(30) as inner:
            outer.shorten(start + 2)
            assert inner.deadline == start + 2
            with cleanup_scope() as scope:
                await trio.sleep(10)
        assert scope.cancelled_caught
    assert trio.current_time() == start + 2
    # A bound never grows past the one around it, and a longer deadline does not reach it.
    with within(5) as outer, within(60) as inner:
        assert inner.deadline == start + 7
        outer.shorten(start + 100)
        assert inner.deadline == start + 7


async def test_a_clean_up_outside_any_bound_gets_the_clean_up_bound(clock: VirtualClock) -> None:
    start = trio.current_time()
    with trio.CancelScope() as caller:
        caller.cancel()
        with cleanup_scope() as scope:  # shielded from its caller's cancel
            await trio.sleep(3 * CLEANUP)
    assert scope.cancelled_caught
    assert trio.current_time() == start + CLEANUP


async def test_a_block_cut_at_a_shortened_deadline_gets_its_release_for_clean_ups(
    clock: VirtualClock,
) -> None:
    """As ClaimState.stop() does: the claim runs on until RELEASE from the stop; cut there, what
    it holds is released as a drop's is, within RELEASE more, however long its bound was."""
    start = trio.current_time()
    with within(60) as bound:
        async with trio.open_nursery() as nursery:

            async def stop() -> None:
                await trio.sleep(1)
                bound.shorten(trio.current_time() + 5, release=5)

            nursery.start_soon(stop)
            try:
                await trio.sleep(30)  # a claim waiting on a row another session locks
            finally:
                cut = trio.current_time()
                with cleanup_scope() as scope:
                    await trio.sleep(30)  # its unlock, on a server that does not answer
    assert cut == start + 6
    assert scope.cancelled_caught
    assert trio.current_time() == start + 11
