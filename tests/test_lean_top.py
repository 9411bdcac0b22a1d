"""The lean fusion's best candidates, compiled, are the numpy pass's, slot for slot and bit for bit.

:meth:`memstore.search._lean.LeanFusion.ordered` (no query signal, no prior)
asks :func:`~memstore.search._lean.top_slots` for the best ``need`` readable
candidates: the compiled ``lean_top`` where ``memstore._speedups`` is built,
else :func:`~memstore.search._lean._top_slots`, its numpy oracle. Hypothesis
holds the two to the same slots and the same scores over drawn snapshots:
scores with ties (broken by id rank), zeros of both signs, loans to slots
scored or not (one slot lent to twice: the last loan counts, as numpy's
``+=`` gives), unreadable slots, and a ``need`` below, at and above the
candidates. A NaN score is left to the oracle. Whole hybrid searches go
through it too (``tests/test_search_differential.py`` holds the lean path to
the general one); here a store is searched with the compiled pass and with
the oracle swapped in, the same results.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Item, Store, _wordbatch
from memstore.search import SearchConfig, Searcher, _lean
from memstore.search._lean import _top_slots, top_slots

try:
    from memstore import _speedups as COMPILED
except ImportError:  # not built: the differential tests skip
    COMPILED = None

needs_speedups = pytest.mark.skipif(COMPILED is None, reason="memstore._speedups is not built")

Case = tuple[
    npt.NDArray[np.float64],
    npt.NDArray[np.bool_],
    npt.NDArray[np.bool_],
    npt.NDArray[np.intp],
    npt.NDArray[np.float64],
    npt.NDArray[np.intp],
    int,
]

# A few values, so that scores tie often; both zeros, so that their order is tested.
SCORES = st.sampled_from([0.0, -0.0, 0.25, 0.5, 0.5000000000000001, 1.0, 0.1, 0.7, 2.0])


@pytest.fixture(autouse=True)
def _compiled_outside_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled pass where it is built, even under ``MEMSTORE_PURE_PYTHON=1``."""
    if COMPILED is not None:
        monkeypatch.setattr(_wordbatch, "speedups", COMPILED)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A snapshot's columns: scores, masks, loans (repeats allowed), id ranks, and a need."""
    n = draw(st.integers(0, 40))
    base = np.array(draw(st.lists(SCORES, min_size=n, max_size=n)), np.float64)
    scored = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), np.bool_)
    readable = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), np.bool_)
    loans = (
        draw(st.lists(st.tuples(st.integers(0, max(n - 1, 0)), SCORES), max_size=n)) if n else []
    )
    loan_to = np.array([t for t, _ in loans], np.intp)
    loan_add = np.array([a for _, a in loans], np.float64)
    id_rank = np.array(draw(st.permutations(range(n))), np.intp)
    need = draw(st.integers(1, n + 3))
    return base, scored, readable, loan_to, loan_add, id_rank, need


def _signs(xs: list[float]) -> list[tuple[float, bool]]:
    """Floats with their sign bits: ``0.0`` and ``-0.0`` compare equal, these do not."""
    return [(x, bool(np.signbit(x))) for x in xs]


@needs_speedups
@settings(max_examples=400, deadline=None)
@given(cases())
def test_compiled_top_is_the_numpy_top(case: Case) -> None:
    """The same slots in the same order, with the same scores (bits, signs), as the oracle."""
    got = top_slots(*case)
    want = _top_slots(*case)
    assert got[0] == want[0]
    assert _signs(got[1]) == _signs(want[1])
    assert all(type(s) is int for s in got[0])
    # And what the oracle computes, spelt out: readable candidates, by (-score, id rank).
    base, scored, readable, loan_to, loan_add, id_rank, need = case
    final = {int(s): float(base[s]) for s in range(base.size)}
    lent = dict(zip(loan_to.tolist(), loan_add.tolist(), strict=True))
    for s, a in lent.items():
        final[s] = float(base[s]) + a
    cand = [s for s in final if (scored[s] or s in lent) and readable[s]]
    cand.sort(key=lambda s: (-final[s], int(id_rank[s])))
    assert got[0] == cand[:need]


@needs_speedups
def test_compiled_top_leaves_nan_to_the_oracle() -> None:
    """A NaN score: the compiled pass answers ``None``, and ``top_slots`` the oracle's."""
    assert COMPILED is not None
    base = np.array([0.5, np.nan, 0.2])
    mask = np.ones(3, np.bool_)
    args = (base, mask, mask, np.zeros(0, np.intp), np.zeros(0), np.arange(3, dtype=np.intp))
    assert COMPILED.lean_top(*args, 2) is None
    got = top_slots(*args, 2)
    want = _top_slots(*args, 2)
    assert got[0] == want[0]
    assert np.array_equal(got[1], want[1], equal_nan=True)


@needs_speedups
def test_compiled_top_refuses_bad_columns() -> None:
    """Columns of the wrong item size or of different lengths, or a loan past the slots, raise."""
    assert COMPILED is not None
    base, mask = np.zeros(3), np.ones(3, np.bool_)
    rank, none_to, none_add = np.arange(3, dtype=np.intp), np.zeros(0, np.intp), np.zeros(0)
    with pytest.raises(TypeError, match="base"):
        COMPILED.lean_top(base.astype(np.float32), mask, mask, none_to, none_add, rank, 2)
    with pytest.raises(ValueError, match="length"):
        COMPILED.lean_top(base, mask[:2], mask, none_to, none_add, rank, 2)
    with pytest.raises(IndexError, match="loan"):
        COMPILED.lean_top(base, mask, mask, np.array([3], np.intp), np.ones(1), rank, 2)
    with pytest.raises(ValueError, match="need"):
        COMPILED.lean_top(base, mask, mask, none_to, none_add, rank, -1)
    assert COMPILED.lean_top(base, mask, mask, none_to, none_add, rank, 0) == ([], [])


WORDS = ["ledger", "pool", "deploy", "friday", "tax", "kitten", "pottery", "bowl", "api"]


@needs_speedups
@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5), min_size=1, max_size=30),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    st.integers(1, 12),
)
def test_searches_with_and_without_the_compiled_top(
    docs: list[list[str]], query: list[str], limit: int
) -> None:
    """A store's hybrid searches answer alike with the compiled pass and with the oracle."""
    store = Store()
    for i, words in enumerate(docs):
        store.upsert(Item(id=f"d{i:02d}", kind="note", title=words[0], content=" ".join(words)))
    searcher = Searcher(SearchConfig(store=store))
    text = " ".join(query)

    def run() -> list[tuple[str, float, float]]:
        return [
            (r.item.id, r.score, r.relevance) for r in searcher.hybrid_search(text, limit=limit)
        ]

    compiled = run()
    saved, calls = _lean.top_slots, []

    def oracle_top(*args: object) -> tuple[list[int], list[float]]:
        calls.append(args)
        return _top_slots(*args)  # type: ignore[arg-type]

    try:
        _lean.top_slots = oracle_top
        oracle = run()
    finally:
        _lean.top_slots = saved
    assert calls  # the search took the lean path, through the pass
    assert compiled == oracle
