"""What holds an advisory row's key, as the advisory form sees it: ``AdvisoryHold``, the verbs
each kind of hold implements (a server session's lock, trinbox._holders.session_lock; SQLite's
process keys, trinbox._holders.process_keys), and ``KeyWork``, what a hold asks of the form (its
deliveries in work and the steps every hold shares). The form calls the hold's verbs and never
asks which one it has; the form table (trinbox._forms.table) picks it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from .._dialects._statement import Statement
from .._drivers._base import Connection, Op, Record, Result
from ..errors import TrinboxError
from ._base import Chained, Claimed, Delivery, FormContext, FormTraits, Step

__all__ = ["AdvisoryHold", "KeyWork"]


class KeyWork(Protocol):
    """The advisory form, as its hold uses it."""

    ctx: FormContext
    working: set[Delivery]  # the deliveries in work (a claim's taken ones too)
    settling: set[Delivery]
    claiming: int  # claims in flight

    def delivery(self, record: Record, key: str, conn: Connection | None) -> Delivery: ...

    def claim_values(self, limit: int) -> tuple[dict[str, object], datetime, int]: ...

    def take_ops(self, row_id: object, now: object) -> list[Op]: ...

    def taken(self, results: list[Result], row_id: object) -> Record | None: ...

    async def begin_transaction(self, delivery: Delivery) -> None: ...

    async def close_session(self, conn: Connection) -> None: ...

    def begin_shutdown(self) -> None: ...

    async def release(self, delivery: Delivery) -> None: ...

    async def settle(self, delivery: Delivery, step: Step) -> None: ...

    async def hand_back(self, delivery: Delivery) -> None: ...

    async def run_plain(
        self,
        conn: Connection | None,
        statements: Sequence[Statement],
        values: dict[str, object],
    ) -> None: ...


class AdvisoryHold(Protocol):
    """The verbs of one kind of advisory hold, over one subscription's keys."""

    def traits(self, transactional: bool) -> FormTraits:
        """What the form offers the engine with this hold."""
        ...

    def start_serving(self) -> None: ...

    def stop_serving(self) -> None: ...

    async def claim(self, work: KeyWork, limit: int) -> Claimed:
        """Take up to ``limit`` rows of keys free of this hold."""
        ...

    async def let_go(self, work: KeyWork, delivery: Delivery, conn: Connection | None) -> None:
        """A settled delivery's key is let go, and ``conn`` (its session, if any, its
        transaction ended) given back or closed."""
        ...

    async def release(self, work: KeyWork, delivery: Delivery, conn: Connection | None) -> None:
        """A dropped delivery: its key let go and ``conn`` never reused, so its row returns."""
        ...

    def forget(self, key: str) -> None:
        """The release ran out of time: nothing of the key stays in this process."""
        ...

    async def let_go_for_shutdown(
        self, work: KeyWork, delivery: Delivery, conn: Connection | None
    ) -> bool:
        """Shutdown lets go of ``delivery``'s key and ``conn``: whether the key was
        released."""
        ...

    async def run_statements(
        self,
        work: KeyWork,
        delivery: Delivery,
        statements: Sequence[Statement],
        values: dict[str, object],
    ) -> None:
        """A settlement's statements, outside the handler's transaction."""
        ...

    async def settle_batch(
        self, work: KeyWork, items: Sequence[tuple[Delivery, Step]]
    ) -> list[TrinboxError | None]: ...

    async def settle_and_claim(
        self,
        work: KeyWork,
        delivery: Delivery,
        statements: Sequence[Statement],
        step: Step,
        limit: int,
    ) -> Chained:
        """A single delivery's one-statement settlement (outside transactional mode) and the
        worker's next claim, chained where this hold can."""
        ...

    async def settle_batch_and_claim(
        self, work: KeyWork, items: Sequence[tuple[Delivery, Step]], limit: int
    ) -> tuple[list[TrinboxError | None], Chained]:
        """A batch's settlement (outside transactional mode) and the worker's next batch."""
        ...
