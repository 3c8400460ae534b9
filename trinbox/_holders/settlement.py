"""What every form's settlement does alike, as functions the forms and their holders call: a
step's statements as the ops of a script, a step settled alone with its error in a
``Chained``, deliveries settled one by one (a batch's fallback), and where a chained
settle-and-claim round trip failed (the settlement's error, or only the claim's)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeGuard

from .._dialects.plans import Plan
from .._drivers._base import Op
from ..errors import DatabaseError, TrinboxError
from ._base import Chained, Delivery, Step, step_statements, step_values

__all__ = ["Settle", "settle_alone", "settle_each", "settlement_ran", "step_ops"]

Settle = Callable[[Delivery, Step], Awaitable[None]]
"""A form's settlement of one delivery."""


def step_ops(plan: Plan, delivery: Delivery, step: Step, now: object) -> list[Op]:
    """The step's statements for ``delivery``, bound, as the ops of a script (none for a
    step that settles by rollback alone)."""
    values = {"id": delivery.id, "now": now, **step_values(step)}
    return [Op("execute", st.sql, st.bind(values)) for st in step_statements(plan, step)]


async def settle_alone(settle: Settle, delivery: Delivery, step: Step) -> Chained:
    """Settle with no claim chained: the settlement's error, if any, in the ``Chained``."""
    try:
        await settle(delivery, step)
    except TrinboxError as exc:
        return Chained(error=exc)
    return Chained()


async def settle_each(
    settle: Settle, items: Sequence[tuple[Delivery, Step]]
) -> list[TrinboxError | None]:
    """Settle each delivery alone, one after another: each one's error, so one row's failure
    leaves the others' settlements standing."""
    errors: list[TrinboxError | None] = [None] * len(items)
    for i, (delivery, step) in enumerate(items):
        try:
            await settle(delivery, step)
        except TrinboxError as exc:
            errors[i] = exc
    return errors


def settlement_ran(exc: TrinboxError, settling: int) -> TypeGuard[DatabaseError]:
    """A chained round trip (the settlement's ``settling`` ops, then the claim's) failed
    after the settlement ran: only the claim failed."""
    return isinstance(exc, DatabaseError) and exc.step is not None and exc.step >= settling
