"""README "Testing a service": its service and its pytest-trio tests, written into a directory
and run by pytest in a subprocess (SQLite, and a fresh PostgreSQL database); and the warnings
beside them about ``trio.testing.MockClock``, checked on the databases they name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trio

from trinbox import App, AppInfo, SqlBroker
from trinbox.errors import ConnectError
from trinbox.testing import TrioClock, VirtualClock

from .readme import blocks, child_env, run_pytest
from .stands import fresh_stand

TAG = "readme_testing"


def _write(directory: Path, files: dict[str, str]) -> int:
    """Write the blocks as files; the number of tests they define."""
    directory.mkdir()
    for name, code in files.items():
        (directory / name).write_text(code)
    return sum(len(re.findall(r"^async def test_", code, re.MULTILINE)) for code in files.values())


@pytest.fixture
def suite(tmp_path: Path) -> dict[str, str]:
    files = blocks(TAG)
    assert set(files) == {"mailer.py", "test_mailer.py"}
    return files


def test_the_readme_tests_pass_on_sqlite_and_postgres(
    tmp_path: Path, suite: dict[str, str]
) -> None:
    count = _write(tmp_path / "suite", suite)
    assert count == 2  # one on SQLite, one on PostgreSQL
    with fresh_stand("postgres", tmp_path) as stand:
        counts, output = run_pytest(
            tmp_path / "suite", child_env(MAILER_TEST_DATABASE_URL=stand.url)
        )
        # The test dropped its table on shutdown.
        assert stand.rows("SELECT tablename FROM pg_tables WHERE schemaname = 'public'") == []
    assert counts == {"passed": count}, output


def test_without_trio_clock_the_readme_tests_fail(tmp_path: Path, suite: dict[str, str]) -> None:
    # The broker on the system clock: the retry ten minutes out never falls due in virtual
    # time, and each test fails at its one-hour virtual bound (fast: no real waiting).
    assert suite["test_mailer.py"].count(", clock=TrioClock())") == 2
    broken = {
        **suite,
        "test_mailer.py": suite["test_mailer.py"].replace(", clock=TrioClock())", ")"),
    }
    count = _write(tmp_path / "suite", broken)
    with fresh_stand("postgres", tmp_path) as stand:
        counts, output = run_pytest(
            tmp_path / "suite", child_env(MAILER_TEST_DATABASE_URL=stand.url)
        )
    assert counts == {"failed": count}, output
    assert output.count("TooSlowError") >= count, output


# -- the warnings about MockClock --------------------------------------------------------------


@pytest.mark.parametrize("server", ["postgres", "mariadb"])
async def test_under_mock_clock_the_first_connect_times_out(
    server: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    with fresh_stand(server, tmp_path) as stand:  # type: ignore[arg-type]
        app = App(AppInfo("mock-clock"))
        app.add_broker(stand.broker())
        # Bounded (in virtual time, which jumps to it): a connect that won would serve on.
        with trio.move_on_after(3600), pytest.raises(ConnectError, match="timed out after 10 s"):
            await app.serve()


# A statement that runs for some milliseconds on SQLite's worker thread.
COUNT_TO = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) "
    "SELECT COUNT(*) FROM c"
)


async def _statements_cut(tmp_path: Path, tries: int) -> int:
    """How many of ``tries`` statements on SQLite outlast a 60-second bound."""
    broker = SqlBroker.sqlite(f"sqlite:///{tmp_path}/q.db", clock=TrioClock())
    app = App(AppInfo("clocks"))
    app.add_broker(broker)
    cut = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(app.serve)
        for _ in range(tries):
            with trio.move_on_after(60) as scope:
                assert await broker.database.fetchval(COUNT_TO, 100_000) == 100_000
            cut += scope.cancelled_caught
        app.shutdown()
    return cut


async def test_under_mock_clock_a_sqlite_statement_outlasts_its_bound(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Virtual time jumps while the statement runs on its worker thread: most are cut.
    assert await _statements_cut(tmp_path, 20) > 0


async def test_under_virtual_clock_no_sqlite_statement_outlasts_its_bound(
    tmp_path: Path, clock: VirtualClock
) -> None:
    assert await _statements_cut(tmp_path, 20) == 0
