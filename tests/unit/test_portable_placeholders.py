"""Portable ``:name`` placeholders rendered into each driver's own (golden): what each database
reads as a whole (literals, quoted names, dollar quotes, comments) keeps its colons, a ``%``
is doubled for PyMySQL, a repeated name binds once on PostgreSQL and once per use elsewhere,
and a name without a value is named. (tests/integration/test_readme_keys.py runs the same
texts on the databases.)"""

from __future__ import annotations

import pytest

from trinbox._dialects._portable import bind_portable

VALUES = {"url": "u", "n": 2, "unused": "left alone"}


@pytest.mark.parametrize(
    ("sql", "postgres", "mysql", "sqlite", "bound"),
    [
        (
            "UPDATE t SET n = :n WHERE url = :url",
            "UPDATE t SET n = $1 WHERE url = $2",
            "UPDATE t SET n = %s WHERE url = %s",
            "UPDATE t SET n = ? WHERE url = ?",
            ("2", "u"),
        ),
        (
            "SELECT :url, :n, :url",
            "SELECT $1, $2, $1",
            "SELECT %s, %s, %s",
            "SELECT ?, ?, ?",
            None,  # per style below
        ),
        (
            "SELECT ':url' || \"a:url\" FROM t WHERE x = :n -- :url\n/* :url */",
            "SELECT ':url' || \"a:url\" FROM t WHERE x = $1 -- :url\n/* :url */",
            "SELECT ':url' || \"a:url\" FROM t WHERE x = %s -- :url\n/* :url */",
            "SELECT ':url' || \"a:url\" FROM t WHERE x = ? -- :url\n/* :url */",
            ("2",),
        ),
        (
            "SELECT 'it''s :url', url FROM t WHERE url LIKE 'https:%' AND n = :n",
            "SELECT 'it''s :url', url FROM t WHERE url LIKE 'https:%' AND n = $1",
            "SELECT 'it''s :url', url FROM t WHERE url LIKE 'https:%%' AND n = %s",
            "SELECT 'it''s :url', url FROM t WHERE url LIKE 'https:%' AND n = ?",
            ("2",),
        ),
        (
            r"SELECT a\:b, x:y, :n",
            "SELECT a:b, x:y, $1",
            "SELECT a:b, x:y, %s",
            "SELECT a:b, x:y, ?",
            ("2",),
        ),
        (
            "SELECT :n::int",
            "SELECT $1::int",
            "SELECT %s::int",
            "SELECT ?::int",
            ("2",),
        ),
    ],
)
def test_each_driver_gets_its_own_placeholders(
    sql: str, postgres: str, mysql: str, sqlite: str, bound: tuple[str, ...] | None
) -> None:
    rendered = {style: bind_portable(sql, VALUES, style) for style in ("dollar", "format", "qmark")}
    assert rendered["dollar"][0] == postgres
    assert rendered["format"][0] == mysql
    assert rendered["qmark"][0] == sqlite
    if bound is not None:
        for _, values in rendered.values():
            assert tuple(map(str, values)) == bound
    else:
        assert rendered["dollar"][1] == ("u", 2)
        assert rendered["format"][1] == rendered["qmark"][1] == ("u", 2, "u")


def test_each_database_reads_its_own_quotes() -> None:
    # MySQL: a backslash escapes the quote, and # and backquotes run whole.
    sql = r"SELECT 'a\' :url', `b:url`, :n # :url"
    assert bind_portable(sql, VALUES, "format") == (
        r"SELECT 'a\' :url', `b:url`, %s # :url",
        (2,),
    )
    # PostgreSQL: no backslash escape in a plain string, one in E'...'; dollar quotes.
    assert bind_portable(r"SELECT 'a\', :n", VALUES, "dollar") == (r"SELECT 'a\', $1", (2,))
    assert bind_portable(r"SELECT E'a\' :url', :n", VALUES, "dollar") == (
        r"SELECT E'a\' :url', $1",
        (2,),
    )
    assert bind_portable("SELECT $$ :url $$, $f$ :n $f$, :n", VALUES, "dollar") == (
        "SELECT $$ :url $$, $f$ :n $f$, $1",
        (2,),
    )
    # SQLite: [name] is a quoted name.
    assert bind_portable("SELECT [a:url], :n", VALUES, "qmark") == ("SELECT [a:url], ?", (2,))


def test_a_name_without_a_value_is_named() -> None:
    with pytest.raises(ValueError) as refused:
        bind_portable("SELECT :url, :uri, :urn", {"url": 1, "n": 2}, "dollar")
    assert str(refused.value) == (
        "a statement with :name placeholders binds each from the mapping it is given, found "
        "no value for uri, urn (given: n, url); add it to the mapping, or write \\: for a "
        "colon that is text"
    )


def test_a_text_without_placeholders_takes_an_empty_mapping() -> None:
    assert bind_portable("SELECT '50%'", {}, "format") == ("SELECT '50%%'", ())
    assert bind_portable("SELECT '50%'", {}, "dollar") == ("SELECT '50%'", ())
