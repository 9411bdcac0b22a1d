"""Every tool ``memstore mcp`` lists, called with arguments its own schema forbids.

A real server (``memstore mcp`` over stdio, native and ``--compat
knowledge-graph``) is asked for ``tools/list``; for each tool and each
property of its ``inputSchema`` the test makes arguments that break the
schema in one place: a value of another JSON type (``"5"`` or ``true`` for an
integer, ``1`` or ``"true"`` for a boolean, a number for a string...), a
number past ``minimum``/``maximum``, a string shorter than ``minLength`` or
longer than ``maxLength``, an array past ``minItems``/``maxItems``, a word
outside an ``enum``, an array item breaking its own schema, a required
property left out. ``jsonschema`` confirms each breaks the advertised schema.

Each call must be a tool error (``isError``) whose message names the
argument, without a Python traceback, and nothing may change: the folder's
export after the server exits is the one before it started. The documented
leniencies (docs/mcp.md, "The tools") are not violations of the contract and
are not drawn: the alias names (``q``, ``k``, ``id``...), which the schema
does not list, and one id given as text where ``ids`` takes a list.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import types

from memstore.mcp.server import surface
from memstore.mcp.toolkit import Caller
from memstore.memory import Memory
from tests.journals import memory_state
from tests.mcp_harness import stdio

SAMPLES: dict[str, list[Any]] = {
    "string": ["5", "true"],
    "integer": [5],
    "number": [2.5],
    "boolean": [True],
    "null": [None],
    "array": [["alpha"]],
    "object": [{"x": 1}],
}
"""A value of each JSON type; a property is given those of the types it does not take."""
LENIENT = {("get_memory", "ids"), ("forget", "ids")}
"""Where one id as text stands for a list of one (docs/mcp.md): not drawn as a string."""


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        return _resolve(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
    return schema


def _branches(schema: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives of a property (``anyOf``), each resolved."""
    schema = _resolve(schema, defs)
    return [_resolve(s, defs) for s in schema.get("anyOf", [schema])]


def _valid(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """A value ``schema`` takes (the first alternative's simplest)."""
    s = _branches(schema, defs)[0]
    if "enum" in s:
        return s["enum"][0]
    if "const" in s:
        return s["const"]
    kind = s.get("type")
    if kind == "object":
        return {
            k: _valid(p, defs)
            for k, p in s.get("properties", {}).items()
            if k in s.get("required", ())
        }
    if kind == "array":
        return [_valid(s.get("items", {}), defs)] * max(1, s.get("minItems", 1))
    if kind in ("integer", "number"):
        return s.get("minimum", 1)
    return {"boolean": False, "null": None}.get(str(kind), "alpha")


def _breaking(schema: dict[str, Any], defs: dict[str, Any]) -> Iterator[Any]:
    """Values that break ``schema`` in one way each."""
    alts = _branches(schema, defs)
    takes = {s.get("type") for s in alts}
    if "number" in takes:
        takes.add("integer")
    for kind, samples in SAMPLES.items():
        if kind not in takes:
            yield from samples
    for s in alts:
        if "enum" in s:
            yield "not-one-of-them"
        if "minimum" in s:
            yield s["minimum"] - 1
        if "maximum" in s:
            yield s["maximum"] + 1
        if "minLength" in s:
            yield "x" * (s["minLength"] - 1)
        if "maxLength" in s:
            yield "x" * (s["maxLength"] + 1)
        if s.get("type") == "array":
            item = _valid(s.get("items", {}), defs)
            if s.get("minItems"):
                yield [item] * (s["minItems"] - 1)
            if "maxItems" in s:
                yield [item] * (s["maxItems"] + 1)
            for bad in _breaking(s.get("items", {}), defs):
                yield [bad]
        if s.get("type") == "object":
            good = _valid(s, defs)
            for name in s.get("required", ()):
                yield {k: v for k, v in good.items() if k != name}
            for name, prop in s.get("properties", {}).items():
                for bad in _breaking(prop, defs):
                    yield {**good, name: bad}


def cases(tool: types.Tool) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(argument named, arguments)`` breaking ``tool``'s input schema in one place."""
    schema = tool.inputSchema
    defs = schema.get("$defs", {})
    base = _valid(schema, defs)
    for name in schema.get("required", ()):
        yield name, {k: v for k, v in base.items() if k != name}
    for name, prop in schema.get("properties", {}).items():
        for bad in _breaking(prop, defs):
            if (tool.name, name) in LENIENT and isinstance(bad, str):
                continue
            args = {**copy.deepcopy(base), name: bad}
            try:
                jsonschema.validate(args, schema)
            except jsonschema.ValidationError:
                yield name, args


def _seed(folder: Path) -> None:
    with Memory(folder, embedder="hash") as mem:
        mem.add("alpha note about the billing service", id="alpha")
        mem.add("beta note about the deploy", id="beta")
        mem.link("alpha", "beta", "explains")
        setup = surface(mem, compat="knowledge-graph").toolbox
        alice = {"entities": [{"name": "alpha", "entityType": "person", "observations": ["x"]}]}
        anyio.run(setup.call, "create_entities", alice, Caller())


def _state(folder: Path) -> Any:
    with Memory(folder, embedder="hash") as mem:
        return memory_state(mem)


@pytest.mark.parametrize("compat", [None, "knowledge-graph"])
def test_arguments_the_schema_forbids_are_tool_errors_naming_them(
    tmp_path: Path, compat: str | None
) -> None:
    folder = tmp_path / "m"
    _seed(folder)
    before = _state(folder)
    wrong: list[str] = []

    async def main() -> int:
        calls = 0
        flags = ["--compat", compat] if compat else []
        async with stdio(folder, *flags) as c:
            for tool in (await c.session.list_tools()).tools:
                for name, args in cases(tool):
                    calls += 1
                    reply = await c.call(tool.name, args)
                    if not reply.error or name not in reply.text or "Traceback" in reply.text:
                        wrong.append(
                            f"{tool.name}({args!r:.120}): {reply.error} {reply.text!r:.160}"
                        )
        return calls

    assert anyio.run(main) > 40
    assert not wrong, "\n".join(wrong)
    assert _state(folder) == before


def test_a_whole_number_written_with_a_point_is_an_integer(tmp_path: Path) -> None:
    """``5.0`` is an integer to JSON Schema, so the tools take it; ``"5"`` they refuse."""
    with Memory(tmp_path / "m", embedder="hash") as mem:
        mem.add("alpha note", id="alpha")
        native = surface(mem).toolbox
        got = anyio.run(native.call, "recall", {"query": "alpha", "limit": 1.0}, Caller())
        assert not got.isError and got.structuredContent is not None
        assert len(got.structuredContent["hits"]) == 1
        refused = anyio.run(native.call, "recent", {"limit": "1"}, Caller())
        assert refused.isError and "limit: input should be a valid integer" in str(refused.content)
        graph = surface(mem, compat="knowledge-graph").toolbox
        page = anyio.run(graph.call, "read_graph", {"offset": 0.0, "limit": 3.0}, Caller())
        assert not page.isError and page.structuredContent is not None
        assert page.structuredContent["nextOffset"] is None


def test_a_limit_of_hundreds_of_digits_is_refused_without_echoing_them(tmp_path: Path) -> None:
    """Before: ``limit: 1e300`` (a whole number, so an integer) was refused with all 301
    digits of it in the message; now its first ten and its length (the engine's
    OutOfRangeError words it, for every adapter)."""
    with Memory(tmp_path / "m", embedder="hash") as mem:
        native = surface(mem).toolbox
        for tool, arguments in (("recall", {"query": "alpha"}), ("recent", {})):
            got = anyio.run(native.call, tool, {**arguments, "limit": 1e300}, Caller())
            assert got.isError
            text = got.content[0].text  # type: ignore[union-attr]
            assert "limit must be between 1 and" in text, text
            assert "got 1000000000... (301 digits)" in text, text
            assert str(int(1e300))[:40] not in text


def test_an_empty_id_is_refused_naming_the_argument(tmp_path: Path) -> None:
    """Before: ``forget`` and ``get_memory`` looked ``""`` up and answered, not as an error,
    "Forgot nothing. Not found: ." and "No memories. Not found: "."""
    with Memory(tmp_path / "m", embedder="hash") as mem:
        mem.add("alpha note", id="alpha")
        native = surface(mem).toolbox
        for tool in ("forget", "get_memory"):
            for arguments, where in (
                ({"ids": [""]}, "ids.0"),
                ({"ids": ["alpha", ""]}, "ids.1"),
                ({"ids": ""}, "ids.0"),
            ):
                got = anyio.run(native.call, tool, arguments, Caller())
                text = got.content[0].text  # type: ignore[union-attr]
                assert got.isError, (tool, arguments, text)
                assert text.startswith(f"{where}: string should have at least 1 character"), text
        assert mem.get("alpha") is not None  # the refused forget forgot nothing
