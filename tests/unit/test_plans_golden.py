"""Golden plans: every statement of every plan (trinbox/_dialects/plans.py), rendered for a set
of table shapes x dialect x form x options, compared with the files under
tests/unit/golden/plans/ (one file per dialect x form x shape x option, readable SQL).

A test fails when its file is missing or differs, showing the diff. After a change to the
statements, regenerate the files and review the diff in git:

    TRINBOX_GOLDEN=update .venv/bin/python -m pytest -q tests/unit/test_plans_golden.py

Building a plan is pure (no I/O): the same arguments give the same plan, whoever builds it.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator
from dataclasses import dataclass, fields
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from trinbox._declare._group_names import GroupNames
from trinbox._declare._limits import ClaimLimits
from trinbox._declare._markers import Advisory, Default, Form, Lease, RowLock
from trinbox._declare._rates import Rate, Rates
from trinbox._declare._spec import ColumnSpec, KeyColumn, KeyLiteral, TableSpec
from trinbox._dialects._base import DeadLetter, Dialect
from trinbox._dialects._statement import Statement
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.plans import Plan, build_plan
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect

GOLDEN = Path(__file__).parent / "golden" / "plans"
UPDATE = os.environ.get("TRINBOX_GOLDEN") == "update"


@dataclass(frozen=True)
class Shape:
    """A table shape: which role columns it has, and its dead letter destination."""

    name: str
    group: bool = False
    fifo: bool = False
    behind: bool = False
    attempt: bool = False
    retry_after: bool = False
    processed_at: bool = False
    priority: bool = False
    origin_group: bool = False
    headers: bool = False
    result: bool = False
    dead_lettered_at: bool = False
    progress: bool = False
    schema: str | None = None
    dead_letter: DeadLetter | None = None


def full(name: str, **more: Any) -> Shape:
    """A shape with a group, an attempt, a due time and a processed mark, and ``more``."""
    return Shape(name, group=True, attempt=True, retry_after=True, processed_at=True, **more)


SHAPES = (
    Shape("plain"),
    Shape("plain-in-schema", schema="app", dead_letter=DeadLetter(table="jobs_dead", schema="app")),
    Shape("grouped", group=True),
    full("full"),
    Shape("attempt-only", attempt=True),
    Shape("retry-after-only", retry_after=True),
    Shape("processed-at-only", processed_at=True),
    full("priority", priority=True),
    full("dead-letter-group", origin_group=True, dead_letter=DeadLetter(group="dead")),
    full("dead-letter-table", dead_letter=DeadLetter(table="jobs_dead")),
    full(
        "dead-letter-group-dated",
        origin_group=True,
        dead_lettered_at=True,
        dead_letter=DeadLetter(group="dead"),
    ),
    full(
        "dead-letter-table-dated", dead_lettered_at=True, dead_letter=DeadLetter(table="jobs_dead")
    ),
    full("headers", headers=True, dead_letter=DeadLetter(table="jobs_dead")),
    full("result", result=True),
    full("progress", progress=True),
    full("fifo", fifo=True),
    full("fifo-priority", fifo=True, priority=True),
    full("fifo-behind", fifo=True, behind=True),
    full(
        "fifo-dead-letter-group", fifo=True, origin_group=True, dead_letter=DeadLetter(group="dead")
    ),
)


# The shapes a custom claim's plan is rendered for: its fetch and stamp read every column and
# test every claimable condition.
CUSTOM_CLAIM_SHAPES = ("plain", "full", "dead-letter-table")

# A relay's claim over groups by name (trinbox.outbox.relay), on lease tables with a group:
# every name, and whole names beside prefixes whose text a literal must keep as written (a
# quote, a backslash, LIKE's wildcards). Its dead letter group is passed over.
NAMED_GROUPS = {
    "every-name": GroupNames(),
    "names": GroupNames(exact=("orders.placed", "it's"), prefixes=("payments.", "100%_\\")),
}
NAMED_GROUP_SHAPES = ("grouped", "full", "dead-letter-group")

# A limited claim (InboxQueue.limit; lease, row lock, advisory): per key (a tenant column),
# for the whole queue, and both; on shapes with and without a group, a due time, a processed
# mark and a priority.
TENANT = ColumnSpec("tenant", "tenant", python_type=str)
LIMITS = {
    "limit-key": ClaimLimits(TENANT, 3),
    "limit-whole": ClaimLimits(whole=20),
    "limit-both": ClaimLimits(TENANT, 3, 20),
    # A rate per key (GCRA in a rate table), and every limit together.
    "limit-rate-key": ClaimLimits(
        TENANT, key_rate=Rate(100, per=timedelta(seconds=10)), rates=Rates("app_rates")
    ),
    "limit-rate-all": ClaimLimits(
        TENANT,
        3,
        20,
        key_rate=Rate(3, per=timedelta(seconds=1)),
        whole_rate=Rate(50, per=timedelta(minutes=1)),
        rates=Rates("app_rates", schema="ops"),
    ),
}

# A limited claim beside FIFO groups (lease form; row lock form on PostgreSQL): a group's head,
# or every group's (the dead letter group passed over), under the limits of the shape it names.
FIFO_LIMITS = {"fifo-priority": "limit-both", "fifo-dead-letter-group": "limit-key"}
LIMIT_SHAPES = ("plain", "grouped", "full", "priority")


def spec(shape: Shape, form: type[Form], *, tenant: bool = False) -> TableSpec:
    columns = [ColumnSpec("id", "id", "id", generated=True, python_type=int)]
    if tenant:
        columns.append(TENANT)
    if shape.group:
        columns.append(ColumnSpec("queue", "queue", "group", python_type=str))
    if shape.origin_group:
        columns.append(ColumnSpec("origin", "origin", "origin_group", python_type=str))
    if shape.priority:
        columns.append(ColumnSpec("priority", "priority", "priority", python_type=int))
    if shape.retry_after:
        columns.append(ColumnSpec("due", "due", "retry_after", generated=True))
    if shape.attempt:
        columns.append(ColumnSpec("attempt", "attempt", "attempt", generated=True, python_type=int))
    if form is Lease:
        columns.append(ColumnSpec("locked_until", "locked_until", "locked_until"))
    if shape.processed_at:
        columns.append(ColumnSpec("done", "done", "processed_at"))
    if shape.dead_lettered_at:
        columns.append(ColumnSpec("died", "died", "dead_lettered_at"))
    if shape.progress:
        columns.append(ColumnSpec("done_so_far", "done_so_far", "progress", python_type=float))
    columns.append(ColumnSpec("payload", "payload", "payload", python_type=bytes))
    if shape.headers:
        columns.append(ColumnSpec("headers", "headers", "headers", python_type=dict[str, str]))
    if shape.result:
        columns.append(ColumnSpec("receipt", "receipt", "result", python_type=dict[str, int]))
    key = (KeyLiteral("jobs-"), KeyColumn("id")) if form is Advisory else ()
    return TableSpec(
        table="jobs",
        schema=shape.schema,
        form=form,
        isolation=Default,
        columns=tuple(columns),
        key=key,
        key_template="jobs-{id}" if key else "",
        fifo=shape.fifo,
        delayed_rows_move_behind=shape.behind,
    )


@dataclass(frozen=True)
class Case:
    dialect: Dialect
    form: type[Form]
    shape: Shape
    every_group: bool = False
    count_at_claim: bool = False
    custom_claim: bool = False
    groups: str | None = None  # a key of NAMED_GROUPS
    limits: str | None = None  # a key of LIMITS

    @property
    def option(self) -> str:
        found = []
        if self.dialect.database_clock:
            found.append("database-clock")
        if self.every_group:
            found.append("every-group")
        if self.count_at_claim:
            found.append("count-at-claim")
        if self.custom_claim:
            found.append("custom-claim")
        if self.groups is not None:
            found.append(self.groups)
        if self.limits is not None:
            found.append(self.limits)
        return "-".join(found) or "host-clock"

    @property
    def path(self) -> Path:
        dialect = self.dialect.name.lower()
        return (
            GOLDEN / dialect / f"{self.form.__name__.lower()}-{self.shape.name}-{self.option}.sql"
        )

    def plan(self) -> Plan:
        return build_plan(
            self.dialect,
            spec(self.shape, self.form, tenant=self.limits is not None),
            self.shape.dead_letter,
            every_group=self.every_group,
            count_at_claim=self.count_at_claim,
            custom_claim=self.custom_claim,
            groups=None if self.groups is None else NAMED_GROUPS[self.groups],
            limits=None if self.limits is None else LIMITS[self.limits],
        )


def cases() -> Iterator[Case]:
    for make in (PostgresDialect, MySqlDialect, SqliteDialect):
        for database_clock in (False, True):
            dialect = make(database_clock=database_clock)
            for form in dialect.forms:
                for shape in SHAPES:
                    if shape.fifo and form is Advisory:
                        continue  # a FIFO group is claimed by the lease and row lock forms
                    yield Case(dialect, form, shape)
                    if shape.fifo:
                        yield Case(dialect, form, shape, every_group=True)
                    if form is RowLock and shape.attempt and not shape.fifo:
                        yield Case(dialect, form, shape, count_at_claim=True)
                    if form is not Advisory and shape.name in CUSTOM_CLAIM_SHAPES:
                        yield Case(dialect, form, shape, custom_claim=True)
                    if form is Lease and shape.name in NAMED_GROUP_SHAPES:
                        for groups in NAMED_GROUPS:
                            yield Case(dialect, form, shape, groups=groups)
                    if shape.name in LIMIT_SHAPES and (
                        form is Lease
                        or (form is RowLock and dialect.name != "SQLite")
                        or form is Advisory
                    ):
                        for limits in LIMITS:
                            if form is not Lease and LIMITS[limits].rates is not None:
                                continue  # a rate is the lease form's only, for now
                            yield Case(dialect, form, shape, limits=limits)
                    if shape.name in FIFO_LIMITS and (
                        form is Lease or (form is RowLock and dialect.name == "PostgreSQL")
                    ):
                        for every_group in (False, True):
                            limits = FIFO_LIMITS[shape.name]
                            yield Case(dialect, form, shape, every_group=every_group, limits=limits)


CASES = list(cases())


def rendered(case: Case) -> str:
    """The plan as the golden file holds it: each part by name, in the plan's field order,
    then the keeper's rounds over 1 and 3 deliveries."""
    found = case.plan()
    lines = [
        f"-- {case.dialect.name}, {case.form.__name__} form, table shape {case.shape.name!r}, "
        f"{case.option}",
        "-- Regenerate: TRINBOX_GOLDEN=update pytest tests/unit/test_plans_golden.py",
    ]

    def add(name: str, statement: Statement) -> None:
        params = ", ".join(statement.params) or "none"
        lines.extend(["", f"-- {name} (event {statement.event}; params: {params})", statement.sql])

    for part in fields(Plan):
        value = getattr(found, part.name)
        if part.name == "rounds":
            continue
        if (
            part.name
            in (
                "limit_lock",
                "limit_unlock",
                "rate_advance",
                "whole_rate_advance",
                "rate_key_index",
                "slot_rows",
                "slot_lock",
                "slot_release",
            )
            and value is None
        ):
            continue  # only a limited claim has them: the other files stay as they were
        if part.name == "extend_progress" and value == ():
            continue  # only a lease table with a Progress column has it
        if isinstance(value, int):
            lines.extend(["", f"-- {part.name}: {value}"])
            continue
        if value is None or value == ():
            lines.extend(["", f"-- {part.name}: none"])
        elif isinstance(value, Statement):
            add(part.name, value)
        else:
            for i, statement in enumerate(value):
                add(f"{part.name}[{i}]", statement)
    for count in (1, 3):
        round_ = found.extend_for(count)
        if not round_:
            lines.extend(["", f"-- rounds of {count}: none"])
        for i, statement in enumerate(round_):
            add(f"rounds of {count} [{i}]", statement)
    if found.extend_progress:
        for count in (1, 3):
            for i, statement in enumerate(found.extend_for(count, progress=True)):
                add(f"rounds of {count} with progress [{i}]", statement)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("case", CASES, ids=[str(c.path.relative_to(GOLDEN)) for c in CASES])
def test_plan_matches_its_golden_file(case: Case) -> None:
    text = rendered(case)
    if UPDATE:
        case.path.parent.mkdir(parents=True, exist_ok=True)
        case.path.write_text(text)
        return
    if not case.path.exists():
        pytest.fail(
            f"no golden file {case.path.relative_to(GOLDEN.parent.parent)}; write it with "
            f"TRINBOX_GOLDEN=update and review it"
        )
    golden = case.path.read_text()
    if text != golden:
        diff = "".join(
            difflib.unified_diff(
                golden.splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=f"golden/{case.path.relative_to(GOLDEN)}",
                tofile="rendered",
            )
        )
        pytest.fail(f"the plan differs from its golden file:\n{diff}", pytrace=False)


def test_every_golden_file_is_a_case() -> None:
    """A file no case renders any more is a leftover: delete it (or regenerate)."""
    expected = {c.path for c in CASES}
    found = set(GOLDEN.rglob("*.sql"))
    if UPDATE:
        for stale in found - expected:
            stale.unlink()
        return
    assert sorted(str(p.relative_to(GOLDEN)) for p in found - expected) == []


def test_building_a_plan_is_pure() -> None:
    """The same arguments give equal plans, built twice or by another dialect instance."""
    for case in CASES[:: max(1, len(CASES) // 20)]:
        again = Case(
            type(case.dialect)(database_clock=case.dialect.database_clock),
            case.form,
            case.shape,
            case.every_group,
            case.count_at_claim,
            case.custom_claim,
            case.groups,
            case.limits,
        )
        assert case.plan() == case.plan() == again.plan()
