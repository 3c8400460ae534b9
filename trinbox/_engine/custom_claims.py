"""A queue's own claim (``InboxQueue.custom_claim``) as its form runs it (``CustomClaim``): the
queue's functions called with the claim's connection lent as a ``Held`` handle (the driver's
placeholders, or portable ``:name`` ones), which ends when they return. What they raise (but
a statement's ``DatabaseError``, which stays itself) or return that no claim can take is a
``ClaimFailed`` naming the rule: the claim's transaction rolls back, and the claim loop tries
again after its usual wait."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from .._api.handles import Held
from .._api.queue import CustomClaimOf
from .._declare._spec import TableSpec
from .._dialects._base import Dialect
from .._drivers._base import Connection, Record
from .._holders._base import CustomClaim
from ..errors import ClaimFailed, TrinboxError

__all__ = ["custom_claim_for"]


def custom_claim_for(
    given: CustomClaimOf | None, spec: TableSpec, dialect: Dialect
) -> CustomClaim | None:
    """The form's view of the queue's custom claim, if it has one."""
    if given is None:
        return None
    label = spec.label
    width = len(spec.columns)
    columns = ", ".join(col.column for col in spec.columns)

    async def ids(conn: Connection, group: str | None, limit: int) -> list[object]:
        held = Held(conn, dialect.style)
        try:
            # What the function returns, whatever its annotation says.
            found: object = await given.claim(held, group, limit)
        except TrinboxError:
            raise
        except Exception as exc:
            msg = f"{label}: the queue's custom claim raised {exc!r}; the claim rolled back"
            raise ClaimFailed(msg) from exc
        finally:
            held.end()
        if not isinstance(found, Sequence) or isinstance(found, str | bytes):
            msg = (
                f"{label}: a custom claim returns a list of row ids, found {found!r}; return "
                f"the ids of the rows it took"
            )
            raise ClaimFailed(msg)
        try:
            unique = list(
                dict.fromkeys(cast("Sequence[object]", found))
            )  # each id once, in the claim's order
        except TypeError as exc:
            msg = f"{label}: a custom claim returns row ids, found an id that is no value: {exc}"
            raise ClaimFailed(msg) from exc
        if len(unique) > limit:
            msg = (
                f"{label}: a custom claim returns at most the {limit} ids it is asked for, "
                f"found {len(unique)}; limit its query by its third argument"
            )
            raise ClaimFailed(msg)
        return unique

    fetch = given.fetch
    if fetch is None:
        return CustomClaim(ids)

    async def rows(conn: Connection, claimed: list[object]) -> list[Record]:
        held = Held(conn, dialect.style)
        try:
            found: object = await fetch(held, list(claimed))
        except TrinboxError:
            raise
        except Exception as exc:
            msg = f"{label}: the queue's custom fetch raised {exc!r}; the claim rolled back"
            raise ClaimFailed(msg) from exc
        finally:
            held.end()
        if not isinstance(found, Sequence) or isinstance(found, str | bytes):
            msg = f"{label}: a custom fetch returns a list of rows, found {found!r}"
            raise ClaimFailed(msg)
        records: list[Record] = []
        for row in cast("Sequence[object]", found):
            values = cast("Sequence[object]", row) if isinstance(row, Sequence) else None
            if values is None or isinstance(row, str | bytes) or len(values) != width:
                msg = (
                    f"{label}: a custom fetch returns rows of the row class's {width} "
                    f"columns in declaration order ({columns}), found {row!r}; select those "
                    f"columns in that order"
                )
                raise ClaimFailed(msg)
            records.append(tuple(values))
        return records

    return CustomClaim(ids, rows)
