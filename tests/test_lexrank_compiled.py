"""The compiled ``lex_rank`` sums a query's matches two ways, and both are numpy's ranking.

``memstore/_lexrank.c`` sums the tokens' matches either by a k-way merge of
their sorted slots or in one accumulator per slot (its ``how`` argument; by
default it picks by how densely the slots are matched), then keeps the
candidates at the cut and sorts them. Here random plans over a real
:class:`~memstore._lexindex.LexicalIndex` (its filter columns: kinds,
subjects, partitions, deadlines, update times that tie often) are ranked by
each way and by the numpy path (the oracle, ``MEMSTORE_PURE_PYTHON``'s): the
same hits in the same order, the same scores bit for bit, under every filter
and cut. The plans are drawn directly (slots, levels, title matches, weights),
so they reach what the lexicon's own matches rarely do: many tokens over the
same slots, zero weights, fuzzy levels beside exact ones, every slot matched.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import _wordbatch
from memstore._lexindex import LexicalHits, LexicalIndex, QueryPlan
from memstore._lexscore import plan_tokens
from memstore.item import Item
from memstore.lexical import TokenMatch

NATIVE: Any = _wordbatch.speedups
pytestmark = pytest.mark.skipif(
    NATIVE is None, reason="memstore._speedups is not built (or switched off)"
)

T0 = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)
KINDS = ["fact", "event", "note"]
SUBJECTS = ["", "billing", "auth"]
TAGS = [[], ["tenant/a"], ["tenant/b"], ["tenant/b", "shared"], ["service/auth"]]
LEVELS = [1.0, 0.9, 0.85, 0.8, 0.6, 0.5, 0.35]
"""The lexicon's match levels (exact to substring), and two fuzzy ones below them."""
AUTO, MERGE, DENSE = 0, 1, 2
"""``lex_rank``'s ``how``."""


class Summing:
    """The built module, its ``lex_rank`` told how to sum (an index reads ``speedups``)."""

    def __init__(self, how: int) -> None:
        self.how = how

    def __getattr__(self, name: str) -> object:
        return getattr(NATIVE, name)

    def lex_rank(self, *args: object) -> object:
        return NATIVE.lex_rank(*args, self.how)


@st.composite
def indexes(draw: st.DrawFn) -> LexicalIndex:
    """An index of up to 150 documents, some removed (dead slots), with filter fields that tie."""
    n = draw(st.integers(1, 150))
    index = LexicalIndex(compact_min=10_000)  # no compaction: the slots stay as put
    for i in range(n):
        stale = draw(st.sampled_from([None, 1, 2, 9]))
        index.put(
            Item(
                id=f"d{draw(st.integers(0, 999)):03d}-{i}",
                kind=draw(st.sampled_from(KINDS)),
                content="word",
                subject=draw(st.sampled_from(SUBJECTS)),
                tags=draw(st.sampled_from(TAGS)),
                updated_at=draw(st.sampled_from([None, T0, T0, T0 + _dt.timedelta(hours=1)])),
                stale_after=None if stale is None else T0 + _dt.timedelta(hours=stale),
            ),
            False,
        )
    for i in draw(st.sets(st.integers(0, n - 1), max_size=n // 3)):
        index.remove(index.lexicon.id_at(i) or "")
    index.flush()
    return index


@st.composite
def plans(draw: st.DrawFn, index: LexicalIndex) -> QueryPlan:
    """One to six tokens, each over sorted distinct live slots, its title matches a subset."""
    live = np.flatnonzero(index.lexicon.alive_slots()[: index.lexicon.capacity])
    matches, weights = [], []
    for _ in range(draw(st.integers(1, 6))):
        every = draw(st.booleans())
        picked = live if every else sorted(draw(st.sets(st.sampled_from(live.tolist()))))
        slots = np.asarray(picked, np.intp)
        levels = np.array([draw(st.sampled_from(LEVELS)) for _ in slots], np.float64)
        in_title = np.array([draw(st.booleans()) for _ in slots], np.bool_)
        title_levels = np.minimum(levels, draw(st.sampled_from(LEVELS)))[in_title]
        matches.append(TokenMatch(slots, levels, slots[in_title], title_levels))
        weights.append(draw(st.sampled_from([0.0, 0.3, 1.2]) | st.floats(0.01, 5.0)))
    tokens = tuple(f"t{i}" for i in range(len(matches)))
    return QueryPlan(tokens, tuple(matches), tuple(weights), (False,) * len(matches))


def ranked(index: LexicalIndex, plan: QueryPlan, how: int | None, **args: Any) -> LexicalHits:
    """``index.rank`` by the compiled rank summing ``how``, or by numpy (``None``)."""
    saved = _wordbatch.speedups
    setattr(_wordbatch, "speedups", None if how is None else Summing(how))  # noqa: B010
    try:
        return index.rank(plan, **args)
    finally:
        _wordbatch.speedups = saved


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_way_of_summing_is_the_numpy_ranking(data: st.DataObject) -> None:
    index = data.draw(indexes())
    plan = data.draw(plans(index))
    args = {
        "kind": data.draw(st.sampled_from(["", *KINDS])),
        "subject": data.draw(st.sampled_from(SUBJECTS)),
        "hidden_kinds": data.draw(st.sampled_from([(), ("note",), ("note", "unknown")])),
        "now_ts": (T0 + _dt.timedelta(hours=data.draw(st.sampled_from([0, 1, 5])))).timestamp(),
        "limit": data.draw(st.sampled_from([None, 1, 2, 7, 50, 200])),
        "partition": data.draw(st.sampled_from([None, "a", "b", "zz"])),
    }
    want = ranked(index, plan, None, **args)
    for how in (AUTO, MERGE, DENSE):
        got = ranked(index, plan, how, **args)
        assert list(got) == list(want), how
        assert got.ids == want.ids and got.scores.tobytes() == want.scores.tobytes(), how


def test_each_way_hands_back_slots_it_cannot_take() -> None:
    """Slots out of order, repeated, or past the columns: no ranking (numpy ranks them)."""
    index = LexicalIndex()
    for i in range(5):
        index.put(Item(id=f"i{i}", kind="fact", content="alpha"), False)
    index.flush()
    plan = index.plan(["alpha"])
    cols: tuple[Any, ...] = (index._stale, index._updated, index._kind, index._subject)
    cols += (index._service, index._partition, index._shared)
    ok = np.array([0, 2], np.intp)
    level = np.ones(2)
    for bad in ([2, 0], [1, 1], [0, len(index._stale)], [-1, 0]):
        tokens, scoring = plan_tokens(plan)
        odd = (np.array(bad, np.intp), level, ok[:0], level[:0], 1.0)
        for how in (AUTO, MERGE, DENSE):
            got = NATIVE.lex_rank(
                ((ok, level, ok[:0], level[:0], 1.0), odd),
                *scoring,
                cols,
                None,
                None,
                None,
                (),
                0.0,
                3,
                index.lexicon._ids,
                tuple,
                how,
            )
            assert got is NotImplemented, (bad, how)
    with pytest.raises(ValueError, match="how must be"):
        NATIVE.lex_rank(
            tokens, *scoring, cols, None, None, None, (), 0.0, 3, index.lexicon._ids, tuple, 3
        )
