"""docs/protocol.md says what the code does: tables, examples and the package's imports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import memstore.protocol
from memstore.protocol import limits
from memstore.protocol.auth import ROUTE_SCOPES, TokenTable
from memstore.protocol.errors import ERROR_KINDS, invalid_filter
from memstore.protocol.filter import FilterSyntaxError, format_filter, parse_filter

DOC = (Path(__file__).parent.parent / "docs" / "protocol.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    """The text of the section headed ``title`` (up to the next heading of its level)."""
    m = re.search(rf"^(#+) {re.escape(title)}\n", DOC, re.M)
    assert m, title
    rest = DOC[m.end() :]
    end = re.search(rf"^#{{1,{len(m.group(1))}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def table_rows(text: str) -> list[list[str]]:
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    cells = [[c.strip() for c in row.strip("|").split(" | ")] for row in rows]
    return cells[1:]  # without the header row (the |---| row does not start with "| ")


def code_blocks(text: str, lang: str = "") -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


def test_error_table_is_the_code_table() -> None:
    rows = table_rows(section("Errors"))
    documented = [(int(status), code.strip("`"), when) for status, code, when in rows]
    assert documented == [(k.status, k.code, k.when) for k in ERROR_KINDS.values()]


def test_scope_table_is_the_code_table() -> None:
    rows = table_rows(section("Scopes per route"))
    assert {route.strip("`"): scope.strip("`") for route, scope in rows} == dict(ROUTE_SCOPES)


def test_limits_table_is_the_code_table() -> None:
    rows = table_rows(section("Limits"))
    documented = {name.strip("`"): value for name, value, _ in rows}
    assert set(documented) == set(limits.__all__)
    for name, value in documented.items():
        assert float(value) == getattr(limits, name), name


def test_tokens_file_example_loads() -> None:
    (example,) = code_blocks(section("The tokens file"), "json")
    table = TokenTable.from_json(example)
    assert table.authenticate("Bearer read-only-token").scopes == {"recall"}


def test_filter_examples_parse_and_print_back() -> None:
    (examples, _) = code_blocks(section("The recall filter DSL (v0)"))
    for line in examples.splitlines():
        expr = parse_filter(line)
        assert parse_filter(format_filter(expr)) == expr


def test_filter_error_example_is_what_the_server_says() -> None:
    (example,) = code_blocks(section("The recall filter DSL (v0)"), "json")
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter("source = 'a' AND")
    assert json.loads(example) == invalid_filter(info.value).body()


def test_grammar_in_docs_is_the_modules() -> None:
    (grammar,) = code_blocks(section("Grammar"), "ebnf")
    docstring = memstore.protocol.filter.__doc__ or ""
    for rule in grammar.splitlines():
        assert " ".join(rule.split()) in " ".join(docstring.split()), rule


def test_the_package_needs_no_web_framework() -> None:
    code = (
        "import sys, memstore.protocol; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fastapi', 'starlette', 'uvicorn', 'prometheus_client', 'httpx')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_public_names() -> None:
    for name in memstore.protocol.__all__:
        assert getattr(memstore.protocol, name) is not None
