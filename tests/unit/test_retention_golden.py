"""Golden retention plans (trinbox/_dialects/retention.py): every statement of a mount's
retention, rendered per dialect x clock x table shape, compared with the files under
tests/unit/golden/retention/ (readable SQL). Regenerate after a change and review the diff:

    TRINBOX_GOLDEN=update .venv/bin/python -m pytest -q tests/unit/test_retention_golden.py

And the refusals: a kind of row whose age the table cannot tell."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from trinbox._declare._markers import Lease
from trinbox._dialects._base import DeadLetter, Dialect
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.retention import RETAIN_BATCH, RetentionPlan, retention_plan
from trinbox._dialects.sqlite import SqliteDialect
from trinbox.errors import DeclarationError

from .test_plans_golden import SHAPES, Shape, spec

GOLDEN = Path(__file__).parent / "golden" / "retention"
UPDATE = os.environ.get("TRINBOX_GOLDEN") == "update"

# The shapes retention reads: a processed mark only; both kinds into a dead letter group or
# table; a table in a schema whose dead letter table is in it too.
RETAINED = {
    "processed-at-only": (True, False),
    "dead-letter-group-dated": (True, True),
    "dead-letter-table-dated": (True, True),
}
BY_NAME = {s.name: s for s in SHAPES}


@dataclass(frozen=True)
class Case:
    dialect: Dialect
    shape: Shape

    @property
    def path(self) -> Path:
        clock = "database-clock" if self.dialect.database_clock else "host-clock"
        return GOLDEN / f"{self.dialect.name.lower()}-{self.shape.name}-{clock}.sql"

    def plan(self) -> RetentionPlan:
        processed, dead = RETAINED[self.shape.name]
        return retention_plan(
            self.dialect,
            spec(self.shape, Lease),
            self.shape.dead_letter,
            processed=processed,
            dead_letters=dead,
            where="mount",
        )


CASES = [
    Case(make(database_clock=clock), BY_NAME[name])
    for make in (PostgresDialect, MySqlDialect, SqliteDialect)
    for clock in (False, True)
    for name in RETAINED
]


def rendered(case: Case) -> str:
    plan = case.plan()
    lines = [
        f"-- {case.dialect.name} retention, table shape {case.shape.name!r}",
        "-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_retention_golden.py",
    ]
    if plan.begin is not None:
        lines.extend(["", "-- before each delete", plan.begin.sql])
    for prune in plan.prunes:
        for part, statement in (("delete", prune.delete), ("count", prune.count)):
            params = ", ".join(statement.params) or "none"
            lines.extend(
                [
                    "",
                    f"-- {prune.kind} {part} on {prune.table} (event {statement.event}; "
                    f"params: {params})",
                    statement.sql,
                ]
            )
    lines.extend(["", "-- now", plan.now.sql])
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("case", CASES, ids=[c.path.name for c in CASES])
def test_retention_matches_its_golden_file(case: Case) -> None:
    text = rendered(case)
    if UPDATE:
        case.path.parent.mkdir(parents=True, exist_ok=True)
        case.path.write_text(text)
        return
    assert case.path.exists(), (
        f"no golden file {case.path.name}; write it with TRINBOX_GOLDEN=update"
    )
    golden = case.path.read_text()
    diff = "".join(
        difflib.unified_diff(
            golden.splitlines(keepends=True), text.splitlines(keepends=True), "golden", "rendered"
        )
    )
    assert text == golden, diff


def test_every_golden_file_is_a_case() -> None:
    expected = {c.path for c in CASES}
    found = set(GOLDEN.glob("*.sql"))
    assert sorted(p.name for p in found - expected) == []


def test_a_delete_takes_a_batch_and_never_an_unfinished_row() -> None:
    """Each delete is bounded by RETAIN_BATCH and compares the time column with ``before``
    (a NULL mark, an unfinished row or a live one, never compares true)."""
    for case in CASES:
        for prune in case.plan().prunes:
            assert f"LIMIT {RETAIN_BATCH}" in prune.delete.sql
            assert "before" in prune.delete.params
            assert " < " in prune.delete.sql and "IS NULL" not in prune.delete.sql


def test_only_postgresql_skips_locked_rows() -> None:
    for case in CASES:
        deletes = [p.delete.sql for p in case.plan().prunes]
        skips = ["SKIP LOCKED" in sql for sql in deletes]
        assert skips == [isinstance(case.dialect, PostgresDialect)] * len(deletes)


def _refusal(shape: Shape, dead: DeadLetter | None, *, processed: bool, dead_letters: bool) -> str:
    with pytest.raises(DeclarationError) as caught:
        retention_plan(
            PostgresDialect(),
            spec(shape, Lease),
            dead,
            processed=processed,
            dead_letters=dead_letters,
            where="mount of jobs",
        )
    return str(caught.value)


def test_processed_needs_a_processed_at_field() -> None:
    msg = _refusal(BY_NAME["plain"], None, processed=True, dead_letters=False)
    assert "mount of jobs: .retain(processed=...)" in msg
    assert "found no ProcessedAt field on jobs" in msg
    assert "ProcessedAt()] = None" in msg


def test_dead_letters_need_a_destination() -> None:
    msg = _refusal(BY_NAME["dead-letter-table-dated"], None, processed=False, dead_letters=True)
    assert "found no dead letter destination" in msg
    assert ".max_attempts(n).dead_letter(dest)" in msg


def test_dead_letters_need_a_dead_lettered_at_field() -> None:
    shape = BY_NAME["dead-letter-table"]
    msg = _refusal(shape, shape.dead_letter, processed=False, dead_letters=True)
    assert "found no DeadLetteredAt field on jobs" in msg
    assert "DeadLetteredAt()] = None" in msg
    assert "a dead letter table gets its column too" in msg


def test_a_redrive_clears_the_dead_lettered_at_mark() -> None:
    """A redriven row is no dead letter any more: both redrives write NULL into the field."""
    from trinbox._dialects import _inspect

    for name in ("dead-letter-group-dated", "dead-letter-table-dated"):
        shape = BY_NAME[name]
        assert shape.dead_letter is not None
        for dialect in (PostgresDialect(), MySqlDialect(), SqliteDialect()):
            statements = _inspect.redrive(dialect, spec(shape, Lease), shape.dead_letter, 2)
            quoted = dialect.quoted("died")
            first = statements[0].sql
            assert f"{quoted} = NULL" in first or ", NULL" in first, first
            if shape.dead_letter.group is not None:
                assert f"{quoted} = NULL" in first


def test_the_move_into_a_dead_letter_writes_its_now() -> None:
    """The dead letter statements write the settlement's now into DeadLetteredAt."""
    from trinbox._dialects.plans import build_plan

    for name in ("dead-letter-group-dated", "dead-letter-table-dated"):
        shape = BY_NAME[name]
        for dialect in (PostgresDialect(), MySqlDialect(), SqliteDialect()):
            plan = build_plan(dialect, spec(shape, Lease), shape.dead_letter)
            assert any("now" in s.params for s in plan.dead_letter), name
