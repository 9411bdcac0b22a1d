"""The BM25 channel: the index's ranking against brute force, and its place in the fusion.

:meth:`LexicalIndex.bm25` scores the query's exact words with binary-tf BM25
over the live documents (``memstore._bm25``). The oracle here recomputes it
from the items themselves (their words, the live set's N, df and mean length)
after hypothesis-generated puts, re-puts and removes, with a compaction after
every other removal, under every filter the lexical channel takes: the same
ids in the same order (score, then most recently updated, then id), the same
scores to 1e-9. Then the searcher: the channel runs only when the semantic
one does, the lean and the general paths fuse it alike, and a weight of 0
leaves the fusion as it was.
"""

from __future__ import annotations

import datetime as _dt
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from memstore import Config, InvalidItemError, Item, Memory, MemstoreError, Store, _wordbatch
from memstore._bm25 import K1, B, bm25, live_tokens
from memstore._lexindex import LexicalIndex
from memstore.search import BM25_WEIGHT, SearchConfig, Searcher
from memstore.tags import SHARED_TAG, partition_from_tags, service_from_tags
from memstore.text import event_date_words, kw_tokens, normalize_query, words
from memstore_index.cellstore import CellStore
from memstore_index.hash_embedder import HashEmbedder
from tests.conftest import FakeClock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_search_differential import CONFIGS, stores

T0 = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)
IDS = [f"d{i}" for i in range(8)]
KINDS = ["fact", "event", "note"]
SUBJECTS = ["", "billing", "auth"]
TAGS = [[], ["tenant/a"], ["tenant/b"], ["tenant/b", SHARED_TAG], ["service/auth"]]
word = st.sampled_from(["ab", "abs", "bad", "dab", "a1", "12", "billing", "auth", "tenant"])
text = st.lists(word, max_size=7).map(" ".join)


@st.composite
def items(draw: st.DrawFn) -> Item:
    stale = draw(st.sampled_from([None, 1, 3, 9]))
    return Item(
        id=draw(st.sampled_from(IDS)),
        kind=draw(st.sampled_from(KINDS)),
        title=draw(text),
        content=draw(text),
        subject=draw(st.sampled_from(SUBJECTS)),
        tags=draw(st.sampled_from(TAGS)),
        updated_at=T0 + _dt.timedelta(hours=draw(st.sampled_from([1, 2, 2]))),
        stale_after=None if stale is None else T0 + _dt.timedelta(hours=stale),
        event_date=draw(st.sampled_from(["", "2023-06-27"])),
    )


def doc_words(item: Item, index_id: bool) -> list[str]:
    """The words the index holds for ``item``: title, content, its date's, its id's."""
    extra = event_date_words(item.event_date) if item.event_date else []
    return [*words(item.title), *words(item.content), *extra, *(words(item.id) if index_id else [])]


def brute_force(
    live: dict[str, tuple[Item, bool]],
    tokens: list[str],
    *,
    kind: str,
    subject: str,
    hidden: tuple[str, ...],
    partition: str | None,
    now: _dt.datetime,
    limit: int,
) -> list[tuple[str, float, int]]:
    """BM25 with term frequency 1 over every live item, then the filters, the order, the cut."""
    docs = {id: doc_words(it, flag) for id, (it, flag) in live.items()}
    n = len(docs)
    avgdl = sum(map(len, docs.values())) / n if n else 0.0
    query = list(dict.fromkeys(tokens))
    df = {w: sum(w in d for d in docs.values()) for w in query}
    out: list[tuple[str, float, int, float]] = []
    for id, ws in docs.items():
        item = live[id][0]
        held = [w for w in query if w in ws]
        if not held:
            continue
        if item.stale_after is not None and item.stale_after <= now:
            continue
        if (kind and item.kind != kind) or (not kind and item.kind in hidden):
            continue
        if subject and subject not in (item.subject, service_from_tags(item.tags)):
            continue
        part = partition_from_tags(item.tags)
        if partition is not None and part not in ("", partition) and SHARED_TAG not in item.tags:
            continue
        norm = K1 * (1 - B + B * len(ws) / avgdl)
        mass = sum(math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5)) for w in held)
        updated = item.updated_at.timestamp() if item.updated_at else -math.inf
        out.append((id, mass * (K1 + 1) / (1 + norm), len(held), updated))
    out.sort(key=lambda h: (-h[1], -h[3], h[0]))
    return [(id, score, covered) for id, score, covered, _ in out[:limit]]


class BM25Machine(RuleBasedStateMachine):
    """Random puts and removes; every BM25 ranking agrees with brute force."""

    def __init__(self) -> None:
        super().__init__()
        self.index = LexicalIndex(compact_min=2, overlay_max=3)
        self.live: dict[str, tuple[Item, bool]] = {}

    @rule(item=items(), index_id=st.booleans())
    def put(self, item: Item, index_id: bool) -> None:
        self.index.put(item, index_id)
        self.live[item.id] = (item, index_id)

    @rule(ident=st.sampled_from(IDS))
    def remove(self, ident: str) -> None:
        self.index.remove(ident)
        self.live.pop(ident, None)

    @precondition(lambda self: bool(self.live))
    @rule(
        query=st.lists(word, min_size=1, max_size=3).map(" ".join),
        kind=st.sampled_from(["", *KINDS]),
        subject=st.sampled_from(SUBJECTS),
        hidden=st.sampled_from([(), ("note",)]),
        limit=st.sampled_from([1, 2, 3, 10]),
        partition=st.sampled_from([None, "a", "b"]),
        hour=st.sampled_from([0, 2, 5]),
    )
    def query(
        self,
        query: str,
        kind: str,
        subject: str,
        hidden: tuple[str, ...],
        limit: int,
        partition: str | None,
        hour: int,
    ) -> None:
        tokens = kw_tokens(normalize_query(query))
        now = T0 + _dt.timedelta(hours=hour)
        filters: dict[str, Any] = {"kind": kind, "subject": subject, "partition": partition}
        args: dict[str, Any] = {"hidden_kinds": hidden, "now_ts": now.timestamp(), "limit": limit}
        got = self.index.bm25(tokens, **args, **filters)
        want = brute_force(self.live, tokens, hidden=hidden, now=now, limit=limit, **filters)
        assert [h.id for h in got] == [id for id, _, _ in want]
        assert [h.covered for h in got] == [c for _, _, c in want]
        assert [h.score for h in got] == pytest.approx([s for _, s, _ in want], rel=1e-9)
        assert not any(h.fuzzy for h in got)
        assert list(got.ids) == [h.id for h in got]
        assert got.scores.tolist() == [h.score for h in got]
        # The numpy path ranks exactly as the compiled one: the same hits, bit for bit.
        with _wordbatch.pure_python():
            assert self.index.bm25(tokens, **args, **filters) == got


TestBM25 = BM25Machine.TestCase
TestBM25.settings = settings(
    max_examples=120,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_a_short_document_beats_a_long_one_holding_the_same_words() -> None:
    index = LexicalIndex()
    index.put(Item(id="long", kind="note", content="pottery class " + "and then " * 8), False)
    index.put(Item(id="short", kind="note", content="pottery class"), False)
    index.put(Item(id="other", kind="note", content="a bowl"), False)
    got = index.bm25(
        ["pottery"], kind="", subject="", hidden_kinds=(), now_ts=T0.timestamp(), limit=5
    )
    assert [h.id for h in got] == ["short", "long"]
    assert got[0].score > got[1].score > 0.0


def test_a_word_only_stems_or_typos_reach_is_no_bm25_hit() -> None:
    index = LexicalIndex()
    index.put(Item(id="a", kind="note", content="camping trip"), False)
    args: dict[str, Any] = {"kind": "", "subject": "", "hidden_kinds": (), "now_ts": 0.0}
    assert index.bm25(["camped"], limit=5, **args) == []
    assert [h.id for h in index.bm25(["camping"], limit=5, **args)] == ["a"]


def test_a_snapshot_loads_with_the_same_bm25_ranking(tmp_path: Path) -> None:
    index = LexicalIndex()
    pairs = []
    for i in range(30):
        item = Item(id=f"n{i}", kind="note", content=" ".join(["ledger"] * (1 + i % 4) + ["w"] * i))
        index.put(item, False)
        pairs.append((item, False))
    index.remove("n3")
    pairs = [p for p in pairs if p[0].id != "n3"]
    args: dict[str, Any] = {"kind": "", "subject": "", "hidden_kinds": (), "now_ts": 0.0}
    before = index.bm25(["ledger", "w"], limit=10, **args)
    index.save_snapshot(tmp_path / "lex", generation=1)
    loaded = LexicalIndex.from_snapshot(tmp_path / "lex", pairs, expect_generation=1)
    assert loaded.bm25(["ledger", "w"], limit=10, **args) == before


def _searcher(clock: FakeClock, **cfg: Any) -> tuple[Store, Searcher]:
    store = Store(Config(clock=clock))
    cells = CellStore(HashEmbedder(dim=32))
    cells.attach(store)
    for i, text in enumerate(
        ["ledger pool size", "ledger", "pool party on friday with the ledger team and more", "tax"]
    ):
        store.upsert(Item(id=f"i{i}", kind="note", content=text))
    cfg = {"bm25_weight": BM25_WEIGHT} | cfg  # the channel on (it is off by default)
    return store, Searcher(SearchConfig(store=store, cells=lambda: cells, **cfg))


def test_the_channel_runs_only_when_the_semantic_one_does(clock: FakeClock) -> None:
    _, searcher = _searcher(clock)
    # "tax" is a confident keyword answer: the fast path, one channel.
    fast = searcher.hybrid_search("tax", explain=True)
    assert [r.item.id for r in fast] == ["i3"]
    assert fast[0].explanation and fast[0].explanation.channels == ["lexical"]
    fused = searcher.hybrid_search("ledger pool", explain=True)
    by_id = {r.item.id: r.explanation for r in fused}
    assert {id for id, e in by_id.items() if e and "bm25" in e.channels} == {"i0", "i1", "i2"}


def test_the_channel_is_off_by_default_and_a_memory_turns_it_on(tmp_path: Path) -> None:
    for weight, channels in (
        (None, ["lexical", "semantic"]),
        (0.1, ["bm25", "lexical", "semantic"]),
    ):
        search: dict[str, Any] = {"always_fuse": True}
        if weight is not None:
            search["bm25_weight"] = weight
        with Memory(tmp_path / str(weight), embedder=HashEmbedder(dim=32), search=search) as mem:
            mem.add("the ledger pool is exhausted", partition="p")
            mem.add("a kitten in the pool", partition="p")
            got = mem.search("ledger pool", partition="p", explain=True)
            assert got and got[0].explanation is not None
            assert sorted(got[0].explanation.channels) == channels


def test_a_weight_of_zero_fuses_as_without_the_channel(clock: FakeClock) -> None:
    _, on = _searcher(clock, always_fuse=True)
    _, off = _searcher(clock, always_fuse=True, bm25_weight=0.0)
    for r in off.hybrid_search("ledger pool", explain=True):
        e = r.explanation
        assert e is not None and "bm25" not in e.channels and e.bm25_norm is None
    for r in on.hybrid_search("ledger pool", explain=True):
        e = r.explanation
        assert e is not None and e.fused_score is not None
        rest = e.fused_score - BM25_WEIGHT * (e.bm25_norm or 0.0)
        assert rest == pytest.approx(0.5 * (e.lexical_norm or 0.0) + 0.5 * (e.semantic_norm or 0.0))


@pytest.mark.parametrize("weight", [-0.1, 1.5, float("nan"), True, "0.1"])
def test_a_bad_weight_is_refused_before_anything_opens(weight: object, tmp_path: Path) -> None:
    with pytest.raises(MemstoreError, match="bm25_weight"):
        Memory(tmp_path / "m", search={"bm25_weight": weight})
    assert not (tmp_path / "m").exists()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=stores(),
    config=st.sampled_from(CONFIGS),
    query=st.lists(st.sampled_from(["ledger", "pool", "tax", "bowl", "api", "i03"]), max_size=3),
    partition=st.sampled_from(["", "a", "b", "*"]),
    limit=st.integers(1, 6),
)
def test_the_lean_and_the_general_path_fuse_the_channel_alike(
    env: tuple[Store, CellStore, FakeClock],
    config: dict[str, Any],
    query: list[str],
    partition: str,
    limit: int,
) -> None:
    store, cells, _ = env
    cfg = {"always_fuse": True, "bm25_weight": BM25_WEIGHT} | config
    lean = Searcher(SearchConfig(store=store, cells=lambda: cells, **cfg))
    general = Searcher(SearchConfig(store=store, cells=lambda: cells, **cfg))
    q = " ".join(query) or "ledger"
    got = lean.hybrid_search(q, partition=partition, limit=limit)
    slow = general.hybrid_search(q, partition=partition, limit=limit, explain=True)
    assert [(r.item.id, r.relevance) for r in got] == [(r.item.id, r.relevance) for r in slow]


@pytest.mark.skipif(_wordbatch.speedups is None, reason="memstore._speedups is not built")
def test_the_compiled_rank_takes_the_bm25_tokens_as_they_are() -> None:
    # The index ranks BM25 with lex_rank where it is built; were the tokens not in a form
    # it reads, it would fall back to numpy silently and the state machine above would
    # compare numpy with numpy. Called directly, it must answer, and as numpy does.
    index = LexicalIndex(compact_min=2)
    for i in range(40):
        words = ["ab"] * (i % 5) + ["x"] * i
        index.put(Item(id=f"n{i:02d}", kind="note", content=" ".join(words)), False)
    index.remove("n07")
    lex = index.lexicon
    held = ["ab", "x"]
    idfs = [1.5, 0.25]
    words = live_tokens(lex.word_postings(held), idfs, lex.alive_slots(), lex.length_factors())
    native_tokens = tuple(
        (s, f, np.zeros(0, np.intp), np.zeros(0, np.float64), w) for s, f, w in words
    )
    filters = ("", "", (), None)
    got = index._rank_native(_wordbatch.speedups, native_tokens, (1.0, 0.0, 0.0), filters, 0.0, 10)
    cand, scores, _ = bm25(words, lex.capacity)
    best = np.lexsort((cand, -scores))[:10]  # no ties on update time here: all unset
    assert [h.id for h in got] == [lex.id_at(int(s)) for s in cand[best]]
    assert [h.score for h in got] == scores[best].tolist()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((None,), "query"),
        (("ledger", 3), "kind"),
        (("ledger", "", None), "subject"),
        (("ledger", "", "", "5"), "limit"),
        (("ledger", "", "", True), "limit"),
        (("ledger\ud800",), "lone surrogate"),
    ],
)
def test_keyword_bm25_refuses_bad_arguments_as_keyword_ranked_does(
    clock: FakeClock, args: tuple[Any, ...], message: str
) -> None:
    store, _ = _searcher(clock)
    before = store.keyword_bm25("ledger pool")
    with pytest.raises(InvalidItemError, match=message):
        store.keyword_bm25(*args)
    with pytest.raises(InvalidItemError, match=message):
        store.keyword_ranked(*args)
    assert store.keyword_bm25("ledger pool") == before
    assert [h.id for h in before] == ["i0", "i2", "i1"]  # both words in 10 beat one in 1
