"""What a search is given and what it returns: config, results, explanations.

:class:`SearchConfig` is everything a :class:`~memstore.search.Searcher`
asks of its host (only ``store`` is required); :class:`SearchResult` is one
ranked hit and :class:`Explanation` why it ranked there; :class:`VectorIndex`
is the vector side a searcher needs (``memstore_index.CellStore`` is one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

from memstore.item import Item
from memstore.search._fusion_rules import (
    FUSION_RRF,
    FUSION_SCORE,
    LEXICAL_WEIGHT,
    SIGNAL_WEIGHT,
)
from memstore.search._prior import INFO_PRIOR_OFF, INFO_PRIORS, LENGTH_WEIGHT
from memstore.stats import StatsSink
from memstore.store import Store

__all__ = ["Explanation", "SearchConfig", "SearchResult", "VectorIndex", "check_config"]


class VectorIndex(Protocol):
    """The vector index a searcher needs (``memstore_index.CellStore`` is one)."""

    def embed_query(self, query: str) -> npt.NDArray[np.float32]: ...

    def search_vector(
        self,
        vec: npt.ArrayLike,
        k: int,
        *,
        visible: Callable[[Any], bool] | None = None,
        subject: str | None = None,
        partitions: Collection[str] | None = None,
        exact: bool = False,
    ) -> list[tuple[Any, float]]: ...


@dataclass
class Explanation:
    """Why a result ranked where it did (``hybrid_search(..., explain=True)``)."""

    channels: list[str] = field(default_factory=list)
    """How it was found: ``lexical``, ``semantic``, ``exhaustive``, ``bm25``, ``feedback``,
    ``spread``, ``live``, ``exact_id``, ``link``, ``source``."""
    lexical_rank: int | None = None
    lexical_score: float | None = None
    semantic_rank: int | None = None
    similarity: float | None = None
    lexical_norm: float | None = None
    """The lexical score normalised over the lexical pool (score fusion only)."""
    semantic_norm: float | None = None
    """The similarity normalised over the semantic pool (score fusion only)."""
    bm25_score: float | None = None
    """The BM25 channel's score (``SearchConfig.bm25_weight``; score fusion only)."""
    bm25_norm: float | None = None
    """That score normalised over the BM25 pool; ``bm25_weight`` times it is what it added."""
    spread_from: str | None = None
    """The candidate whose link lent this result part of its score (``spread_relations``)."""
    spread_score: float | None = None
    """What that link added to the fused score."""
    signal_score: float | None = None
    """What the query's signals added to the fused score (``date_signal`` and the others)."""
    fused_score: float | None = None
    base_score: float | None = None
    multipliers: dict[str, float] = field(default_factory=dict)
    collapsed: list[str] = field(default_factory=list)


@dataclass
class SearchResult:
    """One ranked hit.

    ``score`` is the rerank score (base rank score times multipliers) and
    orders results within one call only. ``collapsed_count`` is positive on
    the survivor of a near-duplicate collapse. ``via`` is the id of the direct
    hit whose link surfaced this result (expanded results score 0).
    ``relevance``, in [0, 1], is comparable across calls: an estimate of the
    probability that the item is evidence for the query, from what it has in
    common with the query (lexical match, cosine, subject), not from its rank
    (see :mod:`memstore.search._relevance`; a threshold is ``min_relevance``).
    """

    item: Item
    score: float = 0.0
    collapsed_count: int = 0
    via: str = ""
    explanation: Explanation | None = None
    relevance: float = 0.0


@dataclass
class SearchConfig:
    """What the Searcher asks of its host. ``store`` is required; every other field is optional."""

    store: Store
    cells: Callable[[], VectorIndex | None] | None = None
    """The vector index, read on every call (the host may set it late); ``None``: lexical only."""
    visible: Callable[[Item, str], bool] | None = None
    """Whether a partition may see an item; default :func:`default_visible`."""
    doc_visible: Callable[[Any, str], bool] | None = None
    """The same for an index entry before it is hydrated."""
    hydrate: Callable[[str], Item | None] | None = None
    """Reads an item the store does not hold (kinds kept out of the working set)."""
    live: Callable[[str, str, str, set[str]], list[SearchResult]] | None = None
    """Matches from host state outside the store, for a full search."""
    state: Callable[[Item], tuple[bool, bool]] | None = None
    """``(open, known)`` for kinds with a lifecycle outside the store."""
    anchor: Callable[[Item], bool] | None = None
    """An item the host keeps refreshed as a summary."""
    collapse_key: Callable[[Item], str] | None = None
    """The near-duplicate identity of an item, ``""`` when not eligible."""
    link_expansion: Callable[[], bool] | None = None
    """Turns on one-hop link expansion of results (read on every call)."""
    dirty: Callable[[], None] | None = None
    """Fires after every search, for a stats flush."""
    resolve_strict: Callable[[str], str | None] | None = None
    """Maps a partition name to its canonical name, ``None`` when unknown (consolidate)."""
    stats: StatsSink | None = None
    """Where the counters also go."""
    semantic_gap: float = 0.0
    """Drop semantic matches more than this below the best visible one (0: off)."""
    semantic_cliff: bool = False
    """Keep only the semantic matches above the steepest drop in similarity."""
    always_fuse: bool = False
    """Fuse the semantic channel even when the lexical answer looks confident."""
    no_shaping: bool = False
    """Skip rerank and collapse: results in fused order."""
    source_relation: str = ""
    """Replace a hit that links by this relation with the item it links to."""
    fanout: int = 0
    """Times the limit each channel pulls while source replacement runs (0: 3)."""
    subject_routing: bool = False
    """Send the semantic channel through the subject's own entries, merged with the global."""
    subject_filter: bool = False
    """A search's ``subject`` narrows every channel, not only the lexical one.

    Off (the seed's rule), the subject filters the lexical channel and the
    semantic one may still bring items about other subjects; on, a candidate
    from any channel (spreading included) must have that subject or carry it
    as its ``service/`` tag, as a lexical hit must. :class:`~memstore.Memory`
    turns it on: a caller asking about one subject gets only that subject.
    Sources and link expansions are exempt, as they are from ``kind``.
    """
    fusion: str = FUSION_SCORE
    """:data:`FUSION_SCORE` (fuse normalised scores, the default) or :data:`FUSION_RRF`."""
    lexical_weight: float = LEXICAL_WEIGHT
    """The lexical channel's share of a score fusion, in [0, 1]."""
    bm25_weight: float = 0.0
    """The BM25 channel's share of a score fusion, added to the lexical and semantic
    channels' (which sum to 1), in [0, 1]; 0 (the default) leaves it out.

    When the semantic channel runs, the query's words are also scored by BM25
    (:mod:`memstore._bm25`: exact words, document-length normalised), a
    second opinion on the same words that the lexical channel's match levels
    do not give; its best hits are normalised like the other channels' and
    added at this share. :data:`~memstore.search.BM25_WEIGHT` (0.1) is the
    share measured on LoCoMo: recall@5 up on every conversation, recall@10
    and MRR unchanged, about 0.15 ms more a fused search (docs/search.md). A
    rank fusion (``fusion="rrf"``, the seed's two channels) and the lexical
    fast path (a confident keyword answer) never run it."""
    spread_relations: tuple[str, ...] = ()
    """Link relations along which a candidate lends part of its fused score to its neighbours.

    One hop, both ways: an item linked to a candidate by one of these gains
    :data:`SPREAD_DECAY` x the link's weight x the best such candidate's
    score (before spreading), on top of its own. For items that are context
    for each other: consecutive turns of a conversation, steps of one
    procedure. Empty (the default): no spreading.
    """
    date_signal: bool = True
    """Dates the query names ("in May 2023", "last week", "before 2023") favour candidates
    whose ``event_date`` falls in them (see :mod:`memstore.search._signals`)."""
    when_signal: bool = True
    """A question asking for a time ("when did...") favours candidates whose text mentions one."""
    subject_signal: bool = True
    """A query naming a candidate's ``subject`` (all of its words) favours that candidate."""
    signal_weight: float = SIGNAL_WEIGHT
    """What each signal that holds adds to a candidate's fused score, in [0, 1] (0: none)."""
    feedback_round: bool = False
    """A second lexical round seeded by the first, for questions the lexical answer is not
    confident about: the query plus the distinctive words the first round's best
    candidates share, fused in below the first round (see :mod:`memstore.search._feedback`)."""
    info_prior: str = INFO_PRIOR_OFF
    """A handicap for candidates whose text says little (few words), so that a generic
    turn ("Later, take care!") cannot take a top place on vector similarity alone.

    ``"off"`` (the default): none. ``"semantic"``: each semantic hit's
    similarity plus ``0.05 * ln(1 + words)``. ``"fused"``: when the semantic
    channel ran, the fused score of a candidate of at most 8 words times 0.9.
    ``"length"``: when the semantic channel ran, every fused score plus
    ``length_weight * ln(1 + words)``. Words are those of the title and
    content (see :mod:`memstore.search._prior`).
    """
    length_weight: float = LENGTH_WEIGHT
    """The ``c`` of ``info_prior="length"``: fused-score credit per unit of
    ``ln(1 + words)``, in [0, 1] (read only by that prior). Fused scores are a
    few weights, so the credit stays far below the score that marks an exact
    id match (``EXACT_ID_MATCH_SCORE``)."""


_FLAGS: Final = (
    "semantic_cliff",
    "always_fuse",
    "no_shaping",
    "subject_routing",
    "subject_filter",
    "date_signal",
    "when_signal",
    "subject_signal",
    "feedback_round",
)
"""The options that are ``True`` or ``False`` (nothing merely truthy)."""


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_config(cfg: SearchConfig) -> None:
    """Reject an option of the wrong type or out of range, naming it (a :class:`ValueError`).

    Checked when a searcher is built, so a bad option fails there and not
    at the first search that reads it.
    """
    for name in _FLAGS:
        if type(getattr(cfg, name)) is not bool:
            raise ValueError(
                f"SearchConfig.{name} must be True or False, got {getattr(cfg, name)!r}"
            )
    if not _is_number(cfg.semantic_gap) or cfg.semantic_gap < 0:
        raise ValueError(f"SearchConfig.semantic_gap {cfg.semantic_gap!r} is not a number >= 0")
    if type(cfg.fanout) is not int or cfg.fanout < 0:
        raise ValueError(f"SearchConfig.fanout {cfg.fanout!r} is not a whole number >= 0")
    if not isinstance(cfg.source_relation, str):
        raise ValueError(f"SearchConfig.source_relation {cfg.source_relation!r} is not a string")
    spread = cfg.spread_relations
    if not isinstance(spread, tuple | list) or not all(isinstance(r, str) for r in spread):
        raise ValueError(
            f"SearchConfig.spread_relations {spread!r} is not a tuple of relation names"
        )
    for name in ("signal_weight", "lexical_weight", "bm25_weight"):
        if not _is_number(getattr(cfg, name)):
            raise ValueError(f"SearchConfig.{name} {getattr(cfg, name)!r} is not in [0, 1]")
    if cfg.info_prior not in INFO_PRIORS:
        raise ValueError(
            f"SearchConfig.info_prior {cfg.info_prior!r} is unknown; use one of "
            + ", ".join(map(repr, INFO_PRIORS))
        )
    if not _is_number(cfg.length_weight) or not 0.0 <= cfg.length_weight <= 1.0:
        raise ValueError(f"SearchConfig.length_weight {cfg.length_weight!r} is not in [0, 1]")
    if cfg.fusion not in (FUSION_SCORE, FUSION_RRF):
        raise ValueError(
            f"SearchConfig.fusion {cfg.fusion!r} is unknown; use {FUSION_SCORE!r} or {FUSION_RRF!r}"
        )
    if not 0.0 <= cfg.signal_weight <= 1.0:
        raise ValueError(f"SearchConfig.signal_weight {cfg.signal_weight!r} is not in [0, 1]")
    if not 0.0 <= cfg.lexical_weight <= 1.0:
        raise ValueError(f"SearchConfig.lexical_weight {cfg.lexical_weight!r} is not in [0, 1]")
    if not 0.0 <= cfg.bm25_weight <= 1.0:
        raise ValueError(f"SearchConfig.bm25_weight {cfg.bm25_weight!r} is not in [0, 1]")
