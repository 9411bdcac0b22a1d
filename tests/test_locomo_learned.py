"""The LoCoMo benchmark's learned rerank (``benchmarks/_locomo_learned.py``).

The harness's claims about its model, on synthetic pools: the pairwise fit
learns a feature that separates evidence from the rest (and a penalty shrinks
it), a model with nothing to learn from keeps the fused order, the rerank
touches only the first ``depth`` candidates, the leave-one-conversation-out
never scores a conversation with weights that saw it, and the metrics follow
their definitions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.append(str(BENCH))  # after the stdlib: benchmarks/ has an http.py

import _locomo_learned as ll  # noqa: E402
from _locomo_data import Question  # noqa: E402

F = len(ll.FEATURES)


def _pool(conv: str, n: int, gold: set[int], signal: int, rng: np.random.Generator) -> ll.Pool:
    """``n`` candidates, evidence at ``gold``; feature ``signal`` is 1 on evidence, 0 elsewhere."""
    ids = [f"{conv}:D1:{i}" for i in range(n)]
    x = rng.normal(size=(n, F))
    x[:, signal] = [1.0 if i in gold else 0.0 for i in range(n)]
    q = Question(conv, 0, 4, "q", tuple(ids[i] for i in sorted(gold)), frozenset({1}))
    return ll.Pool(q, True, ids, x)


def test_fit_learns_the_feature_that_separates_evidence() -> None:
    rng = np.random.default_rng(0)
    signal = ll.FEATURES.index("log_words")
    pools = [_pool("c", 20, {int(rng.integers(20))}, signal, rng) for _ in range(30)]
    model = ll.fit(pools, ll.ALL)
    assert int(np.argmax(model.weights)) == signal
    for p in pools:  # every evidence turn comes first
        assert ll.reorder(p, model)[0] in p.question.evidence
    # A heavier penalty shrinks the weights toward zero.
    heavy = ll.fit(pools, ll.ALL, l2=1e4)
    assert np.abs(heavy.weights).sum() < np.abs(model.weights).sum()


def test_nothing_to_learn_keeps_the_fused_order() -> None:
    rng = np.random.default_rng(1)
    # No evidence among the candidates: no pair, zero weights, ties keep the order.
    pools = [_pool("c", 12, set(), 0, rng) for _ in range(3)]
    model = ll.fit(pools, ll.ALL)
    assert not model.weights.any()
    assert all(ll.reorder(p, model) == p.ids for p in pools)
    assert not ll.fit([], ll.ALL).weights.any()


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**31 - 1))
def test_rerank_moves_only_the_first_depth(depth: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = _pool("c", 40, {3}, 0, rng)
    model = ll.Model(rng.normal(size=F), np.zeros(F), np.ones(F), ll.ALL)
    got = ll.reorder(p, model, depth)
    assert sorted(got[:depth]) == sorted(p.ids[:depth])
    assert got[depth:] == p.ids[depth:]
    assert ll.reorder(p, None, depth) == p.ids


def test_metrics_follow_their_definitions() -> None:
    q = Question("c", 0, 4, "q", ("a", "b"), frozenset({1}))
    ranking = ["x", "a", *[f"n{i}" for i in range(8)], "b"]
    r5, r10, rr = ll.metrics(q, ranking)
    assert (r5, r10, rr) == (0.5, 0.5, 0.5)
    assert ll.metrics(q, ["n"] * 25) == (0.0, 0.0, 0.0)


def test_leave_one_out_never_scores_a_conversation_with_its_own_weights() -> None:
    rng = np.random.default_rng(2)
    signal = ll.FEATURES.index("tf")
    # Conversation "a" rewards the feature, "b" punishes it: weights fitted on "b"
    # alone must rank "a"'s evidence last, and the other way round.
    a = [_pool("a", 10, {int(rng.integers(10))}, signal, rng) for _ in range(20)]
    b = [_pool("b", 10, {int(rng.integers(10))}, signal, rng) for _ in range(20)]
    for p in b:
        p.x[:, signal] = 1.0 - p.x[:, signal]
    got = ll.loo([*a, *b], lambda p: True, (signal,))
    assert all(rr <= 0.1 + 1e-9 for _, _, rr in got)  # evidence at rank 10 of 10
