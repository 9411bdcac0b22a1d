"""The v0 filter DSL of recall: parse it to a typed tree, print it back, evaluate it.

A filter is a small SQL ``WHERE`` clause over five fields of a chunk:

>>> expr = parse_filter("source LIKE 'helios:fs/%' AND NOT tags IN ('draft', 'old')")
>>> format_filter(expr)
"source LIKE 'helios:fs/%' AND NOT tags IN ('draft', 'old')"
>>> evaluate(expr, {"source": "helios:fs/notes.md", "tags": ["ops"]})
True
>>> evaluate(expr, {"source": "helios:fs/notes.md", "tags": ["ops", "draft"]})
False
>>> evaluate(parse_filter("metadata.project.phase = 2"), {"metadata": {"project": {"phase": 2}}})
True

Grammar (EBNF; keywords and the five field names are case-insensitive)::

    filter     = or_expr ;
    or_expr    = and_expr { "OR" and_expr } ;
    and_expr   = not_expr { "AND" not_expr } ;
    not_expr   = "NOT" not_expr | "(" or_expr ")" | predicate ;
    predicate  = field ( ( "=" | "!=" | "<>" ) literal
                       | [ "NOT" ] "LIKE" string [ "ESCAPE" string ]
                       | [ "NOT" ] "IN" "(" literal { "," literal } ")"
                       | "IS" [ "NOT" ] "NULL" ) ;
    field      = "source" | "kind" | "subject" | "tags" | "metadata" "." key { "." key } ;
    key        = identifier | '"' { any character but '"' | '""' } '"' ;
    identifier = ( letter | "_" ) { letter | digit | "_" } ;          (* ASCII *)
    literal    = string | number | "TRUE" | "FALSE" ;
    string     = "'" { any character but "'" | "''" } "'" ;
    number     = [ "-" ] digits [ "." digits ] [ ( "e" | "E" ) [ "+" | "-" ] digits ] ;
    digits     = digit { digit } ;

Semantics, in two-valued logic (a predicate is always true or false, never
unknown):

* A field holds zero or more *values*. ``source``, ``kind`` and ``subject``
  hold their string, or nothing when absent or ``None``. ``tags`` holds each
  tag. ``metadata.a.b`` walks nested objects by key and holds the value found
  there: nothing for a missing key or ``null``, each non-null element for an
  array, the value itself otherwise.
* ``=``, ``LIKE`` and ``IN`` are true when *any* value matches: ``tags = 'x'``
  means "tagged x", ``metadata.owners = 'ann'`` matches ``["ann", "bob"]``.
* ``!=``/``<>``, ``NOT LIKE``, ``NOT IN`` are exactly the negations of their
  positive forms, so they are true for a field with no values
  (``metadata.x != 'a'`` matches a record without ``x``, as MongoDB's ``$ne``).
  ``IS NULL`` is true when the field holds no values (an empty tag list too).
* Equality is type-strict, JSON-style: a string equals only a string, a number
  only a number (``2 = 2.0``), a boolean only a boolean (``TRUE`` is not ``1``).
  Objects equal nothing. ``source``, ``kind``, ``subject`` and ``tags`` compare
  to strings only; another literal there is a syntax error.
* ``LIKE`` is case-sensitive (as standard SQL and PostgreSQL; SQLite's default
  is not). ``%`` matches any run of characters, ``_`` exactly one. The escape
  character is backslash unless ``ESCAPE 'c'`` names another; it makes the
  next character literal (``'100\\%'``), and a pattern may not end with a lone
  escape. ``LIKE`` only matches string values.
* String literals escape a quote by doubling it (``'it''s'``); there are no
  backslash escapes in literals.

Bounds: :data:`MAX_FILTER_LENGTH` characters and :data:`MAX_FILTER_DEPTH`
nested parentheses or ``NOT``\\ s. Every malformed input, whatever it is,
raises :class:`FilterSyntaxError` with the position and what was expected.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Final, TypeAlias, TypedDict

from memstore.errors import MemstoreError

__all__ = [
    "FIELD_NAMES",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_LENGTH",
    "And",
    "Compare",
    "Expr",
    "Field",
    "FilterRecord",
    "FilterSyntaxError",
    "In",
    "IsNull",
    "Like",
    "Literal",
    "Not",
    "Or",
    "evaluate",
    "format_filter",
    "like_regex",
    "parse_filter",
]

MAX_FILTER_LENGTH: Final = 4096
"""Longest filter accepted, in characters."""
MAX_FILTER_DEPTH: Final = 32
"""Most nested parentheses and ``NOT``\\ s one filter may stack."""
FIELD_NAMES: Final = ("source", "kind", "subject", "tags", "metadata")
"""The fields a filter can name; ``metadata`` always with a key path."""

_STRING_FIELDS: Final = frozenset(FIELD_NAMES) - {"metadata"}
_DEFAULT_ESCAPE: Final = "\\"

Literal: TypeAlias = str | int | float | bool
"""A literal value: a string, a finite number or a boolean."""


class FilterRecord(TypedDict, total=False):
    """What a filter reads of a chunk. Missing keys hold no values."""

    source: str | None
    kind: str | None
    subject: str | None
    tags: Sequence[str]
    metadata: Mapping[str, object]


class FilterSyntaxError(MemstoreError, ValueError):
    """A filter that is not v0 filter DSL, with where and what was expected.

    ``position`` is the 0-based character offset, ``line`` and ``column`` are
    1-based; ``expected`` names what would have been accepted there and
    ``found`` what was there instead.

    >>> try:
    ...     parse_filter("source = 'a' AND")
    ... except FilterSyntaxError as e:
    ...     print(e)
    ...     print(e.pointer())
    filter syntax error at line 1, column 17: expected a predicate or '(', found end of filter
    source = 'a' AND
                    ^
    """

    def __init__(self, text: str, position: int, expected: str, found: str) -> None:
        self.text = text
        self.position = position
        self.line = text.count("\n", 0, position) + 1
        self.column = position - (text.rfind("\n", 0, position) + 1) + 1
        self.expected = expected
        self.found = found
        super().__init__(
            f"filter syntax error at line {self.line}, column {self.column}: "
            f"expected {expected}, found {found}"
        )

    def pointer(self) -> str:
        """The offending line of the filter with a caret under the position."""
        start = self.text.rfind("\n", 0, self.position) + 1
        end = self.text.find("\n", self.position)
        line = self.text[start : len(self.text) if end < 0 else end]
        return f"{line}\n{' ' * (self.column - 1)}^"

    def __repr__(self) -> str:
        return f"FilterSyntaxError(position={self.position}, expected={self.expected!r})"


# --- the tree -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Field:
    """A field reference: ``source``/``kind``/``subject``/``tags``, or a metadata key path."""

    name: str
    """One of :data:`FIELD_NAMES`."""
    path: tuple[str, ...] = ()
    """The metadata key path (``metadata.a.b`` is ``("a", "b")``); empty for other fields."""

    def __post_init__(self) -> None:
        if self.name not in FIELD_NAMES:
            raise ValueError(f"unknown filter field {self.name!r}; choose from {FIELD_NAMES}")
        if (self.name == "metadata") != bool(self.path):
            raise ValueError("metadata needs a key path and only metadata takes one")


@dataclass(frozen=True, slots=True)
class Compare:
    """``field = value`` or, when ``negated``, ``field != value``."""

    field: Field
    value: Literal
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Like:
    """``field [NOT] LIKE pattern [ESCAPE escape]``; the matcher is compiled once."""

    field: Field
    pattern: str
    escape: str = _DEFAULT_ESCAPE
    negated: bool = False
    _regex: re.Pattern[str] = dataclass_field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", like_regex(self.pattern, self.escape))

    def matches(self, value: str) -> bool:
        """Whether ``value`` matches the pattern (ignoring ``negated``)."""
        return self._regex.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class In:
    """``field [NOT] IN (v1, v2, ...)``, at least one value."""

    field: Field
    values: tuple[Literal, ...]
    negated: bool = False

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("IN needs at least one value")


@dataclass(frozen=True, slots=True)
class IsNull:
    """``field IS NULL`` (no values) or, when ``negated``, ``field IS NOT NULL``."""

    field: Field
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Not:
    """``NOT operand``."""

    operand: Expr


@dataclass(frozen=True, slots=True)
class And:
    """``a AND b AND ...``: a chain of two or more operands, as written."""

    operands: tuple[Expr, ...]

    def __post_init__(self) -> None:
        if len(self.operands) < 2:
            raise ValueError("AND needs at least two operands")


@dataclass(frozen=True, slots=True)
class Or:
    """``a OR b OR ...``: a chain of two or more operands, as written."""

    operands: tuple[Expr, ...]

    def __post_init__(self) -> None:
        if len(self.operands) < 2:
            raise ValueError("OR needs at least two operands")


Expr: TypeAlias = Compare | Like | In | IsNull | Not | And | Or
"""A parsed filter: a predicate or a boolean combination of filters."""


def like_regex(pattern: str, escape: str = _DEFAULT_ESCAPE) -> re.Pattern[str]:
    """The regular expression that fully matches what ``pattern`` LIKE-matches.

    Cost: ``fullmatch`` takes O(len(value) * len(pattern)) at worst, never more.
    Between ``%``\\ s the pattern is a run of fixed length; each middle run is
    found at its leftmost place (``(?>.*?run)``) and the atomic group forbids trying
    the others. The leftmost place is always the right one: whatever follows starts
    with ``%`` and can absorb the difference. A plain ``.*`` per ``%`` would let the
    engine retry every split, exponential in the number of ``%``\\ s.

    >>> rx = like_regex("a_c%")
    >>> bool(rx.fullmatch("abcdef")), bool(rx.fullmatch("ABC"))
    (True, False)
    >>> rx = like_regex("100\\\\%")
    >>> bool(rx.fullmatch("100%")), bool(rx.fullmatch("1000"))
    (True, False)
    >>> bool(like_regex("%a%a%a%a%a%b").fullmatch("a" * 10_000))
    False

    :raises ValueError: a trailing lone escape, or an escape that is not one
        character or is ``%`` or ``_``.
    """
    if len(escape) != 1 or escape in "%_":
        raise ValueError(f"the LIKE escape must be one character other than % and _: {escape!r}")
    runs: list[str] = []  # the fixed-length runs between the %s, as regex source
    parts: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == escape:
            if i + 1 == n:
                raise ValueError("a LIKE pattern may not end with a lone escape character")
            parts.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if c == "%":
            runs.append("".join(parts))
            parts = []
        else:
            parts.append("." if c == "_" else re.escape(c))
        i += 1
    runs.append("".join(parts))
    if len(runs) == 1:
        return re.compile(runs[0], re.DOTALL)
    middle = "".join(f"(?>.*?{run})" for run in runs[1:-1])
    return re.compile(f"{runs[0]}{middle}.*{runs[-1]}", re.DOTALL)


# --- evaluation ---------------------------------------------------------------------------


def evaluate(expr: Expr, record: Mapping[str, object]) -> bool:
    """Whether ``record`` (see :class:`FilterRecord`) satisfies ``expr``.

    Cost: one pass over the tree, each predicate over the field's values.
    """
    match expr:
        case And(operands):
            return all(evaluate(e, record) for e in operands)
        case Or(operands):
            return any(evaluate(e, record) for e in operands)
        case Not(operand):
            return not evaluate(operand, record)
        case Compare(fld, value, negated):
            return negated != any(_equal(v, value) for v in _values(fld, record))
        case In(fld, values, negated):
            found = any(_equal(v, lit) for v in _values(fld, record) for lit in values)
            return negated != found
        case Like(fld, _, _, negated):
            found = any(isinstance(v, str) and expr.matches(v) for v in _values(fld, record))
            return negated != found
        case IsNull(fld, negated):
            return negated == bool(_values(fld, record))
    raise TypeError(f"not a filter expression: {expr!r}")  # pragma: no cover


def _values(fld: Field, record: Mapping[str, object]) -> tuple[object, ...]:
    """The values ``fld`` holds in ``record`` (see the module docstring)."""
    value = record.get(fld.name)
    for key in fld.path:
        if not isinstance(value, Mapping):
            return ()
        value = value.get(key)
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        return tuple(v for v in value if v is not None)
    return (value,)


def _equal(value: object, literal: Literal) -> bool:
    """JSON equality: same type family (string, number, boolean) and equal."""
    if isinstance(literal, bool) or isinstance(value, bool):
        return isinstance(literal, bool) and isinstance(value, bool) and value == literal
    if isinstance(literal, str):
        return isinstance(value, str) and value == literal
    return isinstance(value, int | float) and value == literal


# --- printing -----------------------------------------------------------------------------

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def format_filter(expr: Expr) -> str:
    """The canonical text of ``expr``: upper-case keywords, minimal parentheses.

    ``parse_filter(format_filter(e)) == e`` for every tree ``e``.

    >>> format_filter(parse_filter("(kind='a' or kind = 'b') and not (subject is null)"))
    "(kind = 'a' OR kind = 'b') AND NOT subject IS NULL"
    """
    match expr:
        case Or(operands):
            return " OR ".join(_group(e, (Or,)) for e in operands)
        case And(operands):
            return " AND ".join(_group(e, (And, Or)) for e in operands)
        case Not(operand):
            return "NOT " + _group(operand, (And, Or))
        case Compare(fld, value, negated):
            return f"{_format_field(fld)} {'!=' if negated else '='} {_format_literal(value)}"
        case Like(fld, pattern, escape, negated):
            tail = "" if escape == _DEFAULT_ESCAPE else f" ESCAPE {_quote(escape, chr(39))}"
            op = "NOT LIKE" if negated else "LIKE"
            return f"{_format_field(fld)} {op} {_quote(pattern, chr(39))}{tail}"
        case In(fld, values, negated):
            listed = ", ".join(_format_literal(v) for v in values)
            return f"{_format_field(fld)} {'NOT IN' if negated else 'IN'} ({listed})"
        case IsNull(fld, negated):
            return f"{_format_field(fld)} IS {'NOT NULL' if negated else 'NULL'}"
    raise TypeError(f"not a filter expression: {expr!r}")  # pragma: no cover


def _group(expr: Expr, chains: tuple[type[And] | type[Or], ...]) -> str:
    """``expr`` printed, parenthesised when it is one of ``chains`` (a nested chain)."""
    text = format_filter(expr)
    return f"({text})" if isinstance(expr, chains) else text


def _format_field(fld: Field) -> str:
    if not fld.path:
        return fld.name
    keys = (k if _IDENTIFIER.fullmatch(k) else _quote(k, '"') for k in fld.path)
    return "metadata." + ".".join(keys)


def _format_literal(value: Literal) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return _quote(value, "'")
    return repr(value)


def _quote(text: str, quote: str) -> str:
    return quote + text.replace(quote, quote + quote) + quote


# --- parsing ------------------------------------------------------------------------------

_TOKEN: Final = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<number>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>!=|<>|[=(),.])
  | (?P<string>')
  | (?P<qident>")
    """,
    re.VERBOSE,
)
_KEYWORDS: Final = frozenset("AND OR NOT LIKE ESCAPE IN IS NULL TRUE FALSE".split())


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "number" | "word" | "op" | "string" | "qident" | "end"
    text: str  # the value: the decoded string for strings and quoted identifiers
    start: int
    end: int

    @property
    def keyword(self) -> str:
        """The upper-cased keyword this token spells, or ``""``."""
        if self.kind == "word" and self.text.upper() in _KEYWORDS:
            return self.text.upper()
        return ""

    def describe(self, source: str) -> str:
        if self.kind == "end":
            return "end of filter"
        raw = source[self.start : self.end]
        if self.kind in ("string", "qident"):
            return f"the literal {raw[:40]!r}{'...' if len(raw) > 40 else ''}"
        return repr(raw[:40])


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            expected = "a field, keyword, literal or operator"
            raise FilterSyntaxError(text, pos, expected, repr(text[pos]))
        kind = m.lastgroup
        assert kind is not None
        if kind in ("string", "qident"):
            quote = m.group()
            value, end = _read_quoted(text, pos, quote)
            tokens.append(_Token(kind, value, pos, end))
            pos = end
            continue
        if kind != "ws":
            tokens.append(_Token(kind, m.group(), pos, m.end()))
        pos = m.end()
    tokens.append(_Token("end", "", n, n))
    return tokens


def _read_quoted(text: str, start: int, quote: str) -> tuple[str, int]:
    """The decoded body of the quoted run at ``start`` and the offset after it."""
    parts: list[str] = []
    pos = start + 1
    while True:
        close = text.find(quote, pos)
        if close < 0:
            what = "string literal" if quote == "'" else "quoted key"
            expected = f"a closing {quote} for this {what}"
            raise FilterSyntaxError(text, start, expected, "end of filter")
        parts.append(text[pos:close])
        if text.startswith(quote, close + 1):  # a doubled quote is one literal quote
            parts.append(quote)
            pos = close + 2
            continue
        return "".join(parts), close + 1


class _Parser:
    """Recursive descent over the token list; ``depth`` guards nesting."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def fail(self, expected: str, token: _Token | None = None) -> FilterSyntaxError:
        token = token or self.tok
        return FilterSyntaxError(self.text, token.start, expected, token.describe(self.text))

    def take_keyword(self, keyword: str) -> bool:
        if self.tok.keyword == keyword:
            self.i += 1
            return True
        return False

    def take_op(self, op: str) -> bool:
        if self.tok.kind == "op" and self.tok.text == op:
            self.i += 1
            return True
        return False

    def expect_op(self, op: str, expected: str | None = None) -> None:
        if not self.take_op(op):
            raise self.fail(expected or repr(op))

    def nest(self, token: _Token) -> None:
        self.depth += 1
        if self.depth > MAX_FILTER_DEPTH:
            raise FilterSyntaxError(
                self.text,
                token.start,
                f"at most {MAX_FILTER_DEPTH} nested parentheses or NOTs",
                f"nesting level {self.depth}",
            )

    def parse(self) -> Expr:
        expr = self.or_expr()
        if self.tok.kind != "end":
            raise self.fail("AND, OR or end of filter")
        return expr

    def or_expr(self) -> Expr:
        operands = [self.and_expr()]
        while self.take_keyword("OR"):
            operands.append(self.and_expr())
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def and_expr(self) -> Expr:
        operands = [self.not_expr()]
        while self.take_keyword("AND"):
            operands.append(self.not_expr())
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def not_expr(self) -> Expr:
        token = self.tok
        if self.take_keyword("NOT"):
            self.nest(token)
            operand = self.not_expr()
            self.depth -= 1
            return Not(operand)
        if self.take_op("("):
            self.nest(token)
            inner = self.or_expr()
            self.expect_op(")", "')', AND or OR")
            self.depth -= 1
            return inner
        return self.predicate()

    def predicate(self) -> Expr:
        fld = self.field()
        token = self.tok
        if token.kind == "op" and token.text in ("=", "!=", "<>"):
            self.i += 1
            return Compare(fld, self.literal(fld), negated=token.text != "=")
        if self.take_keyword("IS"):
            negated = self.take_keyword("NOT")
            if not self.take_keyword("NULL"):
                raise self.fail("NULL" if negated else "NULL or NOT NULL")
            return IsNull(fld, negated)
        negated = self.take_keyword("NOT")
        if self.take_keyword("LIKE"):
            return self.like(fld, negated)
        if self.take_keyword("IN"):
            self.expect_op("(", "'(' opening the IN list")
            values = [self.literal(fld)]
            while self.take_op(","):
                values.append(self.literal(fld))
            self.expect_op(")", "',' or ')' closing the IN list")
            return In(fld, tuple(values), negated)
        raise self.fail("LIKE or IN" if negated else "'=', '!=', LIKE, IN, NOT or IS")

    def like(self, fld: Field, negated: bool) -> Like:
        pattern_token = self.tok
        if pattern_token.kind != "string":
            raise self.fail("a string literal LIKE pattern")
        self.i += 1
        escape = _DEFAULT_ESCAPE
        if self.take_keyword("ESCAPE"):
            escape_token = self.tok
            if escape_token.kind != "string":
                raise self.fail("a one-character string literal after ESCAPE")
            if len(escape_token.text) != 1 or escape_token.text in "%_":
                raise self.fail("a one-character escape other than '%' and '_'", escape_token)
            self.i += 1
            escape = escape_token.text
        try:
            return Like(fld, pattern_token.text, escape, negated)
        except ValueError:
            raise self.fail(
                f"a LIKE pattern that does not end with a lone escape {escape!r}", pattern_token
            ) from None

    def field(self) -> Field:
        token = self.tok
        name = token.text.lower() if token.kind == "word" else ""
        if name not in FIELD_NAMES:
            if token.kind == "end":
                raise self.fail("a predicate or '('")
            raise self.fail("a field (source, kind, subject, tags or metadata.<key>), NOT or '('")
        self.i += 1
        if name != "metadata":
            return Field(name)
        path: list[str] = []
        self.expect_op(".", "'.' and a key after metadata")
        path.append(self.key())
        while self.take_op("."):
            path.append(self.key())
        return Field(name, tuple(path))

    def key(self) -> str:
        token = self.tok
        if token.kind not in ("word", "qident"):
            raise self.fail('a metadata key (an identifier or a "quoted key")')
        self.i += 1
        return token.text

    def literal(self, fld: Field) -> Literal:
        token = self.tok
        value: Literal
        if token.kind == "string":
            value = token.text
        elif token.kind == "number":
            value = _number(token.text)
            if isinstance(value, float) and not math.isfinite(value):
                raise self.fail("a finite number")
        elif token.keyword in ("TRUE", "FALSE"):
            value = token.keyword == "TRUE"
        else:
            strings_only = fld.name in _STRING_FIELDS
            raise self.fail(
                "a string literal" if strings_only else "a string, number, TRUE or FALSE"
            )
        if fld.name in _STRING_FIELDS and not isinstance(value, str):
            raise self.fail(f"a string literal ({fld.name} holds strings)")
        self.i += 1
        return value


def _number(text: str) -> int | float:
    if any(c in text for c in ".eE"):
        return float(text)
    return int(text)


def parse_filter(text: str) -> Expr:
    """Parse ``text`` into a filter tree.

    Cost: linear in the length of ``text`` (at most :data:`MAX_FILTER_LENGTH`).

    >>> parse_filter("kind IN ('event', 'stable_fact')")
    In(field=Field(name='kind', path=()), values=('event', 'stable_fact'), negated=False)

    :raises FilterSyntaxError: for anything that is not a filter, with the
        position and what was expected there.
    """
    if not isinstance(text, str):
        raise TypeError(f"a filter is a string, got {type(text).__name__}")
    if len(text) > MAX_FILTER_LENGTH:
        raise FilterSyntaxError(
            text,
            MAX_FILTER_LENGTH,
            f"a filter of at most {MAX_FILTER_LENGTH} characters",
            f"{len(text)} characters",
        )
    return _Parser(text).parse()
