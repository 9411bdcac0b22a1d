"""The LoCoMo benchmark's modes: the indexes each needs, and one search function per mode.

Part of ``benchmarks/locomo.py`` (run that script).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # measure this checkout, not an installed copy
    sys.path.insert(0, str(ROOT))

from _locomo_context import (  # noqa: E402
    CONTEXT_WEIGHT,
    DEFAULT_CONTEXT,
    MaxCells,
    prev_text,
    turn_vectors,
)
from _locomo_data import Conversation, Question, transcript_line, turn_item  # noqa: E402
from _locomo_embed import CachingEmbedder, Vec  # noqa: E402
from _locomo_tiebreak import DEPTH, TieBreak  # noqa: E402

from memstore import Store  # noqa: E402
from memstore.search import BM25_WEIGHT  # noqa: E402
from memstore_index import text_hash  # noqa: E402
from memstore_index.cellstore import CellStore  # noqa: E402
from memstore_index.entry import embed_text, entry_for  # noqa: E402

OUR_MODES = frozenset({"lexical", "semantic", "hybrid", "hybrid_full"})
"""The modes that search with memstore (the others are peers)."""
SEARCHER_MODES = frozenset({"hybrid", "hybrid_full"})
"""The modes that search with ``memstore.Searcher``."""
RRF_K = 60
RRF_DEPTH = 100
"""Each ranking fused by ``rrf`` is cut to its best this many turns."""


Ranked = tuple[list[str], float, str, list[float]]
"""Ranked item ids, the search time in ms (query embedding excluded), the path taken
(``"lexical"`` or ``"fused"`` for a Searcher mode, ``""`` otherwise), and each id's
``relevance`` (a Searcher mode; empty otherwise)."""
Search = Callable[[Question, int], Ranked]


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


@dataclass
class Built:
    """Per-conversation indexes, shared by the modes that need them."""

    stores: dict[str, Store] = field(default_factory=dict)
    cells: CellStore | MaxCells | None = None
    bm25: dict[str, tuple[Any, list[str]]] = field(default_factory=dict)
    dense: dict[str, tuple[Vec, list[str]]] = field(default_factory=dict)
    tiebreak: dict[str, TieBreak] = field(default_factory=dict)
    """Per conversation, the ``lexical`` mode's tie-break (none: the engine's order)."""
    searchers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per hybrid mode, one ``Searcher`` per conversation (sharing that mode's stats)."""
    search_stats: dict[str, Any] = field(default_factory=dict)
    build_s: dict[str, float] = field(default_factory=dict)


def build_stores(
    convs: Sequence[Conversation], shape: str, built: Built, link_turns: bool = True
) -> None:
    """One Store per conversation, each turn upserted as an item (linked to the next one)."""
    t0 = time.perf_counter()
    for c in convs:
        store = Store()
        with store.batch():
            for i, t in enumerate(c.turns):
                nxt = c.turns[i + 1] if i + 1 < len(c.turns) else None
                linked = link_turns and nxt is not None and nxt.session == t.session
                store.upsert(turn_item(t, shape, nxt.id if linked and nxt else ""))
        built.stores[c.sample_id] = store
    built.build_s["store"] = time.perf_counter() - t0


def build_cells(
    convs: Sequence[Conversation],
    emb: CachingEmbedder,
    built: Built,
    center: bool = True,
    context: str = DEFAULT_CONTEXT,
    weight: float = CONTEXT_WEIGHT,
) -> None:
    """One CellStore for every conversation, each item in its conversation's partition.

    Indexed from the stored items exactly as ``CellStore.attach`` would
    (``entry_for`` / ``embed_text``), without binding several stores to it.
    ``center``: similarities around the mean of the partition searched
    (``CellStore(center=True)``, see docs/vector.md). ``context``: how a
    turn's vector takes in its neighbours (``_locomo_context``; ``weight`` is
    the mixes' neighbour weight): ``prev-text`` indexes the context texts, the
    mixes offer their vectors for the items' own texts, ``max-prev-text``
    builds a second CellStore of ``prev-text`` vectors behind a ``MaxCells``.
    """
    t0 = time.perf_counter()
    cells = CellStore(emb, center=center)
    second = CellStore(emb, center=center) if context == "max-prev-text" else None
    for c in convs:
        store = built.stores[c.sample_id]
        items = [store.get(t.id) for t in c.turns]
        rows = [(t, it) for t, it in zip(c.turns, items, strict=True) if it is not None]
        turns = [t for t, _ in rows]
        entries = [entry_for(it) for _, it in rows]
        texts = [embed_text(it) for _, it in rows]
        vecs = turn_vectors(turns, texts, context, weight, emb.embed)
        if vecs is None:
            cells.upsert_many(zip(entries, texts, strict=True))
        elif context == "prev-text":
            cells.upsert_many(zip(entries, prev_text(turns, texts), strict=True))
        elif second is not None:
            cells.upsert_many(zip(entries, texts, strict=True))
            second.upsert_many(zip(entries, prev_text(turns, texts), strict=True))
        else:
            offer = {(e.id, text_hash(x)): v for e, x, v in zip(entries, texts, vecs, strict=True)}
            with cells.offered(offer):
                cells.upsert_many(zip(entries, texts, strict=True))
    built.cells = cells if second is None else MaxCells(cells, second)
    built.build_s["cellstore"] = time.perf_counter() - t0


def bm25_tokenize(texts: list[str]) -> list[list[str]]:
    """bm25s's default tokenisation (its regex, lower case, English stop words) as strings."""
    import bm25s  # type: ignore[import-untyped]

    toks: list[list[str]] = bm25s.tokenize(
        texts, stopwords="en", return_ids=False, show_progress=False
    )
    return toks


def build_bm25s(convs: Sequence[Conversation], built: Built) -> None:
    """A bm25s index per conversation over the plain turn texts."""
    import bm25s

    t0 = time.perf_counter()
    for c in convs:
        retriever = bm25s.BM25()
        retriever.index(bm25_tokenize([transcript_line(t) for t in c.turns]), show_progress=False)
        built.bm25[c.sample_id] = (retriever, [t.id for t in c.turns])
    built.build_s["bm25s"] = time.perf_counter() - t0


def build_tiebreak(convs: Sequence[Conversation], built: Built, rule: str) -> None:
    """The ``lexical`` mode's tie-break ``rule`` per conversation, over the transcript lines."""
    for c in convs:
        tokens = bm25_tokenize([transcript_line(t) for t in c.turns])
        built.tiebreak[c.sample_id] = TieBreak(rule, [t.id for t in c.turns], tokens)


def build_dense(convs: Sequence[Conversation], emb: CachingEmbedder, built: Built) -> None:
    """A matrix of plain turn-text vectors per conversation (for the exact scan)."""
    t0 = time.perf_counter()
    for c in convs:
        vecs = emb.embed([transcript_line(t) for t in c.turns])
        built.dense[c.sample_id] = (vecs, [t.id for t in c.turns])
    built.build_s["dense"] = time.perf_counter() - t0


def bm25s_ranking(built: Built, q: Question, k: int) -> list[str]:
    """bm25s's top ``k`` turns with a positive score (zero-score fill is no result)."""
    retriever, ids = built.bm25[q.conv]
    tokens = bm25_tokenize([q.text])
    if not tokens[0]:
        return []
    docs, scores = retriever.retrieve(tokens, k=min(k, len(ids)), show_progress=False)
    return [ids[int(d)] for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


def dense_ranking(built: Built, emb: CachingEmbedder, q: Question, k: int) -> list[str]:
    """The exact cosine top ``k`` of the conversation's turn vectors."""
    mat, ids = built.dense[q.conv]
    scores = mat @ emb.embed([q.text])[0]
    k = min(k, len(ids))
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.lexsort((top, -scores[top]))]
    return [ids[int(i)] for i in top]


def rrf(rankings: Sequence[Sequence[str]], k: int, c: int = RRF_K) -> list[str]:
    """Reciprocal-rank fusion: score ``sum 1/(c + rank)``, ties by first appearance.

    >>> rrf([["a", "b"], ["b", "c"]], 3)
    ['b', 'a', 'c']
    """
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, id in enumerate(ranking, 1):
            score[id] = score.get(id, 0.0) + 1.0 / (c + rank)
    order = sorted(score, key=lambda i: -score[i])  # stable: first appearance wins ties
    return order[:k]


def searcher_api() -> tuple[Any, Any] | str:
    """``(Searcher, SearchConfig)`` from memstore, or why they cannot be had."""
    try:
        from memstore import SearchConfig, Searcher  # type: ignore[attr-defined,unused-ignore]
    except ImportError as exc:
        return f"Searcher not available (from memstore import Searcher failed: {exc})"
    return Searcher, SearchConfig


def make_search(
    mode: str, built: Built, emb: CachingEmbedder | None, min_relevance: float = 0.0
) -> Search:
    """The search function of one mode: question and depth to ranked ids and ms.

    ``min_relevance`` is passed to a Searcher mode's call (the others ignore it).
    """
    if mode == "lexical":

        def lexical(q: Question, k: int) -> Ranked:
            store = built.stores[q.conv]
            tb = built.tiebreak.get(q.conv)
            t0 = time.perf_counter()
            if tb is None:
                res = store.keyword_search(q.text, limit=k)
                return [it.id for it in res], _ms(t0), "", []
            hits, _ = store.keyword_ranked(q.text, "", "", max(k, DEPTH), partition=q.conv)
            ids = tb.reorder([(h.id, h.score) for h in hits], bm25_tokenize([q.text])[0])
            return ids[:k], _ms(t0), "", []

        return lexical
    if mode == "semantic":
        cells = built.cells
        assert cells is not None

        def semantic(q: Question, k: int) -> Ranked:
            hits, timing = cells.search_timed(q.text, k, partitions=[q.conv])
            return [e.id for e, _ in hits], timing.index_s * 1e3, "", []

        return semantic
    if mode in SEARCHER_MODES:
        full = mode == "hybrid_full"
        stats = built.search_stats[mode]
        embed_ns = "search.phase.embed.ns"
        fast = "search.kw_voice_hits"

        def hybrid(q: Question, k: int) -> Ranked:
            searcher = built.searchers[mode][q.conv]
            call = searcher.hybrid_search_full if full else searcher.hybrid_search
            before = stats.ops()
            t0 = time.perf_counter()
            res = call(q.text, partition=q.conv, limit=k, min_relevance=min_relevance)
            ms = _ms(t0)
            after = stats.ops()
            # The query vector is a cache hit; its phase time is still taken off.
            ms -= (after.get(embed_ns, 0) - before.get(embed_ns, 0)) / 1e6
            path = "lexical" if after.get(fast, 0) > before.get(fast, 0) else "fused"
            return [r.item.id for r in res], ms, path, [r.relevance for r in res]

        return hybrid
    if mode == "bm25s":

        def bm25(q: Question, k: int) -> Ranked:
            t0 = time.perf_counter()
            ids = bm25s_ranking(built, q, k)
            return ids, _ms(t0), "", []

        return bm25
    assert emb is not None
    if mode == "dense":

        def dense(q: Question, k: int) -> Ranked:
            t0 = time.perf_counter()
            ids = dense_ranking(built, emb, q, k)
            return ids, _ms(t0), "", []

        return dense
    if mode == "rrf":

        def fused(q: Question, k: int) -> Ranked:
            t0 = time.perf_counter()
            ids = rrf(
                [bm25s_ranking(built, q, RRF_DEPTH), dense_ranking(built, emb, q, RRF_DEPTH)], k
            )
            return ids, _ms(t0), "", []

        return fused
    raise ValueError(f"unknown mode {mode!r}")


# --------------------------------------------------------------------------- levers

LEVERS = {
    "date_signal": "dates the question names boost turns of those dates",
    "when_signal": "a 'when' question boosts turns that mention a time",
    "subject_signal": "the speaker the question names boosts that speaker's turns",
}
"""The retrieval levers the Searcher modes turn on (``SearchConfig`` fields), each with
a ``--no-<field>`` flag (dashes for underscores) and a row of the ablation."""

OPT_IN_LEVERS = {
    "feedback_round": "a second lexical round: the query plus the rare words of the first "
    "round's top three turns, fused in at half the lexical weight",
    "bm25_weight": "BM25 of the question's exact words, a third channel fused at 0.1",
}
"""The levers ``SearchConfig`` leaves off (they did not pass the rule for being on by
default), each with a ``--<field>`` flag and a "with" row of the ablation."""

ON_VALUES: dict[str, Any] = {"bm25_weight": BM25_WEIGHT}
"""The value that turns an opt-in lever on, where it is not ``True`` (a weight)."""
OFF_VALUES: dict[str, Any] = {"bm25_weight": 0.0}
"""The value that turns a lever off, where it is not ``False``."""


def on_value(lever: str) -> Any:
    """The ``SearchConfig`` value that turns ``lever`` on."""
    return ON_VALUES.get(lever, True)


def off_value(lever: str) -> Any:
    """The ``SearchConfig`` value that turns ``lever`` off."""
    return OFF_VALUES.get(lever, False)


def _holds(config: dict[str, Any], lever: str, value: Any) -> bool:
    held = config.get(lever)
    return held is not None and type(held) is type(value) and held == value


def is_on(config: dict[str, Any], lever: str) -> bool:
    """Whether ``config`` turns ``lever`` on."""
    return _holds(config, lever, on_value(lever))


def is_off(config: dict[str, Any], lever: str) -> bool:
    """Whether ``config`` turns ``lever`` off."""
    return _holds(config, lever, off_value(lever))


def lever_kwargs(
    off: Sequence[str], signal_weight: float | None, on: Sequence[str] = ()
) -> dict[str, Any]:
    """The ``SearchConfig`` fields for levers ``off``, opt-in levers ``on`` and a signal
    weight (``None``: default)."""
    unknown = (set(off) - set(LEVERS)) | (set(on) - set(OPT_IN_LEVERS))
    if unknown:
        known = ", ".join([*LEVERS, *OPT_IN_LEVERS])
        raise ValueError(f"unknown lever(s) {sorted(unknown)}; known: {known}")
    out: dict[str, Any] = {name: off_value(name) for name in off}
    out |= {name: on_value(name) for name in on}
    if signal_weight is not None:
        out["signal_weight"] = signal_weight
    return out


def make_searchers(
    convs: Sequence[Conversation],
    built: Built,
    mode: str,
    config: dict[str, Any],
) -> None:
    """One ``Searcher`` per conversation for ``mode`` (sharing one ``SearchStats``)."""
    api = searcher_api()
    assert not isinstance(api, str)
    searcher_cls, config_cls = api
    from memstore.stats import SearchStats

    cells = built.cells
    counters = built.search_stats[mode] = SearchStats()
    built.searchers[mode] = {
        c.sample_id: searcher_cls(
            config_cls(store=built.stores[c.sample_id], cells=lambda: cells, **config),
            stats=counters,
        )
        for c in convs
    }


def per_conversation(
    questions: Sequence[Question], per_question: dict[str, list[Any]], k: int
) -> dict[str, float]:
    """Mean recall@k per conversation, from a mode's per-question record."""
    sums: dict[str, list[float]] = {}
    for q, r in zip(questions, per_question[f"recall@{k}"], strict=True):
        sums.setdefault(q.conv, []).append(float(r))
    return {c: sum(v) / len(v) for c, v in sums.items()}


def per_question_values(per_question: dict[str, list[Any]], metric: str) -> list[float]:
    """One metric per question from a mode's record: ``recall@<k>`` or ``rr`` (from first_hit)."""
    if metric == "rr":
        return [1.0 / f if f else 0.0 for f in per_question["first_hit"]]
    return [float(x) for x in per_question[metric]]


def leave_one_out(
    questions: Sequence[Question],
    on: dict[str, list[Any]],
    off: dict[str, list[Any]],
    metric: str,
) -> float:
    """``metric`` when each conversation gets the setting (on/off) that did better on the others.

    The lever is judged on four conversations and applied to the fifth, for
    each fifth in turn: what a choice made without a conversation gives on it.
    ``metric`` is ``recall@<k>`` or ``rr`` (its mean is the MRR).
    """
    convs = sorted({q.conv for q in questions})
    val_on = per_question_values(on, metric)
    val_off = per_question_values(off, metric)
    got: list[float] = []
    for held in convs:
        rest = [i for i, q in enumerate(questions) if q.conv != held]
        better_on = sum(val_on[i] for i in rest) >= sum(val_off[i] for i in rest)
        pick = val_on if better_on else val_off
        got.extend(pick[i] for i, q in enumerate(questions) if q.conv == held)
    return sum(got) / len(got) if got else 0.0
