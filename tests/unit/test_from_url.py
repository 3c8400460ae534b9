"""``SqlBroker.from_url``: the URL's scheme picks the database (nothing connects), each
database's own defaults apply, and a scheme it does not read, or a PostgreSQL setting on
another database, is refused where the broker is made, with the schemes it reads."""

from __future__ import annotations

from datetime import timedelta

import pytest

from trinbox import SqlBroker
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect
from trinbox.errors import ConnectError

from ..integration.readme import README


@pytest.mark.parametrize(
    ("url", "kind", "dialect", "pool_size"),
    [
        ("postgresql://app:pw@db:5432/app", "postgres", PostgresDialect, 10),
        ("postgres://app@db/app", "postgres", PostgresDialect, 10),
        ("POSTGRESQL://app@db/app", "postgres", PostgresDialect, 10),
        ("mysql://app:pw@db:3306/app", "mysql", MySqlDialect, 10),
        ("mariadb://app@db/app", "mysql", MySqlDialect, 10),
        ("sqlite:///jobs.db", "sqlite", SqliteDialect, 8),
    ],
)
def test_the_scheme_picks_the_database(
    url: str, kind: str, dialect: type[object], pool_size: int
) -> None:
    broker = SqlBroker.from_url(url)
    assert broker.kind == kind
    assert type(broker.dialect) is dialect
    assert broker.pool_size == pool_size
    assert broker.url == url


def test_the_settings_reach_the_database_s_constructor() -> None:
    broker = SqlBroker.from_url(
        "postgresql://app@db/app", pool_size=4, poll_interval=0.5, lease=12, pgbouncer="transaction"
    )
    assert broker.pool_size == 4
    assert (broker.poll_interval, broker.lease) == (timedelta(seconds=0.5), timedelta(seconds=12))
    assert broker.pgbouncer == "transaction"
    assert SqlBroker.from_url("postgresql://app@db/app", listen_notify=True).listen_notify
    assert SqlBroker.from_url("sqlite:///jobs.db", pool_size=3).pool_size == 3


@pytest.mark.parametrize(
    ("url", "found"),
    [
        (
            "postgresq://app:s3cret@db/app",
            "found the scheme 'postgresq:' in postgresq://app:***@db/app",
        ),
        ("jobs.db", "found no scheme in jobs.db"),
        ("redis://localhost:6379", "found the scheme 'redis:'"),
    ],
)
def test_a_scheme_it_does_not_read_is_refused_with_the_ones_it_does(url: str, found: str) -> None:
    with pytest.raises(ConnectError) as refused:
        SqlBroker.from_url(url)
    message = str(refused.value)
    assert message.startswith(
        "SqlBroker.from_url picks the database by the URL's scheme, postgresql:// (or "
        "postgres://), mysql:// (or mariadb://) or sqlite:///, "
    )
    assert found in message
    assert message.endswith("; write one of them")
    assert "s3cret" not in message


def test_a_driver_suffix_is_named() -> None:
    with pytest.raises(ConnectError, match=r"a driver suffix is not read: write postgresql://\)"):
        SqlBroker.from_url("postgresql+asyncpg://app@db/app")


@pytest.mark.parametrize(
    ("url", "setting", "given"),
    [
        ("sqlite:///jobs.db", {"listen_notify": True}, "listen_notify=True"),
        ("mysql://app@db/app", {"pgbouncer": "transaction"}, "pgbouncer='transaction'"),
    ],
)
def test_a_postgresql_setting_on_another_database_is_refused(
    url: str, setting: dict[str, object], given: str
) -> None:
    with pytest.raises(ValueError, match=f"{given} is a PostgreSQL setting, found a "):
        SqlBroker.from_url(url, **setting)  # type: ignore[arg-type]


def test_what_each_constructor_refuses_from_url_refuses_too() -> None:
    with pytest.raises(ConnectError, match="port is a whole number"):
        SqlBroker.from_url("postgresql://app@db:54x/app")
    with pytest.raises(ConnectError, match="in-memory"):
        SqlBroker.from_url("sqlite:///:memory:")


def test_the_readme_shows_the_refusal_as_it_reads() -> None:
    (shown,) = [
        line
        for line in README.read_text().splitlines()
        if line.startswith("trinbox.errors.ConnectError: SqlBroker.from_url")
    ]
    with pytest.raises(ConnectError) as refused:
        SqlBroker.from_url("postgresql+asyncpg://app:s3cret@db/app")
    assert shown == f"trinbox.errors.ConnectError: {refused.value}"
