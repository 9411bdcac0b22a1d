"""The filter semantics of MemstoreStore (docs/langgraph.md, "Filters"), one case per row.

Each row is a case where LangGraph's stores disagree with each other or with
JSON (langgraph#8786, #8759, #8829, #7795, #7684); MemstoreStore answers it one
way on every journal, so the same cases run on memory and on a SQLite folder.
"""

from __future__ import annotations

from typing import Any

import pytest

from memstore import Memory
from memstore.integrations.langgraph import MemstoreStore
from tests.pgtest import PgPlace

DOCS: dict[str, dict[str, Any]] = {
    "a": {"n": 10, "s": "apple", "obj": {"x": 1, "y": [1, 2]}, "tags": ["a", "b"], "ok": True},
    "b": {"n": 9.5, "s": "Banana", "obj": {"x": 1}, "tags": ["b"], "ok": 1, "user": {"id": 7}},
    "c": {"n": "10", "s": "cherry", "obj": {"$gt": 1}, "tags": [], "ok": False, "opt": None},
    "d": {"n": None, "user.id": 7, "user": {"id": 8}},
}
CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({"n": 10}, {"a"}),  # numbers are numbers: "10" is text
    ({"n": 10.0}, {"a"}),  # 10 == 10.0
    ({"n": {"$gt": 9}}, {"a", "b"}),  # numeric order, never text order ("10" < "9" as text)
    ({"n": {"$gte": 9.5, "$lt": 10}}, {"b"}),  # several operators: all hold
    ({"n": {"$gt": "1"}}, {"c"}),  # strings order against strings only
    ({"n": {"$ne": 10}}, {"b", "c", "d"}),  # $ne holds for other types and missing fields
    ({"n": None}, {"d"}),  # null matches null (and a missing field)
    ({"opt": None}, {"a", "b", "c", "d"}),  # a missing field reads as null
    ({"obj": {"x": 1}}, {"b"}),  # an object is a value: equal as a whole
    ({"obj": {"x": 1, "y": [1, 2]}}, {"a"}),
    ({"obj": {"$gt": 1}}, set()),  # $-keys are operators: {"$gt": 1} is not > 1
    ({"obj": {"$eq": {"$gt": 1}}}, {"c"}),  # ...but $eq compares with any value
    ({"tags": ["a", "b"]}, {"a"}),  # a list is a value: same items, same order
    ({"tags": ["b", "a"]}, set()),
    ({"tags": []}, {"c"}),
    ({"ok": True}, {"a"}),  # a boolean is not a number: True != 1
    ({"ok": 1}, {"b"}),
    ({"ok": {"$gt": 0}}, {"b"}),  # booleans are not ordered with numbers
    ({"user.id": 7}, {"b", "d"}),  # dotted keys reach into objects ("d" has the literal key)
    ({"user.id": 8}, set()),  # a literal top-level key wins over the path
    ({"s": {"$gte": "a"}}, {"a", "c"}),  # code-point order: "B" < "a"
    ({"n": {"$lt": float("inf")}}, {"a", "b"}),
    ({"n": {"$eq": float("nan")}}, set()),
    ({}, {"a", "b", "c", "d"}),  # an empty filter is no filter
]


@pytest.mark.parametrize(("flt", "expected"), CASES, ids=[repr(c[0]) for c in CASES])
def test_filter_semantics(store: MemstoreStore, flt: dict[str, Any], expected: set[str]) -> None:
    for key, value in DOCS.items():
        store.put(("docs",), key, value)
    assert {h.key for h in store.search(("docs",), filter=flt, limit=100)} == expected
    assert {h.key for h in store.search(("docs",), query="apple", filter=flt, limit=100)} == (
        expected
    )


def test_filter_semantics_on_postgresql(pg_place: PgPlace) -> None:
    """The same table on a PostgreSQL journal (a Memory given as it is)."""
    from memstore.journal.postgres import PostgresJournal

    memory = Memory(embedder=None, journal=PostgresJournal(pg_place.dsn, schema=pg_place.schema))
    try:
        with MemstoreStore(memory) as store:
            for key, value in DOCS.items():
                store.put(("docs",), key, value)
            for flt, expected in CASES:
                assert {h.key for h in store.search(("docs",), filter=flt, limit=100)} == expected
    finally:
        memory.close()
