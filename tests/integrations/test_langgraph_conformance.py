"""MemstoreStore against InMemoryStore where ``test_langgraph_differential.py`` does not reach.

That test drives the two stores with one op per call, valid arguments only.
This one adds what LangGraph's ``BaseStore`` also defines:

- **refusals**: the public methods with invalid namespaces (empty labels,
  labels with ``.`` or NUL, labels that are not text, an empty namespace, a
  ``"langgraph"`` root for a put) and odd keys (empty, dotted, NUL, a number
  the base class turns into text) must raise the same error as InMemoryStore
  or succeed as it does, and a refused call changes nothing;
- **batches** of several ops, sync and async, each op's result compared. The
  reads come before the writes: LangGraph's stores answer every read of a
  batch from the state before it, memstore runs the ops in order
  (docs/langgraph.md), and the two agree when no read follows a write;
- **searches with a query** on a store without an index: the same items,
  every score ``None``;
- **timestamps**: every item carries aware ``datetime`` stamps with
  ``created_at <= updated_at``; a put of an existing key keeps ``created_at``
  (InMemoryStore resets it, LangGraph's SQL stores keep it, as memstore does);
- **order**: a search without a query is newest update first, ties by
  namespace (as a tuple of labels), then key. The clock here moves only when
  the sequence says, so ties are common.

Where the two differ on purpose (an empty namespace in ``get``/``delete``,
``json.loads(json.dumps(value))``, the listing of emptied namespaces, the
filter semantics) docs/langgraph.md says so and the draw avoids or maps it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from memstore import Config, Memory
from memstore.integrations.langgraph import MemstoreStore
from tests.conftest import FakeClock
from tests.integrations.conftest import CharacterEmbeddings
from tests.integrations.test_langgraph_differential import filters, values
from tests.pgtest import Schemas

LABELS = ["a", "b c", "*", "ü%2E,", "a b", "langgraph"]
BAD_LABELS: list[Any] = ["", "x.y", "n\x00l", 7, None]
KEYS: list[Any] = ["k1", "", "a.b", "*", "k\x00", 3]
"""Odd keys both stores take (``3`` becomes ``"3"`` in ``BaseStore``'s methods)."""
QUERIES = ["red", "blue green", "k1", "nothing here"]

good_ns = st.lists(st.sampled_from(LABELS), min_size=1, max_size=3).map(tuple)
bad_ns = st.lists(st.sampled_from(LABELS + BAD_LABELS), min_size=1, max_size=3).map(tuple)
any_ns = st.integers(0, 5).flatmap(
    lambda n: st.just(()) if n == 0 else bad_ns if n == 1 else good_ns
)
"""Four in six a valid namespace, else the empty one or labels drawn with invalid ones."""
prefixes = st.integers(0, 3).flatmap(
    lambda n: bad_ns if n == 0 else st.lists(st.sampled_from(LABELS), max_size=2).map(tuple)
)
patterns = st.one_of(st.none(), prefixes)
queries = st.one_of(st.none(), st.sampled_from(QUERIES))
pages = st.tuples(st.integers(0, 5), st.integers(0, 3))

CALLS: dict[str, st.SearchStrategy[tuple[Any, ...]]] = {
    "put": st.tuples(st.just("put"), any_ns, st.sampled_from(KEYS), values),
    "get": st.tuples(st.just("get"), any_ns, st.sampled_from(KEYS)),
    "delete": st.tuples(st.just("delete"), any_ns, st.sampled_from(KEYS)),
    "search": st.tuples(st.just("search"), prefixes, queries, filters, pages),
    "list": st.tuples(
        st.just("list"), patterns, patterns, st.one_of(st.none(), st.integers(0, 3)), pages
    ),
    "tick": st.tuples(st.just("tick")),
}
str_keys = st.sampled_from([k for k in KEYS if isinstance(k, str)])
read_ops = st.one_of(
    st.builds(lambda ns, key: GetOp(ns, key), good_ns, str_keys),
    st.builds(
        lambda p, q, f, page: SearchOp(p, f, page[0], page[1], q),
        st.lists(st.sampled_from(LABELS), max_size=2).map(tuple),
        queries,
        filters,
        pages,
    ),
    st.builds(
        lambda p, d, page: ListNamespacesOp(
            (MatchCondition("prefix", p),) if p else None, d, page[0], page[1]
        ),
        st.lists(st.sampled_from([*LABELS, "*"]), max_size=2).map(tuple),
        st.one_of(st.none(), st.integers(0, 3)),
        pages,
    ),
)
write_ops = st.builds(
    lambda ns, key, value: PutOp(ns, key, value),
    good_ns,
    str_keys,
    st.one_of(values, values, st.none()),
)
CALLS["batch"] = st.tuples(
    st.just("batch"), st.lists(read_ops, max_size=4), st.lists(write_ops, max_size=4)
)
steps = st.sampled_from(["put", "put", "put", "get", "search", *CALLS]).flatmap(CALLS.__getitem__)
"""Puts four times as often as deletes, ticks, listings or batches: a store with items in it."""

Outcome = tuple[str, Any]
Stamps = dict[tuple[tuple[str, ...], str], dt.datetime]


def _outcome(call: Callable[[], Any]) -> Outcome:
    try:
        return "ok", call()
    except (ValueError, TypeError, NotImplementedError) as e:
        return "raised", type(e)


def _stamps_ok(it: Item) -> None:
    assert isinstance(it.created_at, dt.datetime) and isinstance(it.updated_at, dt.datetime)
    assert it.created_at.utcoffset() is not None and it.updated_at.utcoffset() is not None
    assert it.created_at <= it.updated_at
    assert isinstance(it.namespace, tuple) and isinstance(it.key, str)


def _row(it: Item) -> tuple[tuple[str, ...], str, Any]:
    return it.namespace, it.key, repr(sorted(it.value.items()))


def _same_item(mine: Any, theirs: Any, created: Stamps) -> None:
    assert (mine is None) == (theirs is None)
    if mine is None:
        return
    assert type(mine) is type(theirs) and _row(mine) == _row(theirs)
    _stamps_ok(mine)
    assert mine.created_at == created[mine.namespace, mine.key]


def _same_search(mine: list[Any], theirs: list[Any], every: list[Any], page: Any) -> None:
    """One page: as long as the reference's, a slice of the full ``every``, no scores."""
    limit, offset = page
    assert len(mine) == len(theirs)
    assert [_row(it) for it in mine] == [_row(it) for it in every[offset : offset + limit]]
    assert all(type(it) is SearchItem and it.score is None for it in mine)


def _listing(ref: InMemoryStore, op: ListNamespacesOp) -> list[tuple[str, ...]]:
    """The reference's answer to ``op``, of held namespaces only (docs/langgraph.md, "Namespaces").

    InMemoryStore keeps listing a namespace whose last item was deleted (or
    that was only read); memstore lists the namespaces that hold an item.
    """
    wide: Any = ref.batch([op._replace(max_depth=None, limit=10**6, offset=0)])[0]
    held: list[tuple[str, ...]] = [ns for ns in wide if ref._data.get(ns)]
    if op.max_depth is not None:
        held = sorted({ns[: op.max_depth] for ns in held})
    return held[op.offset : op.offset + op.limit]


def _wide(op: SearchOp) -> SearchOp:
    return op._replace(limit=10**4, offset=0)


class Pair:
    """The two stores and what the test remembers of memstore's stamps."""

    def __init__(self, ours: MemstoreStore, clock: FakeClock, run: Callable[..., Any]) -> None:
        self.ours, self.ref, self.clock, self.run = ours, InMemoryStore(), clock, run
        self.created: Stamps = {}

    def call(self, store: Any, name: str, *args: Any, **kw: Any) -> Any:
        """``store.name(...)``, or its async form when the pair runs async."""
        return self.run(store, name, *args, **kw)

    def both(self, name: str, *args: Any, **kw: Any) -> tuple[Outcome, Outcome]:
        return (
            _outcome(lambda: self.call(self.ours, name, *args, **kw)),
            _outcome(lambda: self.call(self.ref, name, *args, **kw)),
        )

    def everything(self) -> list[SearchItem]:
        """Every item of memstore's store, checked against the reference and the order."""
        mine: list[SearchItem] = self.call(self.ours, "search", (), limit=10**4)
        theirs = self.call(self.ref, "search", (), limit=10**4)
        assert sorted(map(_row, mine)) == sorted(map(_row, theirs))
        order = sorted(mine, key=lambda it: (-it.updated_at.timestamp(), it.namespace, it.key))
        assert [_row(it) for it in mine] == [_row(it) for it in order]
        for it in mine:
            _stamps_ok(it)
            assert it.created_at == self.created[it.namespace, it.key]
        return mine

    def note_put(self, ns: tuple[str, ...], key: str, existed: bool) -> None:
        got = self.ours.get(ns, key)
        assert got is not None
        if existed:  # a put of an existing key keeps created_at
            assert got.created_at == self.created[ns, key]
        self.created[ns, key] = got.created_at

    def step(self, c: tuple[Any, ...]) -> None:
        kind = c[0]
        if kind == "tick":
            self.clock.advance(dt.timedelta(seconds=1))
        elif kind == "put":
            _, ns, key, value = c
            existed = self.ref._data.get(ns, {}).get(str(key)) is not None
            mine, theirs = self.both("put", ns, key, value)
            assert mine == theirs
            if mine[0] == "ok":
                self.note_put(ns, str(key), existed)
            else:
                self.everything()  # a refused put changed nothing
        elif kind in ("get", "delete"):
            self.get_or_delete(kind, c[1], c[2])
        elif kind == "search":
            self.search(*c[1:])
        elif kind == "list":
            _, prefix, suffix, depth, (limit, offset) = c
            kw = {"prefix": prefix, "suffix": suffix, "max_depth": depth}
            mine, theirs = self.both("list_namespaces", **kw, limit=limit, offset=offset)
            assert mine[0] == theirs[0] and (mine[0] == "ok" or mine == theirs)
            if mine[0] == "ok":
                conds = (
                    MatchCondition("prefix", prefix or ()),
                    MatchCondition("suffix", suffix or ()),
                )
                op = ListNamespacesOp(tuple(x for x in conds if x.path), depth, limit, offset)
                assert mine[1] == _listing(self.ref, op)
        else:
            self.batch(c[1], c[2])

    def get_or_delete(self, kind: str, ns: tuple[Any, ...], key: Any) -> None:
        mine, theirs = self.both(kind, ns, key)
        if ns == ():  # documented: memstore refuses, InMemoryStore answers None
            assert mine == ("raised", InvalidNamespaceError) and theirs == ("ok", None)
            return
        assert mine[0] == theirs[0]
        if mine[0] == "raised":
            assert mine == theirs
        elif kind == "get":
            _same_item(mine[1], theirs[1], self.created)
        else:
            self.created.pop((ns, str(key)), None)

    def search(self, prefix: Any, query: Any, flt: Any, page: tuple[int, int]) -> None:
        kw = {"query": query, "filter": flt}
        mine, theirs = self.both("search", prefix, **kw, limit=page[0], offset=page[1])
        assert mine[0] == theirs[0]
        if mine[0] == "raised":
            assert mine == theirs
            return
        every = self.call(self.ours, "search", prefix, **kw, limit=10**4)
        full = self.call(self.ref, "search", prefix, **kw, limit=10**4)
        assert sorted(map(_row, every)) == sorted(map(_row, full))
        _same_search(mine[1], theirs[1], every, page)

    def batch(self, reads: list[Any], writes: list[PutOp]) -> None:
        """One batch, its reads first; each read's answer is the state before the batch."""
        expected: list[Any] = []
        for op in reads:  # what each read must answer, from the state before the batch
            if isinstance(op, SearchOp):
                every = self.call(self.ours, "batch", [_wide(op)])[0]
                full = self.call(self.ref, "batch", [_wide(op)])[0]
                assert sorted(map(_row, every)) == sorted(map(_row, full))
                expected.append(every)
            elif isinstance(op, ListNamespacesOp):
                expected.append(_listing(self.ref, op))
            else:
                expected.append(None)
        deleted = {(op.namespace, op.key) for op in writes if op.value is None}
        kept = {
            (op.namespace, op.key)
            for op in writes
            if (op.namespace, op.key) not in deleted
            and self.ref._data.get(op.namespace, {}).get(op.key) is not None
        }
        mine = self.call(self.ours, "batch", [*reads, *writes])
        theirs = self.call(self.ref, "batch", [*reads, *writes])
        assert len(mine) == len(theirs) == len(reads) + len(writes)
        for op, a, b, want in zip(reads, mine, theirs, expected, strict=False):
            if isinstance(op, GetOp):
                _same_item(a, b, self.created)
            elif isinstance(op, SearchOp):
                _same_search(a, b, want, (op.limit, op.offset))
            else:
                assert a == want
        assert mine[len(reads) :] == theirs[len(reads) :] == [None] * len(writes)
        for ns, key in {(op.namespace, op.key): None for op in writes}:
            if self.ref._data.get(ns, {}).get(key) is None:
                self.created.pop((ns, key), None)
            else:
                self.note_put(ns, key, (ns, key) in kept)


def _run(sequence: list[tuple[Any, ...]], use_async: bool, journal: Any = None) -> None:
    clock = FakeClock()
    memory = Memory(embedder=None, journal=journal, config=Config(clock=clock))
    with memory, MemstoreStore(memory) as ours, asyncio.Runner() as runner:

        def run(store: Any, name: str, *args: Any, **kw: Any) -> Any:
            if use_async:
                return runner.run(getattr(store, "a" + name)(*args, **kw))
            return getattr(store, name)(*args, **kw)

        pair = Pair(ours, clock, run)
        for c in sequence:
            pair.step(c)
        pair.everything()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(steps, min_size=6, max_size=30), st.booleans())
def test_the_same_answers_and_refusals_as_inmemorystore(
    sequence: list[tuple[Any, ...]], use_async: bool
) -> None:
    """Public methods and batches, sync or async: the same items, errors and listings."""
    _run(sequence, use_async)


def test_ties_in_update_time_go_by_namespace_labels_then_key() -> None:
    """Items updated at one instant come in the order of their namespaces as tuples.

    The reproducer: ``("a b",)`` is kept under the partition ``a%20b``, which
    sorts before ``a.b``, the partition of ``("a", "b")``; as tuples of labels
    ``("a", "b")`` comes first, as ``list_namespaces`` lists them.
    """
    clock = FakeClock()
    names = [("a", "b"), ("a b",), ("a-b",), ("a", "*"), ("a",), ("a", "b", "c"), ("ü",), ("A",)]
    with MemstoreStore(Memory(embedder=None, config=Config(clock=clock))) as store:
        store.batch([PutOp(ns, key, {"v": 1}) for ns in names for key in ("k", "K", "é")])
        order = [(it.namespace, it.key) for it in store.search((), limit=100)]
        assert order == sorted((ns, key) for ns in names for key in ("k", "K", "é"))
        assert store.list_namespaces() == sorted(names)


@settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(steps, min_size=6, max_size=20), st.booleans())
def test_the_same_answers_on_a_postgresql_journal(
    pg_schemas: Schemas, sequence: list[tuple[Any, ...]], use_async: bool
) -> None:
    """The same comparison on a PostgreSQL journal, a fresh schema per example."""
    from memstore.journal.postgres import PostgresJournal

    place = pg_schemas.new("lgc")
    _run(sequence, use_async, PostgresJournal(place.dsn, schema=place.schema))


def test_a_put_replaces_the_field_vectors_whole() -> None:
    """A field the new value lacks no longer scores it (docs/langgraph.md, on purpose).

    InMemoryStore keeps the vector an earlier put made for ``text``, so there
    ``"banana bread"`` still scores 1.0 against a value that no longer holds it.
    """
    emb = CharacterEmbeddings(dims=16)
    index: Any = {"dims": 16, "embed": emb, "fields": ["text", "title"]}
    with MemstoreStore(index=index, ranking="vector") as store:
        store.put(("a",), "k", {"text": "banana bread", "title": "zzz"})
        store.put(("a",), "k", {"title": "zzz"})
        store.put(("a",), "only-title", {"title": "zzz"})
        scores = {h.key: h.score for h in store.search(("a",), query="banana bread")}
        score = scores["k"]
        assert score is not None and score == scores["only-title"] and score < 0.5
