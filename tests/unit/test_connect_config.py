"""URLs a broker refuses when it is made (issue 9, item 4): a server URL whose port is not a
number, a SQLite database each pooled connection would open afresh (``:memory:``). Messages
name the URL without its password."""

from __future__ import annotations

from pathlib import Path

import pytest

from trinbox import SqlBroker
from trinbox._drivers._urls import port_of, redacted
from trinbox._drivers.sqlite import SqlitePool
from trinbox.errors import ConnectError

SCHEMES = {"postgres": "postgresql", "mysql": "mysql"}


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
@pytest.mark.parametrize("port", ["port", "54x32", "99999", "-1"])
def test_a_port_that_is_not_a_number_fails_when_the_broker_is_made(kind: str, port: str) -> None:
    url = f"{SCHEMES[kind]}://someone:s3cret@db.example:{port}/queue"
    make = SqlBroker.postgres if kind == "postgres" else SqlBroker.mysql
    with pytest.raises(ConnectError) as caught:
        make(url)
    message = str(caught.value)
    assert "s3cret" not in message
    assert f"port is a whole number from 0 to 65535, found {port!r}" in message
    assert f"{SCHEMES[kind]}://someone:***@db.example:{port}/queue" in message
    assert caught.value.statement == "connect"


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_a_well_formed_url_makes_a_broker(kind: str) -> None:
    make = SqlBroker.postgres if kind == "postgres" else SqlBroker.mysql
    broker = make(f"{SCHEMES[kind]}://someone:s3cret@db.example:5433/queue")
    assert broker.url_label == f"{SCHEMES[kind]}://someone:***@db.example:5433/queue"
    make(f"{SCHEMES[kind]}://db.example/queue")  # the default port


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("mysql://u:pw@h:3306/db", "mysql://u:***@h:3306/db"),
        ("mysql://u@h/db", "mysql://u@h/db"),
        ("postgresql://u:p:w@x@h/db", "postgresql://u:***@h/db"),
        (
            "postgresql://h/db?user=u&password=pw&sslmode=require",
            "postgresql://h/db?user=u&password=***&sslmode=require",
        ),
        ("postgresql://u:pw@[::1/db", "postgresql://u:***@[::1/db"),
    ],
)
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert redacted(url) == shown


def test_an_unbalanced_host_is_a_connect_error() -> None:
    with pytest.raises(ConnectError, match=r"found postgresql://u:\*\*\*@\[::1/db"):
        port_of("postgresql://u:pw@[::1/db", server="PostgreSQL", default=5432)


@pytest.mark.parametrize("url", ["sqlite:///:memory:", ":memory:", "sqlite:///"])
def test_a_sqlite_database_of_each_connection_is_refused(url: str) -> None:
    with pytest.raises(ConnectError) as caught:
        SqlBroker.sqlite(url)
    message = str(caught.value)
    assert f"found {url!r}" in message
    assert "gives each connection its own empty" in message
    assert "use a file path (sqlite:///queue.db)" in message


@pytest.mark.parametrize("path", [":memory:", ""])
def test_a_sqlite_pool_refuses_a_database_of_each_connection(path: str) -> None:
    with pytest.raises(ConnectError, match="its own empty"):
        SqlitePool(path)


def test_a_sqlite_file_is_accepted(tmp_path: Path) -> None:
    SqlBroker.sqlite(f"sqlite:///{tmp_path / 'queue.db'}")
    SqlitePool(str(tmp_path / ":memory:"))  # a file of that name, in a directory
