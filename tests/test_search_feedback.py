"""The second retrieval round (``SearchConfig.feedback_round``): pseudo-relevance feedback.

What a caller relies on: the round finds the second hop of a question, the
item that shares a rare word with the first hop's item but no word with the
question; it is off by default and then changes nothing; a confident lexical
answer never runs it; the results stay a valid ranking, the same on the lean
and the general path (``explain=True``), and the same from call to call. And
the term picker's own rules (:func:`~memstore.search._feedback.feedback_terms`).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Store
from memstore.lexical import token_weight
from memstore.search import SearchConfig, Searcher
from memstore.search._feedback import FEEDBACK_TERMS, feedback_query, feedback_terms
from memstore.text import STOP_WORDS, stem, words
from memstore_index.cellstore import CellStore
from tests.conftest import T0, FakeClock
from tests.test_search_differential import CONFIGS, PARTITIONS, WORDS, stores

FILLER = [
    "the weather was grey all week and the trains ran late",
    "we painted the kitchen a pale green colour on sunday",
    "the library closes early on public holidays",
    "my cousin is learning to play the cello",
]


def _two_hops() -> Store:
    """The first hop names the dog; only the second says where the dog likes to go."""
    store = Store(Config(clock=FakeClock(T0)))
    store.upsert(Item(id="hop1", kind="note", content="Caroline adopted a dog called Rufus"))
    store.upsert(Item(id="hop2", kind="note", content="Rufus loves running on Malibu beach"))
    for i, text in enumerate(FILLER):
        store.upsert(Item(id=f"f{i}", kind="note", content=text))
    return store


def _ids(searcher: Searcher, query: str, **kw: Any) -> list[str]:
    return [r.item.id for r in searcher.hybrid_search(query, **kw)]


QUESTION = "Where does Caroline's dog like to go?"


def test_the_second_round_finds_the_hop_that_shares_no_word_with_the_question() -> None:
    store = _two_hops()
    off = Searcher(SearchConfig(store=store))
    on = Searcher(SearchConfig(store=store, feedback_round=True))
    assert _ids(off, QUESTION) == ["hop1"]
    assert _ids(on, QUESTION) == ["hop1", "hop2"]


def test_an_explanation_names_the_feedback_channel() -> None:
    on = Searcher(SearchConfig(store=_two_hops(), feedback_round=True))
    by_id = {r.item.id: r for r in on.hybrid_search(QUESTION, explain=True)}
    second = by_id["hop2"].explanation
    assert second is not None and second.channels == ["feedback"]
    first = by_id["hop1"].explanation
    assert first is not None and first.channels == ["lexical", "feedback"]


def test_it_is_off_by_default() -> None:
    assert SearchConfig(store=Store()).feedback_round is False


def test_a_confident_lexical_answer_runs_no_second_round() -> None:
    store = _two_hops()
    off = Searcher(SearchConfig(store=store))
    on = Searcher(SearchConfig(store=store, feedback_round=True))
    query = "Caroline adopted a dog"  # hop1 covers every word: confident
    assert [(r.item.id, r.score) for r in on.hybrid_search(query)] == [
        (r.item.id, r.score) for r in off.hybrid_search(query)
    ]


def test_the_switch_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="feedback_round"):
        Searcher(SearchConfig(store=Store(), feedback_round=1))  # type: ignore[arg-type]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=stores(),
    config=st.sampled_from(CONFIGS),
    query=st.lists(st.sampled_from([*WORDS, "zebra"]), min_size=1, max_size=4),
    partition=st.sampled_from([*PARTITIONS, "*"]),
    limit=st.integers(1, 6),
    vectors=st.booleans(),
)
def test_with_the_round_on_results_are_a_valid_ranking_the_same_on_either_path(
    env: tuple[Store, CellStore, FakeClock],
    config: dict[str, Any],
    query: list[str],
    partition: str,
    limit: int,
    vectors: bool,
) -> None:
    store, cells, _ = env
    cfg = SearchConfig(
        store=store, cells=(lambda: cells) if vectors else None, feedback_round=True, **config
    )
    lean, general = Searcher(cfg), Searcher(cfg)
    q = " ".join(query)
    got = lean.hybrid_search(q, partition=partition, limit=limit)
    ids = [r.item.id for r in got]
    # Link expansion appends up to ``limit`` linked items after the ranked ones.
    assert len(ids) == len(set(ids)) and len(ids) <= limit * (
        2 if "link_expansion" in config else 1
    )
    scores = [r.score for r in got if not r.via]
    assert scores == sorted(scores, reverse=True)
    assert [
        (r.item.id, r.score) for r in lean.hybrid_search(q, partition=partition, limit=limit)
    ] == [(r.item.id, r.score) for r in got]
    slow = general.hybrid_search(q, partition=partition, limit=limit, explain=True)
    assert [r.item.id for r in slow] == ids
    for g, s in zip(got, slow, strict=True):
        assert g.score == pytest.approx(s.score, abs=1e-9, rel=0)
        assert g.relevance == s.relevance


# ------------------------------------------------------------------ the term picker

VOCAB = ["rufus", "malibu", "dog", "beach", "the", "and", "caroline", "a", "x1", "pottery"]


@settings(max_examples=200, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(VOCAB), max_size=8), max_size=4),
    df=st.fixed_dictionaries({w: st.integers(0, 50) for w in VOCAB}),
    query=st.lists(st.sampled_from(VOCAB), max_size=3),
    limit=st.integers(0, 6),
)
def test_feedback_terms_are_distinctive_new_linking_words_best_first(
    docs: list[list[str]], df: dict[str, int], query: list[str], limit: int
) -> None:
    n_docs = 60
    q = " ".join(query)
    terms = feedback_terms(docs, df, n_docs, q, limit)
    assert terms == feedback_terms(docs, df, n_docs, q, limit)  # deterministic
    assert len(terms) == len(set(terms)) <= limit
    asked = {stem(w) for w in words(q)}
    for t in terms:
        assert any(t in d for d in docs)
        assert df[t] >= 2, "a word only one document holds links nothing"
        assert t not in STOP_WORDS and len(t) >= 2 and stem(t) not in asked

    def weight(w: str) -> float:
        return sum(w in set(d) for d in docs) * token_weight(df[w], n_docs)

    ws = [weight(t) for t in terms]
    assert ws == sorted(ws, reverse=True)
    # Nothing left out outweighs what was kept, once the limit is not what cut it.
    left = {
        w
        for d in docs
        for w in d
        if w not in terms
        and df[w] >= 2
        and w not in STOP_WORDS
        and len(w) >= 2
        and stem(w) not in asked
    }
    if len(terms) < limit:
        assert not left
    elif terms and left:
        assert max(map(weight, left)) <= ws[-1]


def test_a_word_two_top_documents_share_outranks_a_rarer_one_only_one_holds() -> None:
    docs = [["rufus", "adopted"], ["rufus", "beach"], ["pottery"]]
    df = {"rufus": 6, "adopted": 3, "beach": 3, "pottery": 3}
    assert feedback_terms(docs, df, 1000, "question")[0] == "rufus"
    assert len(feedback_terms(docs, df, 1000, "question")) <= FEEDBACK_TERMS


def test_the_second_query_is_the_question_plus_the_terms() -> None:
    assert (
        feedback_query("where did they go", ["rufus", "malibu"]) == "where did they go rufus malibu"
    )
    assert feedback_query("where did they go", []) == ""
