"""The LoCoMo benchmark's lexical tie-break experiment (``benchmarks/_locomo_tiebreak.py``).

The reorder is checked against a brute-force statement of its rule: runs of
equal engine scores, each ordered by the rule's score (BM25 with b = 0, or
the IDF mass of the matched query words) and otherwise left as the engine
gave them; the scores against their formulas written out.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.append(str(BENCH))  # after the stdlib: benchmarks/ has an http.py

import _locomo_tiebreak as lt  # noqa: E402

WORDS = ["pool", "tax", "kiln", "dog", "run"]
docs = st.lists(st.lists(st.sampled_from(WORDS), max_size=6), min_size=1, max_size=8)


@given(docs, st.lists(st.sampled_from(WORDS), max_size=3), st.sampled_from(lt.TIEBREAKS[1:]))
def test_scores_follow_their_formulas(tokens: list[list[str]], query: list[str], rule: str) -> None:
    ids = [f"t{i}" for i in range(len(tokens))]
    tb = lt.TieBreak(rule, ids, tokens)
    n = len(tokens)
    for id, ts in zip(ids, tokens, strict=True):
        want = 0.0
        for w in set(query):
            tf = ts.count(w)
            if not tf:
                continue
            df = sum(w in other for other in tokens)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            want += idf if rule == "idf-mass" else idf * tf * (lt.K1 + 1) / (tf + lt.K1)
        assert tb.score(id, query) == pytest.approx(want)
    assert tb.score("unknown", query) == 0.0


@given(
    docs,
    st.lists(st.sampled_from(WORDS), max_size=3),
    st.sampled_from(lt.TIEBREAKS[1:]),
    st.data(),
)
def test_reorder_settles_only_ties(
    tokens: list[list[str]], query: list[str], rule: str, data: st.DataObject
) -> None:
    ids = [f"t{i}" for i in range(len(tokens))]
    tb = lt.TieBreak(rule, ids, tokens)
    scores = data.draw(st.lists(st.sampled_from([0.2, 0.5, 0.9]), min_size=len(ids)))
    hits = sorted(zip(ids, scores[: len(ids)], strict=True), key=lambda h: -h[1])
    got = tb.reorder(hits, query)
    want: list[str] = []
    for _, run in itertools.groupby(hits, key=lambda h: h[1]):
        group = [id for id, _ in run]
        # Stable: equal rule scores keep the engine's order.
        want += sorted(group, key=lambda id: -tb.score(id, query))
    assert got == want


def test_unknown_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown tie-break 'bm42'"):
        lt.TieBreak("bm42", ["a"], [["pool"]])


def test_module_examples() -> None:
    import doctest

    assert doctest.testmod(lt).failed == 0
