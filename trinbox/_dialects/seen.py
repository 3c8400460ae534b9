"""The statements of a seen-records table (``trinbox.outbox.Tracker``): where a consumer keeps
the ids of the outbox records it has handled, one row per (consumer, record id), so a record
relayed twice runs its handler once. Pure text, no I/O.

    consumer   the consuming subscription's name (text, part of the key)
    record_id  the record's id, as its header carries it (text, part of the key)
    seen_at    when the handling committed (the broker's clock, as processed marks are)

``mark`` inserts the pair unless it is there, and its row count says which (1: first seen);
``find`` reads whether it is there; ``ddl`` creates the table where it is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import DeclarationError
from ._base import Dialect
from ._statement import P, Statement

__all__ = ["KEY_LENGTH", "SeenPlan", "check_group_name", "seen_plan"]

KEY_LENGTH = 191
"""Characters a consumer's name and a record id take at most: the width MySQL indexes of a
key's text column (VARCHAR(191) in utf8mb4), the same on every database."""


def check_group_name(where: str, name: object) -> None:
    """A group's name is a non-empty str of at most ``KEY_LENGTH`` characters: trinbox's own
    tables (pauses, rates, limit records) keep it in a key column."""
    if not isinstance(name, str) or not name or len(name) > KEY_LENGTH:
        shown = repr(name) if not isinstance(name, str) or len(name) <= 40 else f"{name[:40]!r}..."
        found = f" ({len(name)} characters)" if isinstance(name, str) and name else ""
        msg = (
            f"{where}: a group is named by a non-empty str of at most {KEY_LENGTH} characters "
            f"(trinbox's own tables keep it in a key column), found {shown}{found}; name the "
            f"group with a shorter str"
        )
        raise DeclarationError(msg)


@dataclass(frozen=True, slots=True)
class SeenPlan:
    mark: Statement
    find: Statement
    ddl: tuple[str, ...]


def seen_plan(dialect: Dialect, table: str, schema: str | None, where: str) -> SeenPlan:
    """The statements of the seen-records table ``[schema.]table`` on ``dialect``, or the
    dialect's refusal of the names (``IdentifierTooLong``) naming ``where``."""
    for name in (table, schema):
        if name is not None:
            dialect.check_identifier(name, where)
    name = dialect.qualified(table, schema)
    before, after = dialect.insert_if_absent
    mark = dialect.render(
        "seen",
        f"{before} {name} (consumer, record_id, seen_at) VALUES ("
        + P("consumer")
        + ", "
        + P("record_id")
        + ", "
        + P("now")
        + ")"
        + after,
    )
    find = dialect.render(
        "seen?",
        f"SELECT 1 FROM {name} WHERE consumer = "
        + P("consumer")
        + " AND record_id = "
        + P("record_id"),
    )
    rules = dialect.ddl_rules
    text = rules.indexed_text
    create = (
        f"CREATE TABLE IF NOT EXISTS {name} (\n"
        f"    consumer {text} NOT NULL,\n"
        f"    record_id {text} NOT NULL,\n"
        f"    seen_at {rules.time} NOT NULL,\n"
        f"    PRIMARY KEY (consumer, record_id)\n"
        f"){rules.table_options}"
    )
    return SeenPlan(mark=mark, find=find, ddl=(create,))
