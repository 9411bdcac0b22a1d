"""The information prior (``SearchConfig.info_prior``): items of few words get a handicap.

What a caller relies on: with the prior on, a short generic item ("Later,
take care!") no longer outranks an informative one that the vector index
finds exactly as similar; the lexical fast path is left alone; with it off
(the default) the results are exactly those of a searcher that never heard
of it; a bad value is refused when the searcher is built, naming the option;
and on any store the lean path and the general one (``explain=True``) agree.
The snapshot's word column is each item's title and content word count.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Store
from memstore._search_snapshot import SearchSnapshot, item_words
from memstore.search import SearchConfig, Searcher
from memstore.search._prior import (
    INFO_PRIORS,
    LENGTH_WEIGHT,
    PRIOR_WEIGHT,
    length_credit,
    semantic_prior,
    short_factors,
)
from memstore_index.cellstore import CellStore
from memstore_index.entry import entry_for
from tests.conftest import T0, FakeClock
from tests.test_search_differential import CONFIGS, PARTITIONS, WORDS, stores

HUB = "Later, take care!"
INFORMATIVE = "We drove up the coast to Big Sur and camped two nights under the redwoods"


class _Flat:
    """A vector index that finds every stored item at one similarity, in id order.

    So only the prior can tell the items apart: whatever ranks first among
    them with the prior off does so by the id tie-break.
    """

    def __init__(self, store: Store, sim: float = 0.5) -> None:
        self._store, self._sim = store, sim

    def embed_query(self, query: str) -> npt.NDArray[np.float32]:
        return np.ones(4, np.float32)

    def search_vector(
        self,
        vec: npt.ArrayLike,
        k: int,
        *,
        visible: Callable[[Any], bool] | None = None,
        subject: str | None = None,
        partitions: Collection[str] | None = None,
        exact: bool = False,
    ) -> list[tuple[Any, float]]:
        entries = sorted(map(entry_for, self._store.items()), key=lambda e: e.id)
        return [(e, self._sim) for e in entries if visible is None or visible(e)][:k]


def _hub_store() -> Store:
    store = Store(Config(clock=FakeClock(T0)))
    store.upsert(Item(id="a-hub", kind="note", content=f"Caroline: {HUB}"))
    store.upsert(Item(id="b-trip", kind="note", content=f"Melanie: {INFORMATIVE}"))
    return store


@pytest.mark.parametrize("explain", [False, True], ids=["lean", "general"])
@pytest.mark.parametrize("prior", ["semantic", "fused", "length"])
def test_a_short_hub_no_longer_outranks_an_informative_item_at_equal_similarity(
    prior: str, explain: bool
) -> None:
    store = _hub_store()
    index = _Flat(store)
    query = "weekend getaway memories"  # no lexical match: the semantic channel decides

    def top(**cfg: Any) -> list[str]:
        searcher = Searcher(SearchConfig(store=store, cells=lambda: index, **cfg))
        return [r.item.id for r in searcher.hybrid_search(query, limit=2, explain=explain)]

    assert top() == ["a-hub", "b-trip"], "off: equal similarity, the id breaks the tie"
    assert top(info_prior="off") == ["a-hub", "b-trip"]
    assert top(info_prior=prior) == ["b-trip", "a-hub"]


def test_the_lexical_fast_path_is_left_alone() -> None:
    # A confident lexical answer never runs the semantic channel: nothing to handicap.
    store = _hub_store()
    index = _Flat(store)
    for prior in INFO_PRIORS:
        searcher = Searcher(SearchConfig(store=store, cells=lambda: index, info_prior=prior))
        assert [r.item.id for r in searcher.hybrid_search("take care")] == ["a-hub"]


@pytest.mark.parametrize("bad", ["on", "", "Semantic", True, 1, None, 0.05])
def test_an_unknown_prior_is_refused_when_the_searcher_is_built(bad: object) -> None:
    with pytest.raises(ValueError, match="info_prior"):
        Searcher(SearchConfig(store=Store(), info_prior=bad))  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-0.01, 1.5, 100, float("nan"), float("inf"), True, "0.01", None])
def test_a_bad_length_weight_is_refused_when_the_searcher_is_built(bad: object) -> None:
    with pytest.raises(ValueError, match="length_weight"):
        Searcher(SearchConfig(store=Store(), info_prior="length", length_weight=bad))  # type: ignore[arg-type]


def test_length_credit_is_the_weight_times_log_one_plus_words() -> None:
    got = length_credit(np.array([0, 2, 20], np.int64), 0.1)
    assert got.tolist() == pytest.approx([0.0, 0.1 * np.log(3), 0.1 * np.log(21)])
    assert SearchConfig(store=Store()).length_weight == LENGTH_WEIGHT


class _Graded(_Flat):
    """:class:`_Flat`, but the hub is found more similar than the rest."""

    def search_vector(self, vec: npt.ArrayLike, k: int, **kw: Any) -> list[tuple[Any, float]]:
        hits = super().search_vector(vec, k, **kw)
        return [(e, 0.6 if e.id == "a-hub" else 0.5) for e, _ in hits]


@pytest.mark.parametrize("explain", [False, True], ids=["lean", "general"])
def test_the_length_prior_prefers_the_longer_item_by_its_weight(explain: bool) -> None:
    # The 4-word hub is more similar: after min-max it leads the 16-word trip by the
    # semantic share (0.5). The prior credits the trip c * (ln 17 - ln 5) = 1.22 c
    # more, so it passes at c = 1, not at c = 0.2.
    store = _hub_store()
    query = "weekend getaway memories"

    def top(**cfg: Any) -> list[str]:
        searcher = Searcher(SearchConfig(store=store, cells=lambda: _Graded(store), **cfg))
        return [r.item.id for r in searcher.hybrid_search(query, limit=2, explain=explain)]

    assert top() == ["a-hub", "b-trip"]
    assert top(info_prior="length", length_weight=0.0) == ["a-hub", "b-trip"]
    assert top(info_prior="length", length_weight=0.2) == ["a-hub", "b-trip"]
    assert top(info_prior="length", length_weight=1.0) == ["b-trip", "a-hub"]
    assert top(info_prior="off", length_weight=1.0) == ["a-hub", "b-trip"], "weight alone: none"


def test_the_prior_is_off_by_default() -> None:
    assert SearchConfig(store=Store()).info_prior == "off"


def test_semantic_prior_adds_the_log_word_credit_and_resorts_stably() -> None:
    hits: list[tuple[Any, float]] = [("hub", 0.60), ("long", 0.55), ("tie1", 0.5), ("tie2", 0.5)]
    got = semantic_prior(hits, np.array([3, 30, 5, 5], np.int64))
    assert [e for e, _ in got] == ["long", "hub", "tie1", "tie2"]
    assert dict(got)["long"] == pytest.approx(0.55 + PRIOR_WEIGHT * np.log(31))
    assert semantic_prior([], np.zeros(0, np.int64)) == []
    assert short_factors(np.array([0, 8, 9, 100])).tolist() == [0.9, 0.9, 1.0, 1.0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(env=stores())
def test_the_snapshot_holds_each_items_word_count(
    env: tuple[Store, CellStore, FakeClock],
) -> None:
    store, _, _ = env
    snap = store.search_snapshot()
    assert snap is not None
    n = len(snap)
    assert snap.words.tolist() == [item_words(it) for it in snap.items[:n]]
    built = SearchSnapshot(snap.generation, list(store._items.values()))
    assert built.words.tolist() == snap.words.tolist()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=stores(),
    config=st.sampled_from(CONFIGS),
    prior=st.sampled_from(INFO_PRIORS),
    weight=st.sampled_from([0.0, 0.005, 0.05, 0.5]),
    query=st.lists(st.sampled_from([*WORDS, "zebra"]), min_size=1, max_size=4),
    partition=st.sampled_from([*PARTITIONS, "*"]),
    kind=st.sampled_from(["", "note"]),
    limit=st.integers(1, 6),
    full=st.booleans(),
)
def test_on_any_store_the_lean_and_general_paths_agree_and_off_changes_nothing(
    env: tuple[Store, CellStore, FakeClock],
    config: dict[str, Any],
    prior: str,
    weight: float,
    query: list[str],
    partition: str,
    kind: str,
    limit: int,
    full: bool,
) -> None:
    store, cells, _ = env
    q = " ".join(query)

    def search(explain: bool, **cfg: Any) -> list[tuple[str, float, float, str]]:
        searcher = Searcher(SearchConfig(store=store, cells=lambda: cells, **config, **cfg))
        run = searcher.hybrid_search_full if full else searcher.hybrid_search
        got = run(q, kind=kind, partition=partition, limit=limit, explain=explain)
        return [(r.item.id, r.score, r.relevance, r.via) for r in got]

    lean = search(False, info_prior=prior, length_weight=weight)
    general = search(True, info_prior=prior, length_weight=weight)
    assert [r[0] for r in lean] == [r[0] for r in general]
    for got, want in zip(lean, general, strict=True):
        assert got[1] == pytest.approx(want[1], abs=1e-9, rel=0)
        assert got[2:] == want[2:]
    if prior == "off" or (prior == "length" and weight == 0.0):
        assert lean == search(False), "off (or no weight) is exactly the searcher without it"


@pytest.mark.parametrize("prior", ["off", "fused"])
def test_the_signals_still_reach_a_candidate_the_handicap_brings_within_reach(
    prior: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lean path works out signal bonuses only for candidates that could place
    # (within the largest bonus of the need-th best). The handicap lowers the
    # need-th best after the bonus, so the cut must be lowered with it: here 30
    # short items score 1.0 (0.9 with the prior) and one long item 0.7, whose
    # bonus of 0.25 lifts it to 0.95, first with the prior, last without it.
    import memstore.search._lean as lean

    store = Store(Config(clock=FakeClock(T0)))
    for i in range(30):
        store.upsert(Item(id=f"s{i:02d}", kind="note", content="ok thanks"))
    store.upsert(Item(id="long", kind="note", content=" ".join(["word"] * 20)))
    snap = store.search_snapshot()
    assert snap is not None
    long_slot = snap.slot_of("long")
    monkeypatch.setattr(lean, "max_bonus", lambda sig: 0.25)
    monkeypatch.setattr(
        lean, "slot_bonus", lambda sig, snap, slots: np.where(slots == long_slot, 0.25, 0.0)
    )
    searcher = Searcher(SearchConfig(store=store, info_prior=prior))
    fusion = lean.LeanFusion(searcher, snap, 0, "", "", True)
    fusion._base[:] = 1.0
    fusion._base[long_slot] = 0.7
    fusion._scored[:] = True
    fusion._semantic = True
    fusion.signal(SimpleNamespace())  # type: ignore[arg-type]
    got = fusion.ids(fusion.ordered(20))
    if prior == "fused":
        assert got[0] == "long"
    else:
        assert "long" not in got


@pytest.mark.parametrize("prior", ["off", "length"])
def test_the_signals_still_reach_a_candidate_the_length_credit_brings_within_reach(
    prior: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As above, for the length prior's credit: 30 two-word items score 1.0 (1.11
    # with the credit 0.1 * ln 3) and one 20-word item 0.7 (1.004 with 0.1 * ln 21),
    # whose bonus of 0.25 lifts it to 1.254, first with the prior. The cut must be
    # taken on score plus credit: on the score alone, 0.7 is beyond 1.0 - 0.25.
    import memstore.search._lean as lean

    store = Store(Config(clock=FakeClock(T0)))
    for i in range(30):
        store.upsert(Item(id=f"s{i:02d}", kind="note", content="ok thanks"))
    store.upsert(Item(id="long", kind="note", content=" ".join(["word"] * 20)))
    snap = store.search_snapshot()
    assert snap is not None
    long_slot = snap.slot_of("long")
    monkeypatch.setattr(lean, "max_bonus", lambda sig: 0.25)
    monkeypatch.setattr(
        lean, "slot_bonus", lambda sig, snap, slots: np.where(slots == long_slot, 0.25, 0.0)
    )
    searcher = Searcher(SearchConfig(store=store, info_prior=prior, length_weight=0.1))
    fusion = lean.LeanFusion(searcher, snap, 0, "", "", True)
    fusion._base[:] = 1.0
    fusion._base[long_slot] = 0.7
    fusion._scored[:] = True
    fusion._semantic = True
    fusion.signal(SimpleNamespace())  # type: ignore[arg-type]
    got = fusion.ids(fusion.ordered(20))
    if prior == "length":
        assert got[0] == "long"
    else:
        assert "long" not in got
