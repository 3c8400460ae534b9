"""PgBouncer in front of PostgreSQL: what a broker's ``pgbouncer=`` setting means, and the
startup refusals of what transaction pooling breaks.

In transaction pooling PgBouncer gives a client a server session for one transaction, then to
another client. Row lock (its lock lives in the delivery's transaction) and lease (its lease
is a column, each step one transaction or one autocommit statement) need no more than that,
once asyncpg keeps no named statements on the session (``statement_cache_size=0``). The
advisory form keeps a lock in the session across transactions, and LISTEN keeps the session
listening: both are refused at startup, before anything is claimed.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from .._declare._markers import Advisory
from .._declare._spec import TableSpec
from ..errors import StartupError

__all__ = ["PoolMode", "check_form", "check_listen", "check_pool_mode", "driver_options"]

PoolMode = Literal["session", "transaction"]
"""PgBouncer's ``pool_mode`` between the broker and PostgreSQL: ``"session"`` (every form,
LISTEN too: the same as a direct connection) or ``"transaction"``."""

_FIX = (
    "put PgBouncer in session pooling (pool_mode = session) for this database, or give the "
    "broker a URL straight to PostgreSQL"
)


def check_pool_mode(value: object) -> PoolMode | None:
    """The ``pgbouncer=`` setting, checked when the broker is made."""
    if value is None or value in get_args(PoolMode):
        return value  # type: ignore[return-value]
    msg = (
        f"pgbouncer= names PgBouncer's pool_mode in front of the database: None (a direct "
        f"connection), 'session' or 'transaction', found {value!r}"
    )
    if value == "statement":
        msg += (
            "; statement pooling allows no transaction of several statements, which the row "
            "lock form and every settlement need: use transaction pooling"
        )
    raise ValueError(msg)


def driver_options(pool_mode: PoolMode | None) -> dict[str, Any]:
    """What the PostgreSQL driver's ``open_pool`` is given for the setting."""
    if pool_mode == "transaction":
        # No named statement outlives its transaction: PgBouncer hands the server session
        # to another client next, where the name is missing (or taken by another client's).
        return {"statement_cache": False}
    return {}


def check_listen(pool_mode: PoolMode | None, *, listen_notify: bool, on: str) -> None:
    """Refuse ``listen_notify`` through transaction pooling (the startup of the broker ``on``
    a database, named without credentials)."""
    if pool_mode == "transaction" and listen_notify:
        msg = (
            f"a broker on {on}: listen_notify keeps one database session "
            f"listening for as long as the app serves, and PgBouncer's transaction pooling "
            f"hands a session to other clients after each transaction, so notifications would "
            f"be lost; found listen_notify=True with pgbouncer='transaction'. Drop "
            f"listen_notify (subscriptions then poll), or {_FIX}"
        )
        raise StartupError(msg)


def check_form(
    where: str, pool_mode: PoolMode | None, spec: TableSpec, *, count_at_claim: bool = False
) -> None:
    """Refuse the advisory form, and the row lock form's count at claim, through transaction
    pooling (a subscription's startup)."""
    if pool_mode == "transaction" and count_at_claim:
        msg = (
            f"{where}: .count_attempt_at_claim() holds a session lock from each claim's "
            f"select to its relock, across the count's commit, and PgBouncer's transaction "
            f"pooling hands the session to other clients between transactions (the lock "
            f"would guard nothing); found {spec.label} with .count_attempt_at_claim() on a "
            f"broker with pgbouncer='transaction'. Drop .count_attempt_at_claim(), or {_FIX}"
        )
        raise StartupError(msg)
    if pool_mode == "transaction" and spec.form is Advisory:
        msg = (
            f"{where}: the advisory form holds each row's lock in the database session from "
            f"its claim to its settlement, across transactions, and PgBouncer's transaction "
            f"pooling hands the session to other clients between transactions (the lock would "
            f"guard nothing, and the unlock would run on another session); found "
            f"{spec.label} in the advisory form on a broker with pgbouncer='transaction'. "
            f"Use the row lock or lease form for this table, or {_FIX}"
        )
        raise StartupError(msg)
