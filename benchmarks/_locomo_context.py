"""How the host embeds a chat turn: alone, or with the turns around it (``--embed-context``).

Part of ``benchmarks/locomo.py`` (run that script). A turn's words alone often
do not say what it is about ("Yes, twice a week!"); the turn before it in the
session usually does. "Context-window" embeddings give each turn a vector
that also carries its neighbours, without an LLM. The choices, for the vector
the CellStore holds for turn ``i`` of a session (``v_i``: the turn's own
vector, ``a``: :data:`CONTEXT_WEIGHT`):

* ``own``: ``v_i``, the turn's own text (what the item's ``embed_text`` gives);
* ``prev-text``: the embedding of the previous turn's transcript line, a
  newline, then the turn's own (a re-embedding of every turn);
* ``mix-prev``: ``normalise(v_i + a v_{i-1})`` (no re-embedding);
* ``mix-both``: ``normalise(v_i + a v_{i-1} + a v_{i+1})``;
* ``max-prev-text``: both ``v_i`` and the ``prev-text`` vector are indexed,
  and the semantic channel scores a turn by the larger of the two
  similarities (:class:`MaxCells`, two CellStores behind one search).

A session's first turn has no previous turn and its last no next one: the
missing neighbour is left out. Neighbours never cross a session boundary.
Items, their content and every lexical channel are the same under every
choice: only the vectors differ. Measured in docs/benchmarks.md
("Retrieval levers", "Tried and not kept").
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # measure this checkout, not an installed copy
    sys.path.insert(0, str(ROOT))

from _locomo_data import Turn  # noqa: E402
from _locomo_embed import Vec  # noqa: E402

from memstore_index._search import SearchTiming  # noqa: E402

EMBED_CONTEXTS = ("own", "prev-text", "mix-prev", "mix-both", "max-prev-text")
"""``--embed-context`` choices (see the module docstring)."""
DEFAULT_CONTEXT = "own"
CONTEXT_WEIGHT = 0.5
"""``a``: a neighbour's vector weighs half the turn's own. Chosen before any
measurement (the turn itself leads, a neighbour is context); 0.25 was run
afterwards only to see how flat the result is."""


def neighbours(turns: Sequence[Turn]) -> tuple[list[int], list[int]]:
    """For each turn, the index of the previous and of the next turn of its session (-1: none).

    ``turns`` in conversation order (as loaded).

    >>> ts = [Turn("c", f"D{s}:{i}", s, "A", "x", "", "") for s, i in [(1, 1), (1, 2), (2, 1)]]
    >>> neighbours(ts)
    ([-1, 0, -1], [1, -1, -1])
    """
    prev = [
        i - 1 if i > 0 and turns[i - 1].session == t.session else -1 for i, t in enumerate(turns)
    ]
    nxt = [
        i + 1 if i + 1 < len(turns) and turns[i + 1].session == t.session else -1
        for i, t in enumerate(turns)
    ]
    return prev, nxt


def prev_text(turns: Sequence[Turn], own: Sequence[str]) -> list[str]:
    """Each turn's ``prev-text``: the previous turn's text, a newline, its own.

    ``own``: each turn's own text (aligned; the item's ``embed_text``, which is
    its transcript line in the default item shape). A session's first turn is
    its own text alone.

    >>> ts = [Turn("c", f"D1:{i}", 1, s, x, "", "") for i, s, x in [(1, "A", "Hi"), (2, "B", "Yo")]]
    >>> prev_text(ts, ["A: Hi", "B: Yo"])
    ['A: Hi', 'A: Hi\\nB: Yo']
    """
    prev, _ = neighbours(turns)
    return [own[i] if p < 0 else f"{own[p]}\n{own[i]}" for i, p in enumerate(prev)]


def mix(own: Vec, prev: Sequence[int], nxt: Sequence[int] | None, weight: float) -> Vec:
    """``normalise(v_i + w v_prev(i) [+ w v_next(i)])`` for every row (-1: no neighbour).

    ``nxt=None`` mixes the previous turn only. Rows of ``own`` are unit vectors.

    >>> v = np.eye(2, dtype=np.float32)
    >>> mix(v, [-1, 0], None, 1.0).astype(float).round(3).tolist()
    [[1.0, 0.0], [0.707, 0.707]]
    """
    out = own.astype(np.float64, copy=True)
    for side in (prev, nxt):
        if side is None:
            continue
        idx = np.asarray(side, np.intp)
        has = idx >= 0
        out[has] += weight * own[idx[has]]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def turn_vectors(
    turns: Sequence[Turn], texts: Sequence[str], how: str, weight: float, embed: Any
) -> Vec | None:
    """The vectors ``how`` gives ``turns`` (rows aligned), or ``None`` for ``own``.

    ``texts``: the turns' own texts; ``embed``: texts to unit rows (a cached
    embedder: the own vectors are the ones every mode shares).
    ``max-prev-text`` returns its second set, the ``prev-text`` vectors.
    """
    if how == "own":
        return None
    if how in ("prev-text", "max-prev-text"):
        out: Vec = np.asarray(embed(prev_text(turns, texts)), np.float32)
        return out
    own: Vec = np.asarray(embed(list(texts)), np.float32)
    prev, nxt = neighbours(turns)
    if how == "mix-prev":
        return mix(own, prev, None, weight)
    if how == "mix-both":
        return mix(own, prev, nxt, weight)
    raise ValueError(f"unknown embed context {how!r}; known: {', '.join(EMBED_CONTEXTS)}")


class MaxCells:
    """Two vector indexes behind one: a hit's similarity is the larger of its two.

    What the Searcher's semantic channel and the ``semantic`` mode need of a
    CellStore (``embed_query``, ``search_vector``, ``search_timed``,
    ``vector``, ``dim``). Each index is searched for ``k`` and the union is
    ranked by each id's best similarity (each index centres on its own mean).
    ``vector`` (what relevance reads) is the first index's: the turn's own.
    """

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second
        self.dim: int = int(first.dim)

    def embed_query(self, query: str) -> Vec:
        vec: Vec = self.first.embed_query(query)
        return vec

    def vector(self, id: str) -> Vec:
        vec: Vec = self.first.vector(id)
        return vec

    def search_vector(
        self,
        vec: Any,
        k: int,
        *,
        visible: Any = None,
        subject: str | None = None,
        partitions: Collection[str] | None = None,
        exact: bool = False,
    ) -> list[tuple[Any, float]]:
        best: dict[str, tuple[Any, float]] = {}
        for cells in (self.first, self.second):
            hits = cells.search_vector(
                vec, k, visible=visible, subject=subject, partitions=partitions, exact=exact
            )
            for entry, score in hits:
                if entry.id not in best or score > best[entry.id][1]:
                    best[entry.id] = (entry, float(score))
        return sorted(best.values(), key=lambda p: (-p[1], p[0].id))[:k]

    def search_timed(
        self, query: str, k: int, *, partitions: Collection[str] | None = None
    ) -> tuple[list[tuple[Any, float]], SearchTiming]:
        t0 = time.perf_counter()
        vec = self.embed_query(query)
        t1 = time.perf_counter()
        hits = self.search_vector(vec, k, partitions=partitions)
        return hits, SearchTiming(t1 - t0, time.perf_counter() - t1)
