"""Arbitrary op batches to :class:`MemstoreStore`: an answer, or a clear error that changed nothing.

The contract a LangGraph user relies on: ``batch`` returns one result per op,
or raises a ``ValueError`` / :class:`~memstore.errors.MemstoreError` saying
what is wrong (never a ``TypeError``, ``KeyError`` or ``RecursionError`` from
inside), and a batch that raised left the store as it was: the same items in
the store and in its journal's export. Ops are drawn from LangGraph's own op
types with plausible and wild fields (namespaces with odd labels, values that
are not JSON, filters with unknown operators, keys and queries of the wrong
type), on a store with an index (a deterministic embedder) and one without.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from memstore.errors import MemstoreError
from memstore.integrations.langgraph import MemstoreStore
from tests.integrations.conftest import CharacterEmbeddings
from tests.journals import memory_state

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
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "caf\udce9", "x" * 5_000, "a.b", "$"]),
)
wild: st.SearchStrategy[Any] = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)
good_ns = st.lists(st.sampled_from(["users", "alice", "bob", "docs"]), min_size=1, max_size=3)
namespaces = st.one_of(
    *[good_ns.map(tuple)] * 4,
    st.lists(st.text(max_size=8), min_size=1, max_size=3).map(tuple),
    st.just(()),
    st.lists(leaf, max_size=2).map(tuple),
)
keys = st.one_of(*[st.sampled_from(["diet", "pet", "a/b"])] * 4, st.text(max_size=8), leaf)
good_value = st.fixed_dictionaries({"text": st.text(max_size=30)}, optional={"n": st.integers()})
values = st.one_of(*[good_value] * 4, st.none(), wild)
filters = st.one_of(
    st.none(),
    st.fixed_dictionaries({"n": st.integers(-3, 3)}),
    st.fixed_dictionaries(
        {"n": st.dictionaries(st.sampled_from(["$eq", "$gt", "$lte", "$in", "$bad"]), leaf)}
    ),
    wild,
)
ops = st.one_of(
    st.builds(GetOp, namespace=namespaces, key=keys),
    st.builds(
        PutOp,
        namespace=namespaces,
        key=keys,
        value=values,
        index=st.one_of(st.none(), st.just(False), st.lists(st.sampled_from(["text", "$"]))),
        ttl=st.one_of(st.none(), st.floats(-1, 60, allow_nan=False), leaf),
    ),
    st.builds(
        SearchOp,
        namespace_prefix=namespaces,
        filter=filters,
        limit=st.one_of(st.integers(-2, 20), leaf),
        offset=st.one_of(st.integers(-2, 5), leaf),
        query=st.one_of(st.none(), st.text(max_size=20), leaf),
    ),
    st.builds(
        ListNamespacesOp,
        match_conditions=st.one_of(
            st.none(),
            st.lists(
                st.builds(
                    MatchCondition,
                    match_type=st.sampled_from(["prefix", "suffix", "middle"]),
                    path=st.lists(st.sampled_from(["users", "*", "alice"]), max_size=2).map(tuple),
                ),
                max_size=2,
            ).map(tuple),
        ),
        max_depth=st.one_of(st.none(), st.integers(-1, 4), leaf),
        limit=st.one_of(st.integers(-2, 20), leaf),
        offset=st.one_of(st.integers(-2, 5), leaf),
    ),
)


def _state(store: MemstoreStore) -> tuple[str, dict[str, Any]]:
    return memory_state(store.memory)


@pytest.fixture(params=["plain", "indexed"])
def fuzzed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemstoreStore]:
    index = None
    if request.param == "indexed":
        index = {"dims": 16, "embed": CharacterEmbeddings(dims=16), "fields": ["text"]}
    with MemstoreStore(tmp_path / "lg", index=index) as store:  # type: ignore[arg-type]
        store.put(("users", "alice"), "diet", {"text": "vegetarian, cooks for two", "n": 1})
        store.put(("users", "bob"), "pet", {"text": "has a cat", "n": 2})
        yield store


def test_any_batch_answers_or_refuses_and_a_refusal_changes_nothing(
    fuzzed: MemstoreStore,
) -> None:
    @FUZZ
    @given(batch=st.lists(ops, min_size=1, max_size=2))
    def attempt(batch: list[Any]) -> None:
        before = _state(fuzzed)
        try:
            results = fuzzed.batch(batch)
        except (ValueError, MemstoreError):
            assert _state(fuzzed) == before, f"a refused batch changed the store: {batch!r}"
            return
        assert len(results) == len(batch)
        for op, result in zip(batch, results, strict=True):
            if isinstance(op, SearchOp):
                assert isinstance(result, list)
                for hit in result:
                    assert hit.score is None or math.isfinite(hit.score)

    attempt()
