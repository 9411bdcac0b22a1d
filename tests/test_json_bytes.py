"""Every JSON answer's bytes: orjson where installed, the standard library as the oracle."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstore.web import jsonbytes
from memstore.web.jsonbytes import json_bytes, stdlib_json_bytes

orjson = pytest.importorskip("orjson")

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)  # no lone surrogates
_INT = st.integers(-(2**63), 2**64 - 1)
_SCALAR = st.one_of(st.none(), st.booleans(), _INT, _TEXT)
_FLOAT = st.floats(allow_nan=False, allow_infinity=False)


def _values(scalar: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalar,
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=5),
        max_leaves=30,
    )


def test_the_server_extra_brings_orjson_and_json_bytes_uses_it() -> None:
    assert jsonbytes._orjson is orjson  # installed with the server extra: the fast path runs
    answer = [{"id": [1, 162, 70], "text": 'é ✓ \u2028 "q" \\ \n', "score": 1.1, "ok": None}]
    assert json_bytes(answer) == orjson.dumps(answer, option=orjson.OPT_APPEND_NEWLINE)


@given(_values(_SCALAR))
def test_the_same_bytes_as_the_standard_library_without_floats(value: Any) -> None:
    assert json_bytes(value) == stdlib_json_bytes(value)


@given(_values(st.one_of(_SCALAR, _FLOAT)))
def test_the_same_value_as_the_standard_library_with_floats(value: Any) -> None:
    ours = json_bytes(value)
    assert ours.endswith(b"\n")
    assert json.loads(ours) == json.loads(stdlib_json_bytes(value))


@pytest.mark.parametrize(
    "value",
    [{"n": 2**64}, {"n": -(2**63) - 1}, {1: "int key"}, [{"deep": [2**100]}]],
)
def test_what_orjson_refuses_the_standard_library_writes(value: Any) -> None:
    with pytest.raises(TypeError):
        orjson.dumps(value)
    assert json_bytes(value) == stdlib_json_bytes(value)


def test_what_neither_takes_is_refused() -> None:
    with pytest.raises(TypeError):
        json_bytes({"x": {1, 2}})
    with pytest.raises(ValueError):
        stdlib_json_bytes({"x": math.nan})
