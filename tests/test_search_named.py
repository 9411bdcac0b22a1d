"""The subjects a query names: one rule, :meth:`Store.named_subjects`, for the signal and relevance.

The subject signal (``SearchConfig.subject_signal``) favours a hit whose
``subject`` the query names, and relevance counts a hit about another subject
than the one asked about as weaker evidence. Both read the same set, asked of
the store once per search: the subjects of the items the lexical index holds
(or ``service/`` tag values) whose every word is a word of the query. A subject
the index never indexed (an item of a host's data kind, kept out of the
lexical index but embedded) is therefore named by no query, on either path,
even when the semantic channel brings the item in.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Store
from memstore.search import SIGNAL_WEIGHT, SearchConfig, Searcher, SearchResult
from memstore.text import words
from memstore.vocabulary import Vocabulary
from memstore_index.cellstore import CellStore
from memstore_index.hash_embedder import HashEmbedder
from tests.conftest import FakeClock

_RECORD = "record"
"""A data kind: stored and embedded, never in the lexical index."""


def _env() -> tuple[Store, CellStore]:
    vocab = Vocabulary(data_kinds=lambda kind: kind == _RECORD)
    store = Store(
        Config(clock=FakeClock(dt.datetime(2023, 6, 14, 9, tzinfo=dt.UTC)), vocabulary=vocab)
    )
    cells = CellStore(HashEmbedder(dim=32))
    cells.attach(store)
    return store, cells


def _signal_scores(results: list[SearchResult]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in results:
        assert r.explanation is not None
        out[r.item.id] = r.explanation.signal_score or 0.0
    return out


def test_a_semantic_only_hit_whose_subject_the_index_never_saw_is_not_named() -> None:
    store, cells = _env()
    store.upsert(Item(id="d", kind=_RECORD, content="went camping at the lake", subject="Zed"))
    store.upsert(Item(id="n", kind="note", content="went camping at the lake", subject="Mel"))
    searcher = Searcher(SearchConfig(store=store, cells=lambda: cells, always_fuse=True))
    off = searcher.with_(lambda c: setattr(c, "subject_signal", False))

    # "Zed" is only the data item's subject: the index does not know it.
    q = "where did Zed go camping"
    assert store.named_subjects(q) == frozenset()
    got = searcher.hybrid_search(q)
    assert "d" in [r.item.id for r in got]  # found by the semantic channel alone
    assert [it.id for it, _ in store.keyword_hits(q, limit=10)[0]] == ["n"]
    assert _signal_scores(searcher.hybrid_search(q, explain=True)) == {"d": 0.0, "n": 0.0}
    want = off.hybrid_search(q)
    assert [(r.item.id, r.score, r.relevance) for r in got] == [
        (r.item.id, r.score, r.relevance) for r in want
    ]

    # Naming Mel as well: only Mel's turn gains, and relevance counts Zed's as about another.
    q = "where did Zed and Mel go camping"
    assert store.named_subjects(q) == frozenset({"Mel"})
    general = searcher.hybrid_search(q, explain=True)
    assert _signal_scores(general) == {"n": SIGNAL_WEIGHT, "d": 0.0}
    rel = {r.item.id: r.relevance for r in general}
    assert rel["d"] < rel["n"]
    lean = searcher.hybrid_search(q)
    assert [(r.item.id, r.score, r.relevance) for r in lean] == [
        (r.item.id, r.score, r.relevance) for r in general
    ]


SUBJECTS = ["", "Caroline", "caroline", "CAROLINE", "Jon Snow", "Snow", "payment-api", "Zed"]
TEXTS = ["painted a lake", "went camping", "pottery class", "payment api errors", "the beach"]
QUERIES = [
    "what did Caroline paint",
    "what did caroline and Jon do",
    "Jon Snow camping",
    "snow at the beach",
    "payment api errors",
    "Zed pottery class",
    "the beach",
]


@st.composite
def named_stores(draw: st.DrawFn) -> tuple[Store, CellStore]:
    store, cells = _env()
    for i in range(draw(st.integers(1, 12))):
        store.upsert(
            Item(
                id=f"i{i:02d}",
                kind=draw(st.sampled_from(["note", "note", _RECORD])),
                content=draw(st.sampled_from(TEXTS)),
                subject=draw(st.sampled_from(SUBJECTS)),
            )
        )
    return store, cells


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=named_stores(),
    query=st.sampled_from(QUERIES),
    cfg=st.sampled_from([{}, {"fusion": "rrf"}, {"always_fuse": True, "signal_weight": 0.5}]),
    limit=st.integers(1, 8),
)
def test_lean_and_general_paths_name_the_same_subjects(
    env: tuple[Store, CellStore], query: str, cfg: dict[str, Any], limit: int
) -> None:
    store, cells = env
    searcher = Searcher(SearchConfig(store=store, cells=lambda: cells, **cfg))
    lean = searcher.hybrid_search(query, limit=limit)
    general = searcher.hybrid_search(query, limit=limit, explain=True)  # the general path
    assert store.search_snapshot() is not None
    assert [(r.item.id, r.score, r.relevance) for r in lean] == [
        (r.item.id, r.score, r.relevance) for r in general
    ]
    # A hit gains the subject signal exactly when the store's rule names its subject.
    named = store.named_subjects(query)
    weight = searcher.config.signal_weight
    for id, bonus in _signal_scores(general).items():
        item = store.get(id)
        assert item is not None
        assert bonus == (weight if item.subject in named else 0.0)


def test_a_subject_whose_items_are_all_gone_is_named_no_more() -> None:
    store, _ = _env()
    store.upsert(Item(id="a", kind="note", content="went camping at the lake", subject="Mel"))
    store.upsert(Item(id="b", kind="note", content="painted a sunrise", subject="Mel"))
    q = "what did Mel paint"
    assert store.named_subjects(q) == {"Mel"}
    store.delete("a")
    assert store.named_subjects(q) == {"Mel"}  # "b" is still about Mel
    # Only the subject changes (same text): the lexicon's words stay as they were.
    store.upsert(Item(id="b", kind="note", content="painted a sunrise", subject="Caroline"))
    assert store.named_subjects(q) == frozenset()
    assert store.named_subjects("what did Caroline paint") == {"Caroline"}
    store.delete("b")
    assert store.named_subjects("what did Caroline paint") == frozenset()


_NAMES = ("Mel", "Caroline", "Jon Snow", "snow", "payment-api")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(("put", "put", "delete")),
            st.integers(0, 5),
            st.sampled_from(("", *_NAMES)),
            st.booleans(),
        ),
        max_size=30,
    ),
    st.sampled_from(
        ("what did Mel say", "Jon Snow and Caroline", "payment api errors", "snow day", "x")
    ),
)
def test_named_subjects_are_those_of_live_items(
    ops: list[tuple[str, int, str, bool]], query: str
) -> None:
    store, _ = _env()
    for op, n, subject, same_text in ops:
        id = f"i{n}"
        if op == "delete":
            store.delete(id)
        else:
            text = "the same words" if same_text else f"words {n} {subject}"
            store.upsert(Item(id=id, kind="note", content=text, subject=subject))
        qwords = set(words(query))
        live = {it.subject for it in store.items() if it.subject}
        expect = {s for s in live if set(words(s)) <= qwords and words(s)}
        assert store.named_subjects(query) == expect
