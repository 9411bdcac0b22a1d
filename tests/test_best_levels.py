"""A cold token's merge of matches, compiled, gives the numpy merge's columns.

:func:`memstore._tokenmatch.best_levels` merges a token's per-word slot arrays
into each live slot's best level: the compiled ``best_levels`` where
``memstore._speedups`` is built (a byte per slot of the range the slots span,
or a sort of (slot, level) keys when that range is much wider than the
entries), else :func:`~memstore._tokenmatch._best_levels`, its oracle (four
merges by size). Hypothesis holds the two to the same slots and levels over
drawn groups: repeated slots within and across levels, levels out of order,
slots dead or alive, ranges narrow and wide (both compiled merges), and
the cases the compiled merge leaves to the oracle (a slot past ``capacity`` or
past ``alive``: the oracle's answer or its error).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import _wordbatch
from memstore._tokenmatch import _best_levels, best_levels

try:
    from memstore import _speedups as COMPILED
except ImportError:  # not built: the differential tests skip
    COMPILED = None

needs_speedups = pytest.mark.skipif(COMPILED is None, reason="memstore._speedups is not built")

LEVELS = [0.3, 0.45, 0.6, 0.8, 0.85, 1.0, 0.2]


@pytest.fixture(autouse=True)
def _compiled_outside_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled merge where it is built, even under ``MEMSTORE_PURE_PYTHON=1``."""
    if COMPILED is not None:
        monkeypatch.setattr(_wordbatch, "speedups", COMPILED)


Groups = list[tuple[float, list[np.ndarray]]]


@st.composite
def merges(draw: st.DrawFn) -> tuple[Groups, int, np.ndarray | None]:
    """Groups of slot arrays (each a word's sorted postings, or several concatenated),
    a capacity and an optional ``alive`` mask."""
    wide = draw(st.booleans())  # slots spread over a million: the compiled sort
    top = 1_000_000 if wide else 400
    capacity = top + draw(st.integers(0, 50))
    slot = st.integers(0, top - 1)
    groups: Groups = []
    for _ in range(draw(st.integers(0, 4))):
        level = draw(st.sampled_from(LEVELS))
        arrays = []
        for _ in range(draw(st.integers(0, 3))):
            words = draw(st.lists(st.lists(slot, max_size=40, unique=True), max_size=3))
            arrays.append(np.array([s for w in words for s in sorted(w)], np.int32))
        groups.append((level, arrays))
    alive = None
    if draw(st.booleans()):
        cut = draw(st.integers(0, 12))
        alive = (np.arange(capacity) * 7 + cut) % 5 != 0
    return groups, capacity, alive


@needs_speedups
@settings(max_examples=300, deadline=None)
@given(merges())
def test_compiled_merge_is_the_numpy_merge(case: tuple[Groups, int, np.ndarray | None]) -> None:
    """The same slots (ascending, once) and the same best levels as the oracle."""
    groups, capacity, alive = case
    slots, levels = best_levels(groups, capacity, alive)
    want_slots, want_levels = _best_levels(groups, capacity, alive)
    assert slots.dtype == np.intp and levels.dtype == np.float64
    assert slots.tolist() == want_slots.tolist()
    assert levels.tolist() == want_levels.tolist()
    best: dict[int, float] = {}
    for lv, arrays in groups:
        for a in arrays:
            for s in a.tolist():
                if alive is None or alive[s]:
                    best[s] = max(best.get(s, 0.0), lv)
    assert slots.tolist() == sorted(best)


@needs_speedups
def test_compiled_merge_leaves_odd_slots_to_the_oracle() -> None:
    """A slot past ``capacity`` or past ``alive``, or slots not int32, are left to the oracle."""
    assert COMPILED is not None
    a = np.array([1, 5], np.int32)
    assert COMPILED.best_levels([(1.0, a)], 5, None) is NotImplemented
    assert COMPILED.best_levels([(1.0, a)], 9, np.ones(4, np.bool_)) is NotImplemented
    slots, levels = best_levels([(1.0, [a]), (0.5, [np.array([5, 7], np.int32)])], 9, None)
    assert slots.tolist() == [1, 5, 7] and levels.tolist() == [1.0, 1.0, 0.5]
    with pytest.raises(IndexError):
        best_levels([(1.0, [a])], 9, np.ones(4, np.bool_))  # the oracle's own error
    assert COMPILED.best_levels([(1.0, a.astype(np.int64))], 9, None) is NotImplemented
    with pytest.raises(TypeError, match="list"):
        COMPILED.best_levels(((1.0, a),), 9, None)
