"""The CellStore's tunables: graph shape, search breadth, when to scan, when to compact.

Read at call time as ``tune.NAME`` by every part of the CellStore, so a test
(or an experiment) can change one in a single place.
"""

from __future__ import annotations

__all__ = [
    "CENTER_MIN",
    "COMPACT_MIN_DELETED",
    "COMPACT_RATIO",
    "DEFAULT_EF",
    "DEFAULT_EF_CONSTRUCTION",
    "DEFAULT_M",
    "EXACT_THRESHOLD",
    "MAX_EF",
    "MAX_M",
    "READABLE_AMORTISE",
    "SUBSET_CACHE_SIZE",
    "SUBSET_SCAN_MAX",
    "WALK_CACHE_SIZE",
]

DEFAULT_M = 32
"""HNSW graph degree: links per node (memory grows with it, so does recall)."""
DEFAULT_EF_CONSTRUCTION = 200
"""Candidate list size while building the graph (build time vs graph quality)."""
DEFAULT_EF = 300
"""Candidate list size while searching (latency vs recall); at least ``k`` is used."""
MAX_M = 1024
"""The largest graph degree accepted: hnswlib keeps ``2 * m`` links a node on its
first layer, so 1,024 is already 8 KB of links an item; more is a mistake that
would fail later as an allocation."""
MAX_EF = 1_000_000
"""The largest ``ef_construction`` or ``ef_search`` accepted (a beam beyond the
items held is the whole graph; beyond this, a mistake, not a setting)."""
EXACT_THRESHOLD = 2048
"""At or below this many candidates an exact scan is both exact and faster than HNSW."""
SUBSET_SCAN_MAX = 50_000
"""Largest partition set scanned exactly from a cached contiguous copy (above: the graph)."""
SUBSET_CACHE_SIZE = 8
"""Partition sets whose contiguous copies are kept (oldest dropped first)."""
WALK_CACHE_SIZE = 1024
"""Unfiltered graph walks kept per index generation, by query vector (oldest dropped first).

A walk of a 10,000-vector graph for a hybrid search's pool of 200 costs
~0.4 ms; a kept one, a dictionary lookup. Each holds the query's bytes and
its labels and distances (~3.5 KB for 256 dimensions and a pool of 200).
"""
READABLE_AMORTISE = 400
"""Entries one graph search may spend on laying out its partition set's readable labels.

The layout costs ~0.8 us an entry; a walk without it ~0.3 ms more (the rule
called on the entries the walk meets), about 400 entries' worth. So a set is
laid out once a generation's searches x this reaches its size: at once for a
small set, after a few searches for a large one, never for a store written
between every two searches (which would pay the pass each time and gain
nothing).
"""
COMPACT_RATIO = 0.25
"""Rebuild the graph once deleted labels exceed this share of live ones..."""
COMPACT_MIN_DELETED = 1024
"""...and this many, so small churn never triggers a rebuild."""
CENTER_MIN = 64
"""Fewest vectors searched for ``center=True`` to apply; below it, plain cosine.

The mean of a handful of vectors is mostly each of them: centring on it
would measure every entry against a blend of the others.
"""
