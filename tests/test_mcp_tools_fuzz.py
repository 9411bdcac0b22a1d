"""Arbitrary arguments to every MCP tool, native and ``--compat knowledge-graph``.

The contract a client relies on: a call is answered (with an answer that can
be written as UTF-8 JSON) with a result that fits the tool's output schema,
or with a tool error (``isError``) saying what to send; never an exception
out of the tool layer (which the SDK would turn into a bare error carrying a
Python message); and a call refused with a tool error changed nothing (the
same export, the same items). Arguments are drawn from each tool's own input
schema, so a tool added later is driven too: plausible values (seeded ids
and names, small texts, in-range numbers) mixed with wild JSON (wrong types,
lone surrogates, huge numbers, deep lists); a string argument, however deep,
is now and then one holding a lone surrogate.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import types

from memstore.mcp.server import surface
from memstore.mcp.toolkit import Caller, Toolbox
from memstore.memory import Memory
from tests.journals import memory_state

SEEDED = ("alpha", "beta", "Alice", "Acme")
LONE = "Ali\udce9"
"""A string holding a lone surrogate: legal in JSON, never valid Unicode text."""
FUZZ = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

leaf: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["", " ", "caf\udce9", "x" * 20_000, "memory://x", "2026-13-45"]),
)
wild: st.SearchStrategy[Any] = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)


def _plausible(schema: dict[str, Any], defs: dict[str, Any], mix: bool) -> st.SearchStrategy[Any]:
    """Values ``schema`` (an input-schema property) accepts, or nearly."""
    if "$ref" in schema:
        return _plausible(defs[schema["$ref"].rsplit("/", 1)[1]], defs, mix)
    if "anyOf" in schema:
        return st.one_of(*[_plausible(s, defs, mix) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        seeded = st.sampled_from(SEEDED)
        # Now and then a lone surrogate (JSON carries one) where a name goes: deep in
        # an argument too, which a wild value alone rarely reaches.
        return st.one_of(seeded, seeded, st.text(min_size=1, max_size=16), st.just(LONE))
    if kind == "integer":
        return st.integers(schema.get("minimum", 1) - 1, schema.get("maximum", 100) + 1)
    if kind == "number":
        return st.floats(-0.5, 1.5, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(_value(schema.get("items", {}), defs, mix), max_size=3)
    if kind == "object":
        return _object(schema, defs, mix)
    return wild


def _value(schema: dict[str, Any], defs: dict[str, Any], mix: bool) -> st.SearchStrategy[Any]:
    """A plausible value; with ``mix``, now and then a wild one instead."""
    good = _plausible(schema, defs, mix)
    return st.one_of(good, wild) if mix else good


def _object(
    schema: dict[str, Any], defs: dict[str, Any], mix: bool
) -> st.SearchStrategy[dict[str, Any]]:
    props = schema.get("properties", {})
    required = set(schema.get("required", ()))
    body = st.fixed_dictionaries(
        {k: _value(p, defs, mix) for k, p in props.items() if k in required},
        optional={k: _value(p, defs, mix) for k, p in props.items() if k not in required},
    )
    return st.one_of(body, body.map(lambda b: {**b, "unexpected": 1})) if mix else body


def arguments(tool: types.Tool) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for ``tool``: drawn from its input schema, or any JSON object at all.

    Always an object: the SDK refuses other ``arguments`` itself (-32602).
    """
    schema = tool.inputSchema
    anything = st.dictionaries(st.text(max_size=8), wild, max_size=3)
    defs = schema.get("$defs", {})
    return st.one_of(_object(schema, defs, False), _object(schema, defs, True), anything)


def _seed(mem: Memory) -> None:
    mem.add("alpha note about the billing service", id="alpha")
    mem.add("beta note about the deploy", id="beta")
    mem.link("alpha", "beta", "explains")


def _tools(compat: str | None) -> list[str]:
    with Memory(embedder=None) as mem:
        return [t.name for t in surface(mem, compat=compat).toolbox.describe()]


CASES = [(None, name) for name in _tools(None)] + [
    ("knowledge-graph", name) for name in _tools("knowledge-graph")
]


@pytest.fixture
def toolbox_of(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Memory, Toolbox]]:
    compat = request.param
    with Memory(tmp_path, embedder="hash") as mem:
        _seed(mem)
        if compat is not None:
            setup = surface(mem, compat=compat).toolbox
            entities = {"entities": [{"name": "Alice", "entityType": "person", "observations": []}]}
            anyio.run(setup.call, "create_entities", entities, Caller())
        yield mem, surface(mem, compat=compat).toolbox


@pytest.mark.parametrize(
    ("toolbox_of", "name"), CASES, indirect=["toolbox_of"], ids=[n for _, n in CASES]
)
def test_any_arguments_get_a_result_or_a_tool_error_that_changes_nothing(
    toolbox_of: tuple[Memory, Toolbox], name: str
) -> None:
    mem, toolbox = toolbox_of
    tool = next(t for t in toolbox.describe() if t.name == name)

    @FUZZ
    @given(args=arguments(tool))
    def attempt(args: Any) -> None:
        before = memory_state(mem)
        result = anyio.run(toolbox.call, name, args, Caller())
        # The answer can be sent: the SDK writes it as UTF-8 JSON, and an answer it cannot
        # write (an argument's lone surrogate echoed into it) is an empty HTTP body.
        result.model_dump_json(by_alias=True, exclude_none=True)
        text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
        if result.isError:
            assert text, "a tool error says what is wrong"
            assert memory_state(mem) == before, f"{name}({args!r}) failed but changed the memory"
        else:
            assert tool.outputSchema is not None
            jsonschema.validate(result.structuredContent, tool.outputSchema)

    attempt()
