"""Names are names (issue 9, item 2), without a database: statements are built as text and
parameter slots (trinbox/_dialects/_statement.py), so whatever a declared name holds, it stays
inside its quotes and the parameters keep their count and order.

The property: a row class of drawn names (tests/_names.py) is refused exactly where the
servers' rules say (the class statement for NUL and lone surrogates, the dialect for what its
server cannot hold), and otherwise every statement it renders is the statement of the same
table with plain names, each quoted name and literal swapped for the drawn one: no character
of a name becomes a placeholder or moves one. The end-to-end half, on real servers, is
tests/integration/matrix/test_names.py.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from typing import Annotated

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from trinbox import Advisory, Column, Id, Inbox, Lease, LockedUntil, Payload, RetryAfter
from trinbox._declare._inbox import spec_of
from trinbox._declare._spec import TableSpec
from trinbox._dialects._base import DeadLetter, Dialect
from trinbox._dialects._statement import P, Param, Sql, Statement, join, render
from trinbox._dialects.mysql import MySqlDialect
from trinbox._dialects.plans import build_plan
from trinbox._dialects.postgres import PostgresDialect
from trinbox._dialects.sqlite import SqliteDialect
from trinbox._errors import DeclarationError, IdentifierTooLong

from .._names import Shape, declare, fold, shapes

DIALECTS: dict[str, Dialect] = {
    "postgres": PostgresDialect(),
    "mariadb": MySqlDialect(),
    "sqlite": SqliteDialect(),
}
CELLS = [
    (d, f)
    for d in DIALECTS
    for f in ("row_lock", "lease", "advisory")
    if not (d == "sqlite" and f == "row_lock")
]
# The aliases and CTE names the dialects introduce.
INTERNAL = (
    "__lock",
    "__claimed",
    "__stamped",
    "__row",
    "__candidates",
    "moved",
    "__ids",
    "__leases",
)
# Parameters a statement binds besides the insert's columns (trinbox/_dialects/_base.py).
PARAMETERS = {"group", "now", "limit", "lease", "id", "token", "retry_at", "dest", "key", "ids"}
PARAMETERS |= {"channel"}  # PostgreSQL's NOTIFY
PARAMETERS |= {"held"}  # SQLite advisory: the keys the registry holds
PARAMETERS |= {"tokens", "id0", "token0"}  # the keeper's round (MySQL: a pair per row)


# -- the statement builder ----------------------------------------------------------------------


def test_text_is_never_scanned_for_parameters() -> None:
    # Every placeholder style and the old in-band marker, as text: none becomes a parameter.
    text = "`\u27e8id\u27e9 ? $1 %s :a @a`"
    sql = "SELECT " + text + " = " + P("id")
    assert render("x", sql, "qmark") == Statement("x", f"SELECT {text} = ?", ("id",))
    assert render("x", sql, "dollar") == Statement("x", f"SELECT {text} = $1", ("id",))
    assert render("x", sql, "format") == Statement(
        "x", "SELECT `\u27e8id\u27e9 ? $1 %%s :a @a` = %s", ("id",)
    )


def test_a_repeated_parameter_reuses_its_number_in_the_dollar_style_only() -> None:
    sql = join(" AND ", ["a = x", "b = y"]) + " OR " + join(", ", [P("n"), P("m"), P("n")])
    assert render("x", sql, "dollar") == Statement("x", "a = x AND b = y OR $1, $2, $1", ("n", "m"))
    qmark = Statement("x", "a = x AND b = y OR ?, ?, ?", ("n", "m", "n"))
    assert render("x", sql, "qmark") == qmark


def test_parts_are_text_and_slots_with_adjacent_text_merged() -> None:
    assert ("a" + P("x") + "b" + "c" + Sql() + "").parts == ("a", Param("x"), "bc")
    assert Sql("", Sql("a"), "b").parts == ("ab",)


@pytest.mark.parametrize("turn", [str, repr, lambda s: f"{s}", lambda s: format(s, "")])
def test_an_sql_is_never_formatted_into_text(turn: object) -> None:
    sql = "x = " + P("x")
    if turn is repr:
        assert repr(sql) == "Sql('x = ', Param(name='x'))"
        return
    with pytest.raises(TypeError, match="keeps its parameter slots"):
        turn(sql)  # type: ignore[operator]


# -- the property -----------------------------------------------------------------------------


def canonical(shape: Shape) -> Shape:
    """The same table with plain names: t0, s0, c0.., d0, and the literal L0."""
    return Shape(
        form=shape.form,
        table="t0",
        schema=None if shape.schema is None else "s0",
        columns={field: f"c{i}" for i, field in enumerate(shape.columns)},
        literal="L0" if shape.literal else "",
        dead=None if shape.dead is None else "d0",
    )


def dead_letter(shape: Shape) -> DeadLetter:
    if shape.dead is None:
        return DeadLetter(group="dead")
    return DeadLetter(table=shape.dead, schema=shape.schema)


def rendered(dialect: Dialect, spec: TableSpec, dead: DeadLetter) -> list[Statement]:
    found = build_plan(dialect, spec, dead).all()
    found += [dialect.lease_claim_begin(), dialect.plain_begin()]
    notify = dialect.notify_statement()
    return [*found, notify] if notify is not None else found


def placeholders(dialect: Dialect, statement: Statement) -> int:
    """How many placeholders a statement of plain names holds (``$n``: distinct numbers)."""
    if dialect.style == "qmark":
        return statement.sql.count("?")
    if dialect.style == "format":
        return statement.sql.replace("%%", "").count("%s")
    numbers = {int(n) for n in re.findall(r"\$(\d+)", statement.sql)}
    assert numbers == set(range(1, len(numbers) + 1)), statement
    return len(numbers)


def swap(dialect: Dialect, text: str, tokens: dict[str, str]) -> str:
    """``text`` with every token replaced, in one pass (a replacement is never read again)."""
    pattern = re.compile("|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True)))
    return pattern.sub(lambda m: tokens[m.group()], text)


def expected_tokens(dialect: Dialect, plain: Shape, drawn: Shape) -> dict[str, str]:
    """Each quoted plain name (and literal) and what the drawn one renders as."""
    pairs = [(plain.table, drawn.table)]
    pairs += [(plain.columns[f], drawn.columns[f]) for f in plain.columns]
    if plain.schema is not None and drawn.schema is not None:
        pairs.append((plain.schema, drawn.schema))
    if plain.dead is not None and drawn.dead is not None:
        pairs.append((plain.dead, drawn.dead))

    def text(sql: str) -> str:
        return sql.replace("%", "%%") if dialect.style == "format" else sql

    tokens = {dialect.quoted(p): text(dialect.quoted(d)) for p, d in pairs}
    tokens.update({dialect.literal(p): text(dialect.literal(d)) for p, d in pairs})
    if plain.literal:
        tokens[dialect.literal(plain.literal)] = text(dialect.literal(drawn.literal))
    return tokens


@pytest.mark.parametrize(("dialect_name", "form"), CELLS, ids=[f"{d}-{f}" for d, f in CELLS])
@settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_names_render_as_the_same_statements_or_are_refused(
    dialect_name: str, form: str, data: st.DataObject
) -> None:
    shape = data.draw(shapes(form, dialect_name))
    dialect = DIALECTS[dialect_name]
    try:
        spec = spec_of(declare(shape))
    except DeclarationError:
        assert shape.refused_at_declaration(), shape
        event("refused by the class statement")
        return
    assert not shape.refused_at_declaration(), shape
    dead = dead_letter(shape)
    refused = shape.refused_by(dialect_name) or shape.dead_refused_by(dialect_name)
    try:
        drawn = rendered(dialect, spec, dead)
    except DeclarationError as exc:
        assert refused, f"{shape}: {exc}"
        # The message names the rule and what was found.
        assert spec.label in str(exc), exc
        event("refused by the dialect")
        return
    assert not refused, shape
    # A name an alias could be taken for picks another alias (tested below), which the plain
    # table does not: leave those out here.
    assume(not {fold(n) for n in shape.names} & {fold(n) for n in INTERNAL})

    plain_shape = canonical(shape)
    plain = rendered(dialect, spec_of(declare(plain_shape)), dead_letter(plain_shape))
    tokens = expected_tokens(dialect, plain_shape, shape)
    by_plain = {plain_shape.columns[f]: shape.columns[f] for f in shape.columns}
    assert len(drawn) == len(plain)
    for got, want in zip(drawn, plain, strict=True):
        assert got.event == want.event
        # The parameters of the plain statement: as many as its placeholders, all known.
        assert placeholders(dialect, want) == len(want.params), want
        assert set(want.params) <= PARAMETERS | set(by_plain), want
        # The drawn one binds the same parameters in the same order, and its text is the
        # plain text with the names swapped.
        assert got.params == tuple(by_plain.get(p, p) for p in want.params), (got, want)
        assert got.sql == swap(dialect, want.sql, tokens), (got.sql, want.sql)
    event("rendered")


# -- internal aliases -------------------------------------------------------------------------


class LockNamed(Inbox[Advisory], table="__claimed", advisory_lock="k{id}"):
    """Every name one of the aliases: the id and the retry time ``__lock`` (folded alike by
    MariaDB), a data column ``__lock_2`` (the next choice), a payload ``moved``."""

    id: Annotated[int, Id(generated=True), Column("__lock")]
    retry_after: Annotated[datetime, RetryAfter(), Column("__LOCK")]
    spare: Annotated[str, Column("__lock_2")]
    payload: Annotated[bytes, Payload(), Column("moved")]


class RowNamed(Inbox[Lease], table="__row"):
    id: Annotated[int, Id(generated=True), Column("__claimed")]
    locked_until: Annotated[datetime | None, LockedUntil(), Column("__stamped")]
    payload: Annotated[bytes, Payload(), Column("__candidates")]


@pytest.mark.parametrize("dialect", DIALECTS.values(), ids=DIALECTS)
def test_the_lock_alias_is_never_a_declared_name(dialect: Dialect) -> None:
    (candidates,) = build_plan(dialect, spec_of(LockNamed)).claim
    assert f"AS {dialect.quoted('__lock_3')}" in candidates.sql
    assert candidates.params[-1] == "limit"
    # ORDER BY names the declared columns (the retry time, then the id), never the alias.
    order = candidates.sql.rsplit(" ORDER BY ", 1)[1]
    assert order.startswith(f"{dialect.quoted('__LOCK')}, {dialect.quoted('__lock')}")


def test_postgres_ctes_and_aliases_are_never_declared_names() -> None:
    pg = PostgresDialect()
    (claim,) = build_plan(pg, spec_of(RowNamed)).claim
    assert claim.sql.startswith('WITH __claimed_2 AS (SELECT "__claimed", ')
    assert '__stamped_2 AS (UPDATE "__row" AS __row_2 SET "__stamped" = $' in claim.sql
    assert 'WHERE __row_2."__claimed" = __claimed_2."__claimed")' in claim.sql
    (candidates,) = build_plan(pg, spec_of(LockNamed)).claim
    assert ") AS __candidates " in candidates.sql  # no declared name is __candidates here
    (move,) = build_plan(pg, spec_of(LockNamed), DeadLetter(table="moved_2")).dead_letter
    assert move.sql.startswith('WITH moved_3 AS (DELETE FROM "__claimed" WHERE "__lock" = $1')
    assert move.sql.endswith("FROM moved_3")


# -- what a dialect refuses ---------------------------------------------------------------------


class Plain(Inbox[Lease], table="jobs"):
    id: Annotated[int, Id(generated=True)]
    locked_until: Annotated[datetime | None, LockedUntil()]


def renamed(table: str = "jobs", column: str = "id", schema: str | None = None) -> TableSpec:
    spec = spec_of(Plain)
    columns = (replace(spec.columns[0], column=column), *spec.columns[1:])
    return replace(spec, table=table, schema=schema, columns=columns)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            renamed(column="a\U0001f600"),
            r"^jobs \(Plain\): MySQL and MariaDB names hold characters up to U\+FFFF only, "
            r"found '\U0001f600' \(U\+1F600\) in the column 'a\U0001f600'; use a name without it$",
        ),
        (
            renamed(table="jobs\t"),
            r"^jobs\t \(Plain\): MySQL and MariaDB names do not end in whitespace, found the "
            r"table 'jobs\\t'; drop the trailing '\\t'$",
        ),
        (
            renamed(schema="app "),
            r"^app \.jobs \(Plain\): MySQL and MariaDB names do not end in whitespace, found the "
            r"schema 'app '; drop the trailing ' '$",
        ),
        (
            renamed(table="#mysql50#jobs"),
            r"^#mysql50#jobs \(Plain\): MariaDB reads a table or schema name beginning with "
            r"'#mysql50#' as a file name, found the table '#mysql50#jobs'; use a name without "
            r"that prefix$",
        ),
    ],
    ids=["astral", "trailing-tab", "trailing-space-schema", "mysql50"],
)
def test_mysql_refuses_what_its_servers_cannot_hold(spec: TableSpec, message: str) -> None:
    with pytest.raises(DeclarationError, match=message):
        MySqlDialect().check(spec)


def test_mysql_takes_the_file_name_prefix_on_a_column_and_a_space_inside_a_name() -> None:
    MySqlDialect().check(renamed(table="my jobs", column="#mysql50#id"))


def test_mysql_refuses_a_dead_letter_table_it_cannot_hold() -> None:
    with pytest.raises(DeclarationError, match=r"found the dead letter table 'dead '"):
        build_plan(MySqlDialect(), renamed(), DeadLetter(table="dead "))


@pytest.mark.parametrize("table", ["sqlite_jobs", "SQLite_jobs"])
def test_sqlite_refuses_the_table_names_it_reserves(table: str) -> None:
    with pytest.raises(
        DeclarationError,
        match=rf"^{table} \(Plain\): SQLite reserves table names beginning with 'sqlite_' for "
        rf"its own tables, found the table '{table}'; rename the table$",
    ):
        SqliteDialect().check(renamed(table=table))
    SqliteDialect().check(renamed(column="sqlite_id"))  # a column may be named so


def test_a_dead_letter_table_is_held_to_the_rules_of_every_name() -> None:
    with pytest.raises(
        DeclarationError, match=r"no NUL character .* found one in the dead letter table 'd\\x00'"
    ):
        build_plan(PostgresDialect(), renamed(), DeadLetter(table="d\x00"))
    with pytest.raises(IdentifierTooLong, match="PostgreSQL identifiers are at most 63 bytes"):
        build_plan(PostgresDialect(), renamed(), DeadLetter(table="é" * 32))


def test_a_publish_is_held_to_the_dialect_rules_too() -> None:
    # A process that only publishes never mounts: the insert checks the names itself.
    with pytest.raises(DeclarationError, match="names do not end in whitespace"):
        MySqlDialect().insert(renamed(column="id "))
    PostgresDialect().insert(renamed(column="id "))
