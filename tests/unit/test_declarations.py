"""Declaring a queue table with a class statement (docs/reference.md#roles,
docs/reference.md#declaration-errors; docs/design.md#what-a-user-writes).

Every declaration error that applies in Python has a test pinning its whole message: the rule,
what was found, and the fix. The positive tests pin the compiled ``TableSpec``.
"""

from __future__ import annotations

import dataclasses
import re
import types
from datetime import datetime
from typing import Annotated, Any, ClassVar

import pytest

from trinbox import (
    Advisory,
    Attempt,
    Column,
    Default,
    Generated,
    Group,
    Id,
    Immediate,
    Inbox,
    InboxQueue,
    InboxSpec,
    Lease,
    LockedUntil,
    OriginGroup,
    Payload,
    ProcessedAt,
    RetryAfter,
    RowLock,
    Serializable,
)
from trinbox._declare._inbox import spec_of
from trinbox._declare._spec import ColumnSpec, TableSpec
from trinbox.errors import DeclarationError
from trinbox.typing import KeyColumn, KeyLiteral


def refused(message: str) -> pytest.RaisesExc[DeclarationError]:
    """Expect a ``DeclarationError`` whose whole message is ``message``."""
    return pytest.raises(DeclarationError, match=f"^{re.escape(message)}$")


# -- the class statement's keywords ------------------------------------------------------------


def test_table_is_required() -> None:
    with refused(
        "class test_table_is_required.<locals>.Job: a queue table names its table, found no "
        'table=; add it to the class statement, like class Job(Inbox[Lease], table="jobs")'
    ):

        class Job(Inbox[RowLock]):
            id: Annotated[int, Id()]


def test_table_is_not_empty() -> None:
    with refused(
        "class test_table_is_not_empty.<locals>.Job: table= names the table, found ''; give a "
        "non-empty name"
    ):

        class Job(Inbox[RowLock], table=""):
            id: Annotated[int, Id()]


def test_table_holds_no_dot() -> None:
    with refused(
        "class test_table_holds_no_dot.<locals>.Job: table= holds the table's name alone, found "
        "a dot in 'app.jobs'; name the schema with schema=: table='jobs', schema='app'"
    ):

        class Job(Inbox[RowLock], table="app.jobs"):
            id: Annotated[int, Id()]


def test_schema_holds_no_dot() -> None:
    with refused(
        "class test_schema_holds_no_dot.<locals>.Job: schema= holds the schema's name alone, "
        "found a dot in 'db.app'; name only the schema (a database name cannot be given)"
    ):

        class Job(Inbox[RowLock], table="jobs", schema="db.app"):
            id: Annotated[int, Id()]


def test_schema_is_not_empty() -> None:
    with refused(
        "class test_schema_is_not_empty.<locals>.Job: schema= names the table's schema, found "
        "''; give a non-empty name or leave schema= out"
    ):

        class Job(Inbox[RowLock], table="jobs", schema=""):
            id: Annotated[int, Id()]


def test_unknown_class_keyword() -> None:
    with refused(
        "class test_unknown_class_keyword.<locals>.Job: the class statement takes the keywords "
        "table=, schema=, advisory_lock=, spec=, found tabel=; remove or correct it"
    ):

        class Job(Inbox[RowLock], tabel="jobs"):  # type: ignore[call-arg]
            id: Annotated[int, Id()]


def test_unknown_class_keywords_are_listed() -> None:
    with refused(
        "class test_unknown_class_keywords_are_listed.<locals>.Job: the class statement takes "
        "the keywords table=, schema=, advisory_lock=, spec=, found isolation=, lock=; remove "
        "or correct them"
    ):

        class Job(Inbox[RowLock], table="jobs", lock="x", isolation="serializable"):  # type: ignore[call-arg]
            id: Annotated[int, Id()]


# -- type arguments: the claim form and the isolation level ----------------------------------------


def test_plain_inbox_names_no_form() -> None:
    with refused(
        "class test_plain_inbox_names_no_form.<locals>.Job: the claim form is the type argument "
        "of Inbox, found plain Inbox; write Inbox[RowLock], Inbox[Lease] or Inbox[Advisory]"
    ):

        class Job(Inbox, table="jobs"):  # type: ignore[type-arg]
            id: Annotated[int, Id()]


def test_unknown_form_argument() -> None:
    with refused(
        "class test_unknown_form_argument.<locals>.Job: the claim form is the type argument of "
        "Inbox, found int; write Inbox[RowLock], Inbox[Lease] or Inbox[Advisory]"
    ):

        class Job(Inbox[int], table="jobs"):  # type: ignore[type-var]
            id: Annotated[int, Id()]


def test_unknown_isolation_argument() -> None:
    with refused(
        "class test_unknown_isolation_argument.<locals>.Job: the second type argument of Inbox is "
        "an isolation level or SQLite mode, found str; use one of Default, ReadUncommitted, "
        "ReadCommitted, RepeatableRead, Serializable, Deferred, Immediate, Exclusive"
    ):

        class Job(Inbox[RowLock, str], table="jobs"):  # type: ignore[type-var]
            id: Annotated[int, Id()]


# -- field roles and columns ---------------------------------------------------------------------


def test_field_plays_one_role() -> None:
    with refused(
        "class test_field_plays_one_role.<locals>.Job: a field plays one role, found field 'id' "
        "with Id and Group; keep one and give the other its own field"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id(), Group()]


def test_field_takes_its_role_once() -> None:
    with refused(
        "class test_field_takes_its_role_once.<locals>.Job: a field takes its role once, found "
        "Attempt() 2 times on 'attempt'; keep one"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id()]
            attempt: Annotated[int, Attempt(), Attempt(generated=True)]


def test_role_played_by_one_field() -> None:
    with refused(
        "class test_role_played_by_one_field.<locals>.Job: each role is played by at most one "
        "field, found Attempt on both 'attempt' and 'tries'; keep it on one of them"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id()]
            attempt: Annotated[int, Attempt()]
            tries: Annotated[int, Attempt()]


def test_column_named_twice_through_a_rename() -> None:
    with refused(
        "class test_column_named_twice_through_a_rename.<locals>.Job: each column is named "
        "once, found column 'tenant' for both fields 'tenant' and 'owner'; rename one of them "
        "with Column(..)"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id()]
            tenant: str
            owner: Annotated[str, Column("tenant")]


def test_column_rename_is_not_empty() -> None:
    with refused(
        "class test_column_rename_is_not_empty.<locals>.Job: a column rename names a column, "
        "found Column('') on 'tenant'; give the column's name or drop Column(..)"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id()]
            tenant: Annotated[str, Column("")]


def test_field_has_one_column() -> None:
    with refused(
        "class test_field_has_one_column.<locals>.Job: a field has one column, found "
        "Column('a') and Column('b') on 'tenant'; keep one"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id()]
            tenant: Annotated[str, Column("a"), Column("b")]


# -- names -------------------------------------------------------------------------------------


def test_a_name_may_hold_any_text_but_nul() -> None:
    # Quotes, placeholders of every style, the old parameter marker, percent signs, spaces:
    # names are kept as given, and the dialects quote them.
    class Job(Inbox[Advisory], table="j\"o`b's ?", schema="a%s", advisory_lock="\u27e8k\u27e9{id}"):
        id: Annotated[int, Id(), Column("\u27e8id\u27e9 $1 %% :a")]

    spec = spec_of(Job)
    assert (spec.table, spec.schema) == ("j\"o`b's ?", "a%s")
    assert spec.id.column == "\u27e8id\u27e9 $1 %% :a"
    assert spec.key == (KeyLiteral("\u27e8k\u27e9"), KeyColumn("\u27e8id\u27e9 $1 %% :a"))


@pytest.mark.parametrize(
    ("keywords", "column", "found"),
    [
        ({"table": "jo\x00bs"}, "id", "the table 'jo\\x00bs'"),
        ({"table": "jobs", "schema": "a\x00"}, "id", "the schema 'a\\x00'"),
        ({"table": "jobs"}, "i\x00d", "the column of field 'id' 'i\\x00d'"),
        (
            {"table": "jobs", "advisory_lock": "k\x00{id}"},
            "id",
            "the lock key literal 'k\\x00'",
        ),
    ],
    ids=["table", "schema", "column", "key-literal"],
)
def test_a_name_holds_no_nul(keywords: dict[str, str], column: str, found: str) -> None:
    base: Any = Inbox[Advisory] if "advisory_lock" in keywords else Inbox[RowLock]
    annotations = {"id": Annotated[int, Id(), Column(column)]}
    with refused(
        "class Job: a name or key literal holds no NUL character (no database takes one), found "
        f"one in {found}; remove it"
    ):
        types.new_class("Job", (base,), keywords, lambda ns: ns.update(__annotations__=annotations))


def test_a_name_is_text_that_encodes_as_utf8() -> None:
    with refused(
        "class test_a_name_is_text_that_encodes_as_utf8.<locals>.Job: a name or key literal is "
        "text that encodes as UTF-8, found the lone surrogate '\\ud800' in the column of field "
        "'tenant' 'a\\ud800'; write the character it stands for, or remove it"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id()]
            tenant: Annotated[str, Column("a\ud800")]


def test_a_spec_key_literal_holds_no_nul() -> None:
    spec = InboxSpec("jobs", "id").advisory([KeyLiteral("jobs\x00"), KeyColumn("id")])
    with refused(
        "class test_a_spec_key_literal_holds_no_nul.<locals>.Job: a name or key literal holds no "
        "NUL character (no database takes one), found one in the lock key literal 'jobs\\x00'; "
        "remove it"
    ):

        class Job(Inbox[Advisory], spec=spec):
            id: int


def test_role_is_written_as_an_instance() -> None:
    with refused(
        "class test_role_is_written_as_an_instance.<locals>.Job: a role is an instance in the "
        "annotation, found the class Id on 'id'; write Id()"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id]


def test_role_on_a_classvar() -> None:
    with refused(
        "class test_role_on_a_classvar.<locals>.Job: a role or Column(..) belongs to a field "
        "with a column, found one on the ClassVar 'attempts'; make it an instance field or drop "
        "the role"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id()]
            attempts: ClassVar[Annotated[int, Attempt()]] = 3


def test_plain_classvar_is_no_column() -> None:
    class Job(Inbox[RowLock], table="jobs"):
        id: Annotated[int, Id()]
        retries: ClassVar[int] = 3

    assert [c.field for c in spec_of(Job).columns] == ["id"]


def test_id_field_is_required() -> None:
    with refused(
        "class test_id_field_is_required.<locals>.Job: a queue table has exactly one id field, "
        "found none; mark it, like id: Annotated[int, Id(generated=True)]"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: int
            payload: Annotated[bytes, Payload()]


def test_annotations_resolve_when_the_class_is_made() -> None:
    with refused(
        "class test_annotations_resolve_when_the_class_is_made.<locals>.Job: field annotations "
        "are read when the class is created, found a name that does not resolve (name "
        "'Missing' is not defined); import it at module level"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id()]
            other: Missing  # type: ignore[name-defined]  # noqa: F821


# -- form and column combinations ----------------------------------------------------------------


def test_lease_needs_locked_until() -> None:
    with refused(
        "class test_lease_needs_locked_until.<locals>.Job: the lease form writes its expiry "
        "into a LockedUntil field, found none; add one, like locked_until: "
        "Annotated[datetime | None, LockedUntil()]"
    ):

        class Job(Inbox[Lease], table="jobs"):
            id: Annotated[int, Id()]


def test_lease_takes_no_advisory_lock() -> None:
    with refused(
        "class test_lease_takes_no_advisory_lock.<locals>.Job: advisory_lock= selects the "
        "advisory form, found it on an Inbox[Lease] table; drop advisory_lock= or declare "
        "Inbox[Advisory]"
    ):

        class Job(Inbox[Lease], table="jobs", advisory_lock="jobs-{id}"):
            id: Annotated[int, Id()]
            locked_until: Annotated[datetime | None, LockedUntil()]


def test_advisory_needs_advisory_lock() -> None:
    with refused(
        "class test_advisory_needs_advisory_lock.<locals>.Job: the advisory form holds each row "
        'by a lock on its key, found no advisory_lock=; add one, like advisory_lock="jobs-{id}"'
    ):

        class Job(Inbox[Advisory], table="jobs"):
            id: Annotated[int, Id()]


def test_advisory_takes_no_locked_until() -> None:
    with refused(
        "class test_advisory_takes_no_locked_until.<locals>.Job: the advisory form holds rows "
        "by their key, not a lease, found a LockedUntil field on an Inbox[Advisory] table; drop "
        "the LockedUntil field (to order a group, put the group's field in the key)"
    ):

        class Job(Inbox[Advisory], table="jobs", advisory_lock="jobs-{id}"):
            id: Annotated[int, Id()]
            locked_until: Annotated[datetime | None, LockedUntil()]


def test_row_lock_takes_no_locked_until() -> None:
    with refused(
        "class test_row_lock_takes_no_locked_until.<locals>.Job: a LockedUntil field selects "
        "the lease form, found one on an Inbox[RowLock] table; declare Inbox[Lease] or drop the "
        "field"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id()]
            locked_until: Annotated[datetime | None, LockedUntil()]


def test_origin_group_needs_a_group() -> None:
    with refused(
        "class test_origin_group_needs_a_group.<locals>.Job: an OriginGroup field keeps the "
        "group a dead letter came from, found OriginGroup on 'dead_from' of a table without a "
        "Group field (its dead letters move to a table, which keeps every column); add a Group "
        "field or drop the OriginGroup field"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id()]
            dead_from: Annotated[str | None, OriginGroup()] = None


def test_origin_group_is_not_generated() -> None:
    with refused(
        "class test_origin_group_is_not_generated.<locals>.Job: an OriginGroup field is "
        "written by the move into a dead letter group (NULL until then), found "
        "OriginGroup(generated=True) on 'dead_from'; drop generated=True"
    ):

        class Job(Inbox[RowLock], table="jobs"):
            id: Annotated[int, Id()]
            queue: Annotated[str, Group()]
            dead_from: Annotated[str | None, OriginGroup(generated=True)] = None


def test_origin_group_is_never_published() -> None:
    class Job(Inbox[RowLock], table="jobs"):
        id: Annotated[int, Id()]
        queue: Annotated[str, Group()]
        dead_from: Annotated[str | None, OriginGroup()] = None

    spec = spec_of(Job)
    assert spec.origin_group == ColumnSpec(
        "dead_from", "dead_from", "origin_group", False, str | None
    )
    assert [c.column for c in spec.insert_columns] == ["id", "queue"]
    assert Job(id=1, queue="q").dead_from is None


def test_row_lock_takes_no_advisory_lock() -> None:
    with refused(
        "class test_row_lock_takes_no_advisory_lock.<locals>.Job: advisory_lock= selects the "
        "advisory form, found it on an Inbox[RowLock] table; declare Inbox[Advisory] or drop "
        "advisory_lock="
    ):

        class Job(Inbox[RowLock], table="jobs", advisory_lock="jobs-{id}"):
            id: Annotated[int, Id()]


# -- the lock key template -----------------------------------------------------------------------


def _unclosed(template: str) -> str:
    return (
        f"every '{{' of a lock key opens a placeholder closed by '}}', found an unclosed '{{' "
        f"in advisory_lock={template!r}; close it or remove it"
    )


def _unopened(template: str) -> str:
    return (
        f"every '}}' of a lock key closes a placeholder, found a '}}' without '{{' in "
        f"advisory_lock={template!r}; remove it or open the placeholder"
    )


def _empty(template: str) -> str:
    return (
        f"a lock key placeholder names a field, found empty braces in advisory_lock="
        f"{template!r}; write the field's name inside them, like '{{id}}'"
    )


@pytest.mark.parametrize(
    ("template", "rule"),
    [
        pytest.param("jobs-{id", _unclosed("jobs-{id"), id="open-without-close"),
        pytest.param("jobs-{ {id}", _unclosed("jobs-{ {id}"), id="open-before-placeholder"),
        pytest.param("{{id}}", _unclosed("{{id}}"), id="doubled-braces-escape-nothing"),
        pytest.param("jobs-id}", _unopened("jobs-id}"), id="close-without-open"),
        pytest.param("jobs-{id}}", _unopened("jobs-{id}}"), id="close-after-placeholder"),
        pytest.param("jobs-}{id}", _unopened("jobs-}{id}"), id="close-before-open"),
        pytest.param("jobs-{}", _empty("jobs-{}"), id="empty-braces"),
        pytest.param("jobs-{ }", _empty("jobs-{ }"), id="blank-braces"),
    ],
)
def test_lock_key_braces(template: str, rule: str) -> None:
    with refused(f"class test_lock_key_braces.<locals>.Job: {rule}"):

        class Job(Inbox[Advisory], table="jobs", advisory_lock=template):
            id: Annotated[int, Id()]


def test_lock_key_placeholder_names_a_field() -> None:
    with refused(
        "class test_lock_key_placeholder_names_a_field.<locals>.Job: a lock key placeholder "
        "names a field of the row, found {tenant_name} in advisory_lock='jobs-{tenant_name}' "
        "and no field 'tenant_name' (fields: id, tenant); name one of them"
    ):
        # The placeholder names the field, never its column.
        class Job(Inbox[Advisory], table="jobs", advisory_lock="jobs-{tenant_name}"):
            id: Annotated[int, Id()]
            tenant: Annotated[str, Column("tenant_name")]


# -- spec= (the manual builder on a class) -------------------------------------------------------


def test_spec_takes_no_table_keywords() -> None:
    spec = InboxSpec("jobs", "id")
    with refused(
        "class test_spec_takes_no_table_keywords.<locals>.Job: spec= describes the whole table, "
        "found it beside schema=, table=; declare those in the InboxSpec (InboxSpec(table, id), "
        ".within(schema), .advisory([...]))"
    ):

        class Job(Inbox[RowLock], spec=spec, table="jobs", schema="app"):
            id: int


def test_spec_is_an_inbox_spec() -> None:
    with refused(
        "class test_spec_is_an_inbox_spec.<locals>.Job: spec= takes an InboxSpec, found 'jobs'; "
        "build one with InboxSpec(..)"
    ):

        class Job(Inbox[RowLock], spec="jobs"):  # type: ignore[arg-type]
            id: int


def test_spec_form_is_the_type_argument() -> None:
    spec = InboxSpec("jobs", "id")
    with refused(
        "class test_spec_form_is_the_type_argument.<locals>.Job: the class's type argument "
        "names the spec's claim form, found an InboxSpec of the RowLock form on Inbox[Lease]; "
        "declare Inbox[RowLock] or build the spec with .lease(..) for Lease"
    ):

        class Job(Inbox[Lease], spec=spec):
            id: int


def test_spec_form_is_the_type_argument_advisory() -> None:
    spec = InboxSpec("jobs", "id").lease("locked_until")
    with refused(
        "class test_spec_form_is_the_type_argument_advisory.<locals>.Job: the class's type "
        "argument names the spec's claim form, found an InboxSpec of the Lease form on "
        "Inbox[Advisory]; declare Inbox[Lease] or build the spec with .advisory([...]) for "
        "Advisory"
    ):

        class Job(Inbox[Advisory], spec=spec):
            id: int
            locked_until: datetime | None


def test_spec_names_every_role() -> None:
    spec = InboxSpec("jobs", "id")
    with refused(
        "class test_spec_names_every_role.<locals>.Job: spec= names every role and column, "
        "found Attempt(), Column('tries') on field 'attempt'; drop it from the annotation and "
        "say it in the spec"
    ):

        class Job(Inbox[RowLock], spec=spec):
            id: int
            attempt: Annotated[int, Attempt(), Column("tries")]


def test_spec_columns_are_fields() -> None:
    spec = InboxSpec("jobs", "id").attempt("attempt")
    with refused(
        "class test_spec_columns_are_fields.<locals>.Job: every column the spec names is a "
        "field of the row, found no field 'attempt'; add the field or pass field= to the setter"
    ):

        class Job(Inbox[RowLock], spec=spec):
            id: int


def test_spec_role_given_twice() -> None:
    with refused(
        "InboxSpec('jobs'): each role is set once, found .attempt(..) given twice; drop one of "
        "the calls"
    ):
        InboxSpec("jobs", "id").attempt("attempt").attempt("tries")


def test_spec_lease_after_advisory() -> None:
    # mypy refuses this chain (.lease takes an InboxSpec[RowLock]); untyped code meets this.
    spec: Any = InboxSpec("jobs", "id").advisory([KeyColumn("id")])
    with refused(
        "InboxSpec('jobs'): a table has one claim form, found Advisory and then Lease; keep one "
        "of .lease(..) and .advisory(..)"
    ):
        spec.lease("locked_until")


def test_spec_advisory_after_lease() -> None:
    spec: Any = InboxSpec("jobs", "id").lease("locked_until")
    with refused(
        "InboxSpec('jobs'): a table has one claim form, found Lease and then Advisory; keep one "
        "of .lease(..) and .advisory(..)"
    ):
        spec.advisory([KeyColumn("id")])


def test_spec_advisory_key_has_parts() -> None:
    with refused(
        "InboxSpec('jobs'): an advisory key is a non-empty sequence of KeyLiteral and KeyColumn "
        "parts, found []; write [KeyLiteral('jobs-'), KeyColumn('id')]"
    ):
        InboxSpec("jobs", "id").advisory([])


def test_spec_advisory_key_parts_are_key_parts() -> None:
    parts: Any = ["jobs-", KeyColumn("id")]
    with refused(
        "InboxSpec('jobs'): an advisory key is a non-empty sequence of KeyLiteral and KeyColumn "
        "parts, found ['jobs-', KeyColumn(column='id')]; write [KeyLiteral('jobs-'), "
        "KeyColumn('id')]"
    ):
        InboxSpec("jobs", "id").advisory(parts)


def test_spec_key_column_is_a_column() -> None:
    spec = InboxSpec("jobs", "id").advisory([KeyLiteral("jobs-"), KeyColumn("tenant_name")])
    with refused(
        "class test_spec_key_column_is_a_column.<locals>.Job: an advisory key column is a "
        "column of the table, found KeyColumn('tenant_name') and no column 'tenant_name' "
        "(columns: id, tenant); name one of them"
    ):

        class Job(Inbox[Advisory], spec=spec):
            id: int
            tenant: str


def test_spec_field_plays_one_role() -> None:
    spec = InboxSpec("jobs", "id").attempt("tries").retry_after("tries")
    with refused(
        "class test_spec_field_plays_one_role.<locals>.Job: a field plays one role, found field "
        "'tries' named by .attempt(..) and .retry_after(..); give each role its own column"
    ):

        class Job(Inbox[RowLock], spec=spec):
            id: int
            tries: int


# -- outside the class statement -----------------------------------------------------------------


def test_spec_of_needs_a_row_class() -> None:
    with refused(
        "a queue is declared by a subclass of Inbox, found <class 'int'>; declare class "
        "Row(Inbox[Lease], table=...)"
    ):
        spec_of(int)


def test_queue_needs_a_row_class() -> None:
    row: Any = dict
    with refused(
        "a queue is declared by a subclass of Inbox, found <class 'dict'>; declare class "
        "Row(Inbox[Lease], table=...)"
    ):
        InboxQueue(row, "jobs")


def test_lease_setting_needs_a_lease_table() -> None:
    class Job(Inbox[Advisory], table="jobs", advisory_lock="jobs-{id}"):
        id: Annotated[int, Id()]

    queue: Any = InboxQueue(Job, "jobs")  # mypy refuses .lease(..) here: tests/typing
    with refused(
        "jobs (test_lease_setting_needs_a_lease_table.<locals>.Job): only a lease table takes "
        ".lease(..), found an Inbox[Advisory] table with no LockedUntil field; declare "
        "Inbox[Lease] with a LockedUntil field or drop .lease(..)"
    ):
        queue.lease(30)


# -- what a valid declaration compiles to --------------------------------------------------------


class EveryRole(Inbox[Lease], table="email_jobs", schema="app"):
    """Every role, renamed columns, generated columns, data columns between the roles."""

    payload: Annotated[bytes, Payload()]
    customer: str
    job_id: Annotated[int, Id(generated=True), Column("id")]
    name: Annotated[str, Group()]
    created: Annotated[datetime, Generated()]
    locked_until: Annotated[datetime | None, LockedUntil(generated=True)]
    attempt: Annotated[int, Attempt(generated=True), Column("tries")]
    retry_after: Annotated[datetime, RetryAfter()]
    processed_at: Annotated[datetime | None, ProcessedAt(generated=True)]
    priority: Annotated[int, Column("prio")]


def test_compiled_spec() -> None:
    assert spec_of(EveryRole) == TableSpec(
        table="email_jobs",
        schema="app",
        form=Lease,
        isolation=Default,
        columns=(
            ColumnSpec("payload", "payload", "payload", False, bytes),
            ColumnSpec("customer", "customer", "", False, str),
            ColumnSpec("job_id", "id", "id", True, int),
            ColumnSpec("name", "name", "group", False, str),
            ColumnSpec("created", "created", "", True, datetime),
            ColumnSpec("locked_until", "locked_until", "locked_until", True, datetime | None),
            ColumnSpec("attempt", "tries", "attempt", True, int),
            ColumnSpec("retry_after", "retry_after", "retry_after", False, datetime),
            ColumnSpec("processed_at", "processed_at", "processed_at", True, datetime | None),
            ColumnSpec("priority", "prio", "", False, int),
        ),
    )
    assert spec_of(EveryRole).row_type is EveryRole
    assert spec_of(EveryRole).qualified_name == "app.email_jobs"
    assert spec_of(EveryRole).label == "app.email_jobs (EveryRole)"


def test_roles_by_name() -> None:
    spec = spec_of(EveryRole)
    assert spec.id.column == "id"
    assert spec.group is not None and spec.group.column == "name"
    assert spec.attempt is not None and spec.attempt.column == "tries"
    assert spec.retry_after is not None and spec.retry_after.field == "retry_after"
    assert spec.locked_until is not None and spec.locked_until.generated
    assert spec.processed_at is not None and spec.processed_at.role == "processed_at"
    assert spec.payload is not None and spec.payload.python_type is bytes
    assert [c.column for c in spec.data] == ["customer", "created", "prio"]


def test_insert_columns_are_roles_then_data_without_generated() -> None:
    # Roles in the order id, group, retry_after, attempt, locked_until, processed_at, payload;
    # then data columns in declaration order; generated columns (job_id, created, attempt,
    # locked_until, processed_at) are the database's to fill.
    assert [c.column for c in spec_of(EveryRole).insert_columns] == [
        "name",
        "retry_after",
        "payload",
        "customer",
        "prio",
    ]


def test_row_mode_table_has_no_payload() -> None:
    class Ticket(Inbox[RowLock], table="tickets"):
        id: Annotated[int, Id()]
        subject: str

    spec = spec_of(Ticket)
    assert spec.payload is None
    assert spec.form is RowLock
    assert [c.column for c in spec.insert_columns] == ["id", "subject"]


def test_isolation_is_the_second_type_argument() -> None:
    class Job(Inbox[Advisory, Immediate], table="jobs", advisory_lock="jobs"):
        id: Annotated[int, Id()]

    class Other(Inbox[RowLock, Serializable], table="others"):
        id: Annotated[int, Id()]

    assert spec_of(Job).isolation is Immediate
    assert spec_of(Other).isolation is Serializable


def test_key_parts_read_columns_of_named_fields() -> None:
    class Job(Inbox[Advisory], table="jobs", advisory_lock="jobs-{tenant}/{id}!"):
        job_id: Annotated[int, Id(), Column("id")]
        id: Annotated[int, Column("seq")]
        tenant: Annotated[str, Column("tenant_name")]

    spec = spec_of(Job)
    assert spec.key == (
        KeyLiteral("jobs-"),
        KeyColumn("tenant_name"),
        KeyLiteral("/"),
        KeyColumn("seq"),
        KeyLiteral("!"),
    )
    assert spec.key_template == "jobs-{tenant}/{id}!"


def test_key_without_placeholders_is_one_lock() -> None:
    class Job(Inbox[Advisory], table="jobs", advisory_lock="all-jobs"):
        id: Annotated[int, Id()]

    assert spec_of(Job).key == (KeyLiteral("all-jobs"),)


def test_placeholder_only_key() -> None:
    class Job(Inbox[Advisory], table="jobs", advisory_lock="{ id }"):
        id: Annotated[int, Id()]

    assert spec_of(Job).key == (KeyColumn("id"),)


def test_class_becomes_a_keyword_only_dataclass() -> None:
    job = EveryRole(
        payload=b"{}",
        customer="c1",
        job_id=7,
        name="emails",
        created=datetime(2030, 1, 1),
        locked_until=None,
        attempt=1,
        retry_after=datetime(2030, 1, 1),
        processed_at=None,
        priority=0,
    )
    assert dataclasses.is_dataclass(EveryRole)
    assert all(f.kw_only for f in dataclasses.fields(EveryRole))
    assert [f.name for f in dataclasses.fields(EveryRole)][:3] == ["payload", "customer", "job_id"]
    assert job == dataclasses.replace(job)
    assert repr(job).startswith("EveryRole(payload=b'{}', customer='c1', job_id=7,")
    positional: Any = EveryRole
    with pytest.raises(TypeError, match=r"takes 1 positional argument but 2 were given"):
        positional(b"{}")


def test_subclass_declares_its_own_table() -> None:
    class Job(Inbox[Lease], table="jobs"):
        id: Annotated[int, Id()]
        locked_until: Annotated[datetime | None, LockedUntil()]

    class Archived(Job, table="jobs_archive"):
        archived_at: datetime

    spec = spec_of(Archived)
    assert (spec.table, spec.form) == ("jobs_archive", Lease)
    assert [c.field for c in spec.columns] == ["id", "locked_until", "archived_at"]
    assert spec_of(Job).table == "jobs"


def test_a_group_s_name_fits_trinbox_s_key_columns() -> None:
    class Grouped(Inbox[Lease], table="grouped_names"):
        id: Annotated[int, Id(generated=True)]
        queue: Annotated[str, Group()]
        locked_until: Annotated[datetime | None, LockedUntil()]
        payload: Annotated[bytes, Payload()]

    class Single(Inbox[Lease], table="single_names"):
        id: Annotated[int, Id(generated=True)]
        locked_until: Annotated[datetime | None, LockedUntil()]
        payload: Annotated[bytes, Payload()]

    assert InboxQueue(Grouped, "g" * 191).group == "g" * 191
    with pytest.raises(DeclarationError) as caught:
        InboxQueue(Grouped, "g" * 192)
    assert str(caught.value) == (
        "InboxQueue(test_a_group_s_name_fits_trinbox_s_key_columns.<locals>.Grouped, ...): a "
        "group is named by a non-empty str of at most 191 characters (trinbox's own tables "
        "keep it in a key column), found 'gggggggggggggggggggggggggggggggggggggggg'... (192 "
        "characters); name the group with a shorter str"
    )
    # Without a Group field the name is a label, kept in no key column.
    assert InboxQueue(Single, "s" * 300).name == "s" * 300
