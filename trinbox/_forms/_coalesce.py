"""Group settlement: settlements of single deliveries that arrive while another one is running
wait for it, then run together, as a batch's rows do (a group commit).

A quiet queue pays nothing: the first settlement runs at once. Under load, the deliveries that
finished during one round trip share the next one; each still gets its own outcome (a lease
settlement still takes effect only while its own lease holds).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import trio

from .._holders._base import Delivery, Step
from ..errors import TrinboxError

__all__ = ["SettleTogether"]

RunMany = Callable[[Sequence[tuple[Delivery, Step]]], Awaitable[list[TrinboxError | None]]]


@dataclass(eq=False)
class _Waiting:
    delivery: Delivery
    step: Step
    turn: trio.Event = field(default_factory=trio.Event)  # settled, or it runs the next round
    done: bool = False
    error: TrinboxError | None = None


class SettleTogether:
    """Runs ``run_many`` for every settlement waiting, one round at a time."""

    def __init__(self, run_many: RunMany) -> None:
        self._run_many = run_many
        self._waiting: list[_Waiting] = []
        self._running = False

    async def settle(self, delivery: Delivery, step: Step) -> None:
        me = _Waiting(delivery, step)
        self._waiting.append(me)
        if self._running:
            # Woken when a round settled it, or to run the next round itself.
            try:
                await me.turn.wait()
            except BaseException:
                self._leave(me)
                raise
        if not me.done:
            await self._round()
        if me.error is not None:
            raise me.error

    def _leave(self, me: _Waiting) -> None:
        """A waiting settlement was cancelled: out of the queue, and if the next round was
        its to run, the next in line runs it."""
        if me.done or me not in self._waiting:
            return  # a round has it already
        self._waiting.remove(me)
        if me.turn.is_set():
            if self._waiting:
                self._waiting[0].turn.set()
            else:
                self._running = False

    async def _round(self) -> None:
        """Settle everything waiting now (this task's own settlement among it), then hand
        the next round to the first settlement that arrived meanwhile."""
        self._running = True
        group, self._waiting = self._waiting, []
        try:
            errors = await self._run_many([(w.delivery, w.step) for w in group])
        except BaseException as exc:
            # The round was cut (its task cancelled, or a bug): whether each row settled is
            # unknown; a lease row that did not returns when its lease runs out.
            errors = [_interrupted(w.delivery, exc) for w in group]
            raise
        finally:
            for waiting, error in zip(group, errors, strict=True):
                waiting.error = error
                waiting.done = True
                waiting.turn.set()
            if self._waiting:
                self._waiting[0].turn.set()
            else:
                self._running = False


def _interrupted(delivery: Delivery, exc: BaseException) -> TrinboxError:
    return TrinboxError(
        f"the settlement of row {delivery.id!r} ran with others and was interrupted "
        f"({exc!r}); the row is settled, or returns to its queue when its hold ends"
    )
