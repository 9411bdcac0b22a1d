"""MemstoreStore against LangGraph's own InMemoryStore on generated operation sequences.

Puts, deletes, gets, namespace listings and filtered searches without a query
must give the same answers. Two documented differences are allowed for:

- order: without a query InMemoryStore returns items in dict insertion order,
  MemstoreStore newest update first (ties by namespace, then key). Whole result
  sets are compared as sets, and each page is checked to be a slice of that order;
- listing: InMemoryStore keeps listing a namespace after its last item is
  deleted (and one that was only read, through its ``defaultdict``); MemstoreStore
  lists only namespaces that hold an item. The reference listing drops those.

Values and filters are drawn where the two filter semantics agree (numbers in
``n``, booleans only in ``flag``, objects of one shape); where they differ
(dotted keys, ``true == 1``, ordering a string against a number) the tests in
``test_langgraph_filters.py`` pin memstore's semantics.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore

from memstore.integrations.langgraph import MemstoreStore
from tests.integrations.conftest import CharacterEmbeddings

LABELS = ["a", "b c", "*", "ü%2E,"]
KEYS = ["k1", "k2", "k 3"]
namespaces = st.lists(st.sampled_from(LABELS), min_size=1, max_size=3).map(tuple)
numbers = st.one_of(
    st.integers(-5, 5), st.floats(-5, 5, allow_nan=False, allow_infinity=False, width=32)
)
words = st.sampled_from(["red", "blue", "green", "Red", ""])
values = st.fixed_dictionaries(
    {
        "n": numbers,
        "s": words,
        "flag": st.booleans(),
        "tags": st.lists(words, max_size=2),
        "obj": st.fixed_dictionaries({"k": st.integers(0, 2)}),
    },
    optional={"opt": words},
)
conditions = st.one_of(
    st.tuples(st.just("n"), numbers),
    st.tuples(
        st.just("n"),
        st.dictionaries(
            st.sampled_from(["$gt", "$gte", "$lt", "$lte", "$eq", "$ne"]),
            numbers,
            min_size=1,
            max_size=2,
        ),
    ),
    st.tuples(st.just("s"), words),
    st.tuples(st.just("s"), st.dictionaries(st.sampled_from(["$eq", "$ne"]), words, min_size=1)),
    st.tuples(st.just("flag"), st.booleans()),
    st.tuples(st.just("tags"), st.lists(words, max_size=2)),
    st.tuples(st.just("obj"), st.fixed_dictionaries({"k": st.integers(0, 2)})),
    st.tuples(st.just("opt"), st.one_of(words, st.none())),
    st.tuples(st.just("opt"), st.fixed_dictionaries({"$ne": words})),
)
filters = st.one_of(st.none(), st.lists(conditions, max_size=2).map(dict))
prefixes = st.lists(st.sampled_from(LABELS), max_size=2).map(tuple)
patterns = st.one_of(
    st.none(), st.lists(st.sampled_from([*LABELS, "*"]), min_size=1, max_size=2).map(tuple)
)
ops = st.one_of(
    st.tuples(st.just("put"), namespaces, st.sampled_from(KEYS), values),
    st.tuples(st.just("delete"), namespaces, st.sampled_from(KEYS)),
    st.tuples(st.just("get"), namespaces, st.sampled_from(KEYS)),
    st.tuples(st.just("search"), prefixes, filters, st.integers(0, 6), st.integers(0, 4)),
    st.tuples(
        st.just("list"),
        patterns,
        patterns,
        st.one_of(st.none(), st.integers(1, 3)),
        st.integers(0, 6),
        st.integers(0, 3),
    ),
)


def _rows(items: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((it.namespace, it.key, repr(sorted(it.value.items()))) for it in items)


def _check(ours: MemstoreStore, ref: InMemoryStore, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "put":
        _, ns, key, value = op
        ours.put(ns, key, value)
        ref.put(ns, key, value)
    elif kind == "delete":
        _, ns, key = op
        ours.delete(ns, key)
        ref.delete(ns, key)
    elif kind == "get":
        _, ns, key = op
        mine, theirs = ours.get(ns, key), ref.get(ns, key)
        assert (mine is None) == (theirs is None)
        if mine is not None and theirs is not None:
            assert (mine.namespace, mine.key, mine.value) == (
                theirs.namespace,
                theirs.key,
                theirs.value,
            )
    elif kind == "search":
        _, prefix, flt, limit, offset = op
        every = ours.search(prefix, filter=flt, limit=1000)
        assert _rows(every) == _rows(ref.search(prefix, filter=flt, limit=1000))
        page = ours.search(prefix, filter=flt, limit=limit, offset=offset)
        assert [(it.namespace, it.key) for it in page] == [
            (it.namespace, it.key) for it in every[offset : offset + limit]
        ]
        assert len(page) == len(ref.search(prefix, filter=flt, limit=limit, offset=offset))
    else:
        _, prefix, suffix, depth, limit, offset = op
        listed = [
            ns
            for ns in ref.list_namespaces(prefix=prefix, suffix=suffix, limit=10**6)
            if ref._data.get(ns)  # see the module docstring: held namespaces only
        ]
        expect = sorted({ns[:depth] for ns in listed}) if depth is not None else sorted(listed)
        got = ours.list_namespaces(
            prefix=prefix, suffix=suffix, max_depth=depth, limit=limit, offset=offset
        )
        assert got == expect[offset : offset + limit]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=4, max_size=40))
def test_same_answers_as_inmemorystore(sequence: list[tuple[Any, ...]]) -> None:
    ref = InMemoryStore()
    with MemstoreStore() as ours:
        for op in sequence:
            _check(ours, ref, op)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(ops, st.just(("reopen",))), min_size=4, max_size=30))
def test_same_answers_across_reopens(sequence: list[tuple[Any, ...]]) -> None:
    """The same, on a SQLite folder closed and reopened between operations."""
    ref = InMemoryStore()
    with tempfile.TemporaryDirectory() as folder:
        ours = MemstoreStore(Path(folder) / "m")
        try:
            for op in sequence:
                if op[0] == "reopen":
                    ours.close()
                    ours = MemstoreStore(Path(folder) / "m")
                else:
                    _check(ours, ref, op)
        finally:
            ours.close()


# ------------------------------------------------------------- with an index

TEXTS = ["banana bread", "egg noodles", "kiwi sorbet", "banana split", "garlic", "lemon tart"]
TITLES = ["Baking", "Pasta night", "Desserts", "Fruit", "Sides"]
"""Never one of TEXTS: InMemoryStore fails a put whose two fields hold the same text."""
indexed_ops = st.one_of(
    st.tuples(
        st.just("put"),
        namespaces,
        st.sampled_from(KEYS),
        st.fixed_dictionaries({"text": st.sampled_from(TEXTS), "title": st.sampled_from(TITLES)}),
    ),
    st.tuples(st.just("delete"), namespaces, st.sampled_from(KEYS)),
    st.tuples(
        st.just("search"),
        prefixes,
        st.sampled_from([*TEXTS[:4], " banana ", "  ", "\n"]),
        st.integers(0, 6),
        st.integers(0, 4),
    ),
)


PER_KEY_INDEX: dict[str, list[str] | None] = {"k1": None, "k2": ["title"], "k 3": ["text"]}
"""Each key's ``index``, the same at every put of it (see the test's docstring)."""


def _scored(items: list[Any]) -> dict[tuple[Any, str], float | None]:
    return {(it.namespace, it.key): it.score for it in items}


def _same_scores(mine: list[Any], theirs: list[Any]) -> None:
    a, b = _scored(mine), _scored(theirs)
    assert a.keys() == b.keys()
    for where, score in a.items():
        other = b[where]
        assert (score is None) == (other is None), where
        if score is not None and other is not None:
            assert abs(score - other) < 1e-4, where


def _run_indexed(ours: MemstoreStore, ref: InMemoryStore, op: tuple[Any, ...], go: Any) -> None:
    """One op on both stores; ``go(store, method, *args, **kw)`` calls sync or async."""
    if op[0] == "put":
        _, ns, key, value = op
        index = PER_KEY_INDEX[key]
        go(ours, "put", ns, key, value, index=index)
        go(ref, "put", ns, key, value, index=index)
    elif op[0] == "delete":
        _, ns, key = op
        go(ours, "delete", ns, key)
        go(ref, "delete", ns, key)
    else:
        _, prefix, query, limit, offset = op
        every = go(ours, "search", prefix, query=query, limit=1000)
        _same_scores(every, go(ref, "search", prefix, query=query, limit=1000))
        scores = [it.score for it in every]
        assert scores == sorted(scores, key=lambda s: -s if s is not None else 2.0)
        page = go(ours, "search", prefix, query=query, limit=limit, offset=offset)
        assert [(i.namespace, i.key) for i in page] == [
            (i.namespace, i.key) for i in every[offset : offset + limit]
        ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(indexed_ops, min_size=2, max_size=25), st.booleans())
def test_vector_scores_and_order_match_inmemorystore(
    sequence: list[tuple[Any, ...]], use_async: bool
) -> None:
    """With an index, ``ranking="vector"``: the same items, scores and score order.

    A query is embedded as it is given, as LangGraph's stores embed it: one with
    blanks around it (``" banana "``) or only blanks (``"  "``) is scored by
    its own vector, never by the stripped text's (or not at all).

    Every put has both indexed fields, and each key is put with one ``index``
    (the store's fields, or one of them; never ``False``): InMemoryStore keeps
    an item's old field vectors when a later put indexes fewer fields, a stale
    score memstore does not reproduce.
    """
    emb = CharacterEmbeddings(dims=32)
    index: Any = {"dims": 32, "embed": emb, "fields": ["text", "title"]}
    ref = InMemoryStore(index=index)
    with MemstoreStore(index=index, ranking="vector") as ours:
        if use_async:
            with asyncio.Runner() as runner:

                def go(store: Any, method: str, *args: Any, **kw: Any) -> Any:
                    return runner.run(getattr(store, "a" + method)(*args, **kw))

                for op in sequence:
                    _run_indexed(ours, ref, op, go)
        else:

            def go(store: Any, method: str, *args: Any, **kw: Any) -> Any:
                return getattr(store, method)(*args, **kw)

            for op in sequence:
                _run_indexed(ours, ref, op, go)
