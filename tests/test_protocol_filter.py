"""The v0 filter DSL: parsing, printing, errors, and evaluation against SQLite."""

from __future__ import annotations

import itertools
import json
import operator
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memstore import MemstoreError
from memstore.protocol.filter import (
    MAX_FILTER_DEPTH,
    MAX_FILTER_LENGTH,
    And,
    Compare,
    Expr,
    Field,
    FilterSyntaxError,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    evaluate,
    format_filter,
    like_regex,
    parse_filter,
)

SOURCE = Field("source")
TAGS = Field("tags")


# --- parsing and printing -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("source LIKE 'helios:fs/%'", Like(SOURCE, "helios:fs/%")),
        ("source = 'a'", Compare(SOURCE, "a")),
        ("source != 'a'", Compare(SOURCE, "a", negated=True)),
        ("source <> 'a'", Compare(SOURCE, "a", negated=True)),
        ("kind IN ('event')", In(Field("kind"), ("event",))),
        ("subject NOT IN ('x', 'y')", In(Field("subject"), ("x", "y"), negated=True)),
        ("tags NOT LIKE 'proj:%'", Like(TAGS, "proj:%", negated=True)),
        ("tags IS NULL", IsNull(TAGS)),
        ("tags IS NOT NULL", IsNull(TAGS, negated=True)),
        ("source LIKE '1!%' ESCAPE '!'", Like(SOURCE, "1!%", "!")),
        ("metadata.a = 1", Compare(Field("metadata", ("a",)), 1)),
        ("metadata.a.b_2 = -1.5e3", Compare(Field("metadata", ("a", "b_2")), -1500.0)),
        ('metadata."x.y"."it""s" = TRUE', Compare(Field("metadata", ("x.y", 'it"s')), True)),
        ("metadata.and = false", Compare(Field("metadata", ("and",)), False)),
        ("source = 'it''s'", Compare(SOURCE, "it's")),
        ("source = ''", Compare(SOURCE, "")),
        ("SOURCE like 'a' and Kind = 'b'", And((Like(SOURCE, "a"), Compare(Field("kind"), "b")))),
        (
            "NOT (source = 'a' OR source = 'b')",
            Not(Or((Compare(SOURCE, "a"), Compare(SOURCE, "b")))),
        ),
        ("not not tags is null", Not(Not(IsNull(TAGS)))),
        (
            "tags = 'a' OR tags = 'b' AND tags = 'c'",
            Or((Compare(TAGS, "a"), And((Compare(TAGS, "b"), Compare(TAGS, "c"))))),
        ),
        (
            "(tags = 'a' AND tags = 'b') AND tags = 'c'",
            And((And((Compare(TAGS, "a"), Compare(TAGS, "b"))), Compare(TAGS, "c"))),
        ),
        ("  source\n=\t'a'  ", Compare(SOURCE, "a")),
        ("((source = 'a'))", Compare(SOURCE, "a")),
    ],
)
def test_parse(text: str, tree: Expr) -> None:
    parsed = parse_filter(text)
    assert repr(parsed) == repr(tree)
    assert repr(parse_filter(format_filter(parsed))) == repr(tree)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("source like 'a%' and not (kind = 'x')", "source LIKE 'a%' AND NOT kind = 'x'"),
        ("(a_b)", None),
        ("source<>'x'", "source != 'x'"),
        ('metadata."plain" = 01', "metadata.plain = 1"),
        ("metadata.\"has space\" in (1, 'a', true)", "metadata.\"has space\" IN (1, 'a', TRUE)"),
        ("NOT (a = 'x' OR b = 'y')", None),
        ("NOT (tags = 'x' OR tags = 'y')", "NOT (tags = 'x' OR tags = 'y')"),
        ("source LIKE 'a' ESCAPE '\\'", "source LIKE 'a'"),
        ("source LIKE '''%' ESCAPE ''''", "source LIKE '''%' ESCAPE ''''"),
    ],
)
def test_format(text: str, canonical: str | None) -> None:
    if canonical is None:
        with pytest.raises(FilterSyntaxError):
            parse_filter(text)
    else:
        assert format_filter(parse_filter(text)) == canonical


@pytest.mark.parametrize(
    ("text", "position", "expected"),
    [
        ("", 0, "a predicate or '('"),
        ("   ", 3, "a predicate or '('"),
        ("source", 6, "'=', '!=', LIKE, IN, NOT or IS"),
        ("source = ", 9, "a string literal"),
        ("source = 3", 9, "a string literal (source holds strings)"),
        ("tags IN ('a', TRUE)", 14, "a string literal (tags holds strings)"),
        ("source = 'a' AND", 16, "a predicate or '('"),
        ("source = 'a' kind = 'b'", 13, "AND, OR or end of filter"),
        ("(source = 'a'", 13, "')', AND or OR"),
        ("source = 'a')", 12, "AND, OR or end of filter"),
        ("source = 'abc", 9, "a closing ' for this string literal"),
        ('metadata."abc = 1', 9, 'a closing " for this quoted key'),
        ("author = 'x'", 0, "a field (source, kind, subject, tags or metadata.<key>), NOT or '('"),
        ("metadata = 1", 9, "'.' and a key after metadata"),
        ("metadata.1 = 1", 9, 'a metadata key (an identifier or a "quoted key")'),
        ("metadata.a = NULL", 13, "a string, number, TRUE or FALSE"),
        ("metadata.a = 1e999", 13, "a finite number"),
        ("source IN 'a'", 10, "'(' opening the IN list"),
        ("source IN ()", 11, "a string literal"),
        ("source IN ('a' 'b')", 15, "',' or ')' closing the IN list"),
        ("source IS 'a'", 10, "NULL or NOT NULL"),
        ("source IS NOT 'a'", 14, "NULL"),
        ("source NOT = 'a'", 11, "LIKE or IN"),
        ("source LIKE kind", 12, "a string literal LIKE pattern"),
        ("source LIKE 'a\\'", 12, "a LIKE pattern that does not end with a lone escape '\\\\'"),
        ("source LIKE 'a' ESCAPE 'ab'", 23, "a one-character escape other than '%' and '_'"),
        ("source LIKE 'a' ESCAPE '%'", 23, "a one-character escape other than '%' and '_'"),
        ("source LIKE 'a' ESCAPE x", 23, "a one-character string literal after ESCAPE"),
        ("source = 'a' && kind = 'b'", 13, "a field, keyword, literal or operator"),
        ("source = 'a'\n  AND kind ==", 25, "a string literal"),
    ],
)
def test_syntax_errors_say_where_and_what(text: str, position: int, expected: str) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter(text)
    err = info.value
    assert (err.position, err.expected) == (position, expected)
    assert isinstance(err, MemstoreError) and isinstance(err, ValueError)
    assert f"expected {expected}" in str(err)
    assert f"line {err.line}, column {err.column}" in str(err)
    # line and column are 1-based and point at the same character as position.
    lines = text.split("\n")
    assert sum(len(line) + 1 for line in lines[: err.line - 1]) + err.column - 1 == position


def test_error_position_line_and_column_on_later_lines() -> None:
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter("source = 'a'\n  AND kind ==")
    assert (info.value.line, info.value.column) == (2, 13)
    assert info.value.found == "'='"
    assert info.value.pointer() == "  AND kind ==\n            ^"


def test_error_found_names_the_token() -> None:
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter("source = 'a' OR OR")
    assert info.value.found == "'OR'"
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter("source IN ('a',)")
    assert info.value.found == "')'"


def test_length_bound() -> None:
    at_limit = "source = '" + "x" * (MAX_FILTER_LENGTH - 11) + "'"
    assert len(at_limit) == MAX_FILTER_LENGTH
    assert parse_filter(at_limit) == Compare(SOURCE, "x" * (MAX_FILTER_LENGTH - 11))
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter(at_limit + " ")
    assert info.value.position == MAX_FILTER_LENGTH
    assert f"at most {MAX_FILTER_LENGTH} characters" in str(info.value)


@pytest.mark.parametrize("opener", ["(", "NOT ", "NOT ("])
def test_depth_bound(opener: str) -> None:
    def nested(depth: int) -> str:
        closers = opener.count("(") * depth * ")"
        return opener * depth + "tags IS NULL" + closers

    per = 2 if opener == "NOT (" else 1
    parse_filter(nested(MAX_FILTER_DEPTH // per))
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter(nested(MAX_FILTER_DEPTH // per + 1))
    assert f"at most {MAX_FILTER_DEPTH} nested" in str(info.value)
    assert info.value.position == len(opener) * (MAX_FILTER_DEPTH // per)


def test_wide_filters_are_not_deep() -> None:
    text = " OR ".join(f"tags = '{i}'" for i in range(200))
    expr = parse_filter(text)
    assert isinstance(expr, Or) and len(expr.operands) == 200
    assert evaluate(expr, {"tags": ["199"]})


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        parse_filter(b"source = 'a'")  # type: ignore[arg-type]


def test_tree_invariants() -> None:
    with pytest.raises(ValueError, match="unknown filter field"):
        Field("author")
    with pytest.raises(ValueError, match="key path"):
        Field("metadata")
    with pytest.raises(ValueError, match="key path"):
        Field("tags", ("a",))
    with pytest.raises(ValueError):
        And((IsNull(TAGS),))
    with pytest.raises(ValueError):
        Or(())
    with pytest.raises(ValueError):
        In(TAGS, ())
    with pytest.raises(ValueError, match="lone escape"):
        Like(TAGS, "a\\")
    with pytest.raises(ValueError, match="one character"):
        Like(TAGS, "a", "")


# --- semantics, by example ------------------------------------------------------------

RECORD: dict[str, Any] = {
    "source": "helios:fs/notes.md",
    "kind": "event",
    "subject": None,
    "tags": ["ops", "Draft"],
    "metadata": {
        "project": {"name": "Helios", "phase": 2},
        "owners": ["ann", "bob", None],
        "score": 0.5,
        "flag": True,
        "one": 1,
        "empty": [],
        "nothing": None,
        "pct": "100%",
    },
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("source LIKE 'helios:fs/%'", True),
        ("source LIKE 'HELIOS:%'", False),  # LIKE is case-sensitive
        ("source LIKE 'helios:fs/_____.md'", True),
        ("source LIKE 'helios:fs/____.md'", False),
        ("source = 'helios:fs/notes.md'", True),
        ("source != 'helios:fs/notes.md'", False),
        ("kind IN ('fact', 'event')", True),
        ("kind NOT IN ('fact', 'event')", False),
        ("subject IS NULL", True),
        ("subject = 'x'", False),
        ("subject != 'x'", True),  # != is NOT =, so true for an absent field
        ("tags = 'ops'", True),
        ("tags = 'draft'", False),
        ("tags != 'ops'", False),
        ("tags LIKE 'Dr%'", True),
        ("tags NOT LIKE 'o%'", False),
        ("tags IN ('x', 'Draft')", True),
        ("metadata.project.name = 'Helios'", True),
        ("metadata.project.phase = 2", True),
        ("metadata.project.phase = 2.0", True),
        ("metadata.project.phase = '2'", False),  # type-strict
        ("metadata.project IS NOT NULL", True),
        ("metadata.project = 'Helios'", False),  # objects equal nothing
        ("metadata.project.name.deeper IS NULL", True),
        ("metadata.owners = 'bob'", True),  # any element of an array
        ("metadata.owners IN ('carl', 'ann')", True),
        ("metadata.owners != 'bob'", False),
        ("metadata.flag = TRUE", True),
        ("metadata.flag = 1", False),  # booleans are not numbers
        ("metadata.one = TRUE", False),
        ("metadata.one = 1", True),
        ("metadata.score IN (0.5)", True),
        ("metadata.score LIKE '0%'", False),  # LIKE matches strings only
        ("metadata.empty IS NULL", True),
        ("metadata.nothing IS NULL", True),
        ("metadata.missing IS NULL", True),
        ("metadata.missing != 1", True),
        ("metadata.pct LIKE '100\\%'", True),
        ("metadata.pct LIKE '100#%' ESCAPE '#'", True),
        ("metadata.pct LIKE '10\\_%'", False),
        ("NOT tags = 'ops' OR kind = 'event'", True),
        ("NOT (tags = 'ops' OR kind = 'event')", False),
        ("tags = 'ops' AND (kind = 'fact' OR subject IS NULL)", True),
    ],
)
def test_semantics(text: str, expected: bool) -> None:
    assert evaluate(parse_filter(text), RECORD) is expected


def test_empty_record_holds_no_values() -> None:
    assert evaluate(parse_filter("source IS NULL AND tags IS NULL AND metadata.a IS NULL"), {})
    assert not evaluate(parse_filter("source LIKE '%'"), {})
    assert evaluate(parse_filter("source NOT LIKE '%'"), {})


def test_metadata_that_is_not_an_object_holds_nothing() -> None:
    expr = parse_filter("metadata.a IS NULL")
    assert evaluate(expr, {"metadata": "a"})
    assert evaluate(expr, {"metadata": ["a"]})
    assert evaluate(parse_filter("metadata.a.b IS NULL"), {"metadata": {"a": [{"b": 1}]}})


def test_like_regex_escapes_regex_metacharacters() -> None:
    rx = like_regex("a.c(%)[x]*")
    assert rx.fullmatch("a.c(anything\nhere)[x]*")
    assert not rx.fullmatch("abc(d)[x]*")


def _backtracking_like_regex(pattern: str, escape: str = "\\") -> re.Pattern[str]:
    """like_regex as it was: one ``.*`` per ``%``, exponential in the ``%``\\ s (a reference)."""
    parts: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape:
            parts.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        parts.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(parts), re.DOTALL)


def _like_by_table(pattern: str, value: str, escape: str = "\\") -> bool:
    """LIKE by dynamic programming over (pattern token, value prefix): O(len * len)."""
    tokens: list[str | None] = []  # None is %, "" is _, else the literal character
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape:
            tokens.append(pattern[i + 1])
            i += 2
            continue
        tokens.append(None if c == "%" else "" if c == "_" else c)
        i += 1
    ends = [True] + [False] * len(value)  # ends[j]: the tokens so far match value[:j]
    for tok in tokens:
        if tok is None:
            ends = list(itertools.accumulate(ends, operator.or_))
        else:
            ends = [False] + [ends[j] and (tok == "" or value[j] == tok) for j in range(len(value))]
    return ends[-1]


_LIKE_CHARS = st.sampled_from(["%", "_", "a", "b", "A", "\n", "!", "\\", ".", "*"])


@settings(deadline=None, max_examples=500)
@given(
    st.lists(_LIKE_CHARS, max_size=8).map("".join),
    st.text(alphabet="abA\n!\\.*", max_size=10),
    st.sampled_from(["\\", "!", "a"]),
)
def test_like_regex_matches_the_backtracking_regex(pattern: str, value: str, escape: str) -> None:
    try:
        rx = like_regex(pattern, escape)
    except ValueError:
        assume(False)
        raise
    expected = _backtracking_like_regex(pattern, escape).fullmatch(value) is not None
    assert (rx.fullmatch(value) is not None) == expected
    assert _like_by_table(pattern, value, escape) == expected
    assert Like(SOURCE, pattern, escape).matches(value) == expected


@pytest.mark.parametrize(
    ("pattern", "value"),
    [
        ("%a" * 40 + "%b", "a" * 1000),
        ("%a" * 40 + "%b", "a" * 1000 + "b"),
        ("%a" * 40 + "%b", "a" * 39 + "b"),
        ("%a" * 40 + "%b", "ba" * 40 + "b"),
        ("%a_" * 30 + "%b%", "ab" * 500),
        ("%a_" * 30 + "%b%", "ab" * 25 + "a"),
        ("%" + "_" * 50 + "b%", "a" * 2000),
        ("%" + "_" * 50 + "b%", "a" * 2000 + "b"),
        ("a%\\%%b" * 20, ("a%b" * 20)),
        ("a%\\%%b" * 20, ("a%b" * 19) + "ab"),
    ],
)
def test_long_like_patterns_match_as_the_table_says(pattern: str, value: str) -> None:
    # A backtracking ".*a.*a..." takes hours on most of these.
    expected = _like_by_table(pattern, value)
    assert Like(SOURCE, pattern).matches(value) == expected
    assert evaluate(Like(SOURCE, pattern), {"source": value}) == expected


# --- properties ---------------------------------------------------------------------------

# Small alphabets so that records and literals often collide and predicates go both ways.
_TEXT = st.sampled_from(["", "a", "A", "ab", "aB", "b%", "a'b", "é", "a\nb", "1"]) | st.text(
    alphabet="ab'\"%_\\ é\nA", max_size=4
)
_KEYS = st.sampled_from(["a", "b", "x y"]) | st.sampled_from(["AND", "é", ""])
_NUMBERS = st.integers(-3, 3) | st.sampled_from([0.5, -0.0, 2.0, 1e-05, 1e16])
_SCALARS: st.SearchStrategy[Literal] = _TEXT | _NUMBERS | st.booleans()


def _fields() -> st.SearchStrategy[Field]:
    plain = st.sampled_from(["source", "kind", "subject", "tags"]).map(Field)
    paths = st.lists(_KEYS, min_size=1, max_size=2).map(lambda p: Field("metadata", tuple(p)))
    # Paths of one key find a value far more often: weigh them up.
    paths = _KEYS.map(lambda k: Field("metadata", (k,))) | paths
    return plain | paths


@st.composite
def _like(draw: st.DrawFn, fld: Field) -> Like:
    escape = draw(st.sampled_from(["\\", "!", "'"]))
    pieces = draw(
        st.lists(
            st.sampled_from(["%", "_", "a", "b", "A", "é", "\n", "!", "ab", "a%", "%b"])
            | st.sampled_from(["%", "_", "a", "\\", "!"]).map(lambda c: escape + c),
            max_size=4,
        )
    )
    pattern = "".join(pieces)
    # A piece may have left a lone trailing escape (e.g. "a!" then escape "!").
    try:
        like_regex(pattern, escape)
    except ValueError:
        pattern += escape  # which pairs it with the lone one
    return Like(fld, pattern, escape, draw(st.booleans()))


@st.composite
def _predicate(draw: st.DrawFn) -> Expr:
    fld = draw(_fields())
    literal = _TEXT if fld.name != "metadata" else _SCALARS
    shape = draw(st.sampled_from(["compare", "in", "like", "null"]))
    negated = draw(st.booleans())
    if shape == "compare":
        return Compare(fld, draw(literal), negated)
    if shape == "in":
        return In(fld, tuple(draw(st.lists(literal, min_size=1, max_size=3))), negated)
    if shape == "like":
        return draw(_like(fld))
    return IsNull(fld, negated)


def _exprs() -> st.SearchStrategy[Expr]:
    def extend(inner: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        chains = st.lists(inner, min_size=2, max_size=3).map(tuple)
        return inner.map(Not) | chains.map(And) | chains.map(Or)

    return st.recursive(_predicate(), extend, max_leaves=8)


def _nesting(expr: Expr) -> int:
    """How many parentheses and NOTs the canonical text of ``expr`` stacks."""
    if isinstance(expr, Not):
        inner = expr.operand
        return 1 + (1 if isinstance(inner, And | Or) else 0) + _nesting(inner)
    if isinstance(expr, And | Or):
        chain = (And, Or) if isinstance(expr, And) else (Or,)
        return max(_nesting(e) + (1 if isinstance(e, chain) else 0) for e in expr.operands)
    return 0


@settings(deadline=None)
@given(_exprs())
def test_format_parse_round_trip(expr: Expr) -> None:
    assume(_nesting(expr) <= MAX_FILTER_DEPTH)
    text = format_filter(expr)
    parsed = parse_filter(text)
    assert repr(parsed) == repr(expr)  # repr tells 1 from 1.0 from TRUE
    assert format_filter(parsed) == text


_METADATA_VALUES = st.recursive(
    st.none() | _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=6,
)
_RECORDS = st.fixed_dictionaries(
    {
        "source": _TEXT,
        "kind": _TEXT | st.none(),
        "tags": st.lists(_TEXT, max_size=3),
        "metadata": st.dictionaries(_KEYS, _SCALARS | _METADATA_VALUES, max_size=4),
    },
    optional={"subject": _TEXT | st.none()},
)


class SqliteReference:
    """The filter semantics written again as SQL over an entity-attribute-value table.

    Each record is flattened into one row per value a field holds (the field
    is ``source``... or ``metadata`` plus the JSON of the key path); the
    filter becomes ``EXISTS`` subqueries combined with SQL's AND/OR/NOT, and
    SQLite (``case_sensitive_like``) does the matching.
    """

    def __init__(self, records: Sequence[Mapping[str, Any]]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("PRAGMA case_sensitive_like = ON")
        self.db.execute("CREATE TABLE recs (id INTEGER PRIMARY KEY)")
        self.db.execute("CREATE TABLE vals (rec INTEGER, field TEXT, t TEXT, v)")
        for i, record in enumerate(records):
            self.db.execute("INSERT INTO recs VALUES (?)", (i,))
            self.db.executemany(
                "INSERT INTO vals VALUES (?, ?, ?, ?)", [(i, *row) for row in _flatten(record)]
            )

    def select(self, expr: Expr) -> list[int]:
        where, params = _sql(expr)
        rows = self.db.execute(f"SELECT id FROM recs r WHERE {where} ORDER BY id", params)
        return [row[0] for row in rows]


def _flatten(record: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    def rows(key: str, value: Any) -> Iterator[tuple[str, str, Any]]:
        for v in value if isinstance(value, list) else [value]:
            if v is None:
                continue
            if isinstance(v, bool):
                yield key, "bool", int(v)
            elif isinstance(v, int | float):
                yield key, "num", v
            elif isinstance(v, str):
                yield key, "str", v
            else:
                yield key, "obj", None

    def walk(path: tuple[str, ...], obj: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
        for k, v in obj.items():
            yield from rows("metadata" + json.dumps([*path, k]), v)
            if isinstance(v, dict):
                yield from walk((*path, k), v)

    for name in ("source", "kind", "subject", "tags"):
        yield from rows(name, record.get(name))
    if isinstance(record.get("metadata"), dict):
        yield from walk((), record["metadata"])


def _sql(expr: Expr) -> tuple[str, list[Any]]:
    def typed(lit: Literal) -> tuple[str, Any]:
        if isinstance(lit, bool):
            return "bool", int(lit)
        return ("str", lit) if isinstance(lit, str) else ("num", lit)

    def exists(fld: Field, cond: str, params: list[Any], negated: bool) -> tuple[str, list[Any]]:
        key = "metadata" + json.dumps(list(fld.path)) if fld.path else fld.name
        sub = f"EXISTS (SELECT 1 FROM vals WHERE rec = r.id AND field = ? AND {cond})"
        return ("NOT " if negated else "") + sub, [key, *params]

    match expr:
        case And(ops) | Or(ops):
            parts = [_sql(e) for e in ops]
            joiner = " AND " if isinstance(expr, And) else " OR "
            return "(" + joiner.join(p[0] for p in parts) + ")", [x for p in parts for x in p[1]]
        case Not(op):
            inner, params = _sql(op)
            return f"(NOT {inner})", params
        case Compare(fld, value, negated):
            return exists(fld, "t = ? AND v = ?", [*typed(value)], negated)
        case In(fld, values, negated):
            cond = "(" + " OR ".join(["(t = ? AND v = ?)"] * len(values)) + ")"
            return exists(fld, cond, [x for v in values for x in typed(v)], negated)
        case Like(fld, pattern, escape, negated):
            return exists(fld, "t = 'str' AND v LIKE ? ESCAPE ?", [pattern, escape], negated)
        case IsNull(fld, negated):
            return exists(fld, "1", [], not negated)
    raise AssertionError(expr)


def _subexpressions(expr: Expr) -> Iterator[Expr]:
    yield expr
    if isinstance(expr, Not):
        yield from _subexpressions(expr.operand)
    elif isinstance(expr, And | Or):
        for e in expr.operands:
            yield from _subexpressions(e)


@settings(max_examples=300, deadline=None)
@given(_exprs(), st.lists(_RECORDS, min_size=1, max_size=8))
def test_evaluate_agrees_with_sqlite(expr: Expr, records: list[dict[str, Any]]) -> None:
    reference = SqliteReference(records)
    for e in _subexpressions(expr):  # every predicate is compared, not only the whole
        ours = [i for i, record in enumerate(records) if evaluate(e, record)]
        assert ours == reference.select(e), format_filter(e)


_LIKE_TEXT = st.text(alphabet="aAb%_!\\\né'", max_size=5)


@st.composite
def _near_matches(draw: st.DrawFn, like: Like) -> str:
    """A string the pattern matches, then perhaps nudged: a case flip, a drop, an insert."""
    out: list[str] = []
    chars = iter(like.pattern)
    for c in chars:
        if c == like.escape:
            out.append(next(chars))
        elif c == "%":
            out.append(draw(_LIKE_TEXT))
        elif c == "_":
            out.append(draw(st.sampled_from("aAé%\n")))
        else:
            out.append(c)
    text = "".join(out)
    nudge = draw(st.sampled_from(["none", "case", "drop", "insert"]))
    i = draw(st.integers(0, max(len(text) - 1, 0)))
    if nudge == "case" and text:
        return text[:i] + text[i].swapcase() + text[i + 1 :]
    if nudge == "drop" and text:
        return text[:i] + text[i + 1 :]
    if nudge == "insert":
        return text[:i] + draw(st.sampled_from("aA_%")) + text[i:]
    return text


@st.composite
def _like_and_values(draw: st.DrawFn) -> tuple[Like, list[str]]:
    like = draw(_like(Field("source")))
    values = draw(st.lists(_near_matches(like) | _LIKE_TEXT, min_size=1, max_size=20))
    return like, values


@settings(max_examples=200, deadline=None)
@given(_like_and_values())
def test_like_agrees_with_sqlite(case: tuple[Like, list[str]]) -> None:
    """LIKE alone, many values per pattern: wildcards, escapes and case against SQLite."""
    like, values = case
    records = [{"source": v} for v in values]
    assert [i for i, r in enumerate(records) if evaluate(like, r)] == SqliteReference(
        records
    ).select(like)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_SCALARS, min_size=1, max_size=3),
    st.lists(_SCALARS | st.lists(_SCALARS | st.none(), max_size=3) | st.none(), max_size=20),
)
def test_equality_agrees_with_sqlite(literals: list[Literal], values: list[Any]) -> None:
    """=, IN and IS NULL alone over metadata of every JSON type, against SQLite."""
    records = [{"metadata": {"a": v}} for v in values]
    reference = SqliteReference(records)
    fld = Field("metadata", ("a",))
    for expr in (Compare(fld, literals[0]), In(fld, tuple(literals)), IsNull(fld)):
        assert [i for i, r in enumerate(records) if evaluate(expr, r)] == reference.select(expr)


@settings(deadline=None)
@given(_exprs(), _RECORDS)
def test_negation_laws(expr: Expr, record: dict[str, Any]) -> None:
    assert evaluate(Not(expr), record) is (not evaluate(expr, record))
    if isinstance(expr, Compare | In | Like | IsNull):
        flipped = type(expr)(**{**_fields_of(expr), "negated": not expr.negated})
        assert evaluate(flipped, record) is (not evaluate(expr, record))


def _fields_of(expr: Compare | In | Like | IsNull) -> dict[str, Any]:
    names = type(expr).__match_args__
    return {name: getattr(expr, name) for name in names}


_FRAGMENTS = st.sampled_from(
    [
        "source", "kind", "subject", "tags", "metadata", ".", "a", '"k"', '"', "'", "'x'",
        "''", "=", "!=", "<>", "LIKE", "NOT", "IN", "IS", "NULL", "ESCAPE", "AND", "OR",
        "(", ")", ",", "1", "-2.5e3", "TRUE", "false", "'%'", "'\\'", "1e999", "!", "<", "-",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_FRAGMENTS, max_size=14).map(" ".join))
def test_token_soup_parses_or_raises_the_syntax_error(text: str) -> None:
    try:
        expr = parse_filter(text)
    except FilterSyntaxError as e:
        assert 0 <= e.position <= len(text)
        return
    assert repr(parse_filter(format_filter(expr))) == repr(expr)
    assert SqliteReference([RECORD, {}]).select(expr) == [
        i for i, r in enumerate([RECORD, {}]) if evaluate(expr, r)
    ]


@settings(deadline=None)
@given(st.text(max_size=200))
def test_garbage_raises_only_the_syntax_error(text: str) -> None:
    try:
        parse_filter(text)
    except FilterSyntaxError as e:
        assert 0 <= e.position <= len(text)
        assert e.line >= 1 and e.column >= 1
        assert e.pointer().endswith("^")


def test_sqlite_reference_can_disagree() -> None:
    """The differential test can fail: a wrong evaluator disagrees with SQLite."""
    expr = parse_filter("source LIKE 'A%'")
    records = [{"source": "abc"}, {"source": "Abc"}]
    assert SqliteReference(records).select(expr) == [1]
    wrong = [i for i, r in enumerate(records) if str(r["source"]).lower().startswith("a")]
    assert wrong != SqliteReference(records).select(expr)
