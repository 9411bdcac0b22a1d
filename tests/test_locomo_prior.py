"""The information prior's leave-one-conversation-out choice (``benchmarks/_locomo_prior.py``).

The rule of docs/benchmarks.md ("An information prior") is applied to this
choice: each conversation is scored with the variant whose recall@5, summed
over the other conversations, is higher (ties: MRR, then the first variant),
so a conversation's own figures never pick its variant.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.append(str(BENCH))  # after the stdlib: benchmarks/ has an http.py

from _locomo_data import Question  # noqa: E402
from _locomo_metrics import ModeResult  # noqa: E402
from _locomo_prior import LENGTH_GRID, length_fit, loo_choice  # noqa: E402


def _q(conv: str, i: int) -> Question:
    return Question(conv, i, 4, "q", (f"{conv}:D1:{i}",), frozenset({1}))


def _rec(r5: list[float], first: list[int | None]) -> dict[str, list[Any]]:
    return {"recall@5": r5, "recall@10": r5, "first_hit": first}


def test_each_conversation_gets_the_variant_that_won_on_the_others() -> None:
    questions = [_q("a", 0), _q("b", 0), _q("c", 0)]
    # "semantic" wins on a and b, "fused" on c: held out, c sees a and b (semantic);
    # a sees b and c (a tie on recall@5, broken by MRR: fused's first hits are better).
    runs = {
        "semantic": _rec([1.0, 1.0, 0.0], [1, 2, None]),
        "fused": _rec([0.0, 0.0, 1.0], [1, 1, 1]),
    }
    got, picks = loo_choice(questions, runs)
    assert picks == {"a": "fused", "b": "fused", "c": "semantic"}
    assert got["recall@5"] == [0.0, 0.0, 0.0]  # a conversation never picks its own winner
    assert got["first_hit"] == [1, 1, None]


def test_a_full_tie_goes_to_the_first_variant() -> None:
    questions = [_q("a", 0), _q("b", 0)]
    same = _rec([0.5, 0.5], [2, 2])
    _, picks = loo_choice(questions, {"semantic": same, "fused": dict(same)})
    assert picks == {"a": "semantic", "b": "semantic"}


def test_the_length_weight_is_fitted_per_fold_on_the_grid_smaller_weight_on_ties() -> None:
    # Every weight scores as the engine except 0.02, better on a and b, worse on c.
    # Held out, c sees 0.02 win on a and b; a (or b) sees it tie the others on
    # recall@5 and MRR over b and c: the smallest weight wins, 0 (the engine).
    questions = [_q("a", 0), _q("b", 0), _q("c", 0)]
    whole = _rec([0.5, 0.5, 0.5], [2, 2, 2])
    asked: list[dict[str, Any]] = []

    def run(fields: dict[str, Any]) -> ModeResult:
        asked.append(fields)
        best = fields["length_weight"] == 0.02
        rec = _rec([1.0, 1.0, 0.0], [1, 1, None]) if best else dict(whole)
        return ModeResult("hybrid", True, per_question=rec)

    choice, picks, every, runs = length_fit(questions, whole, run)
    assert [f["length_weight"] for f in asked] == [w for w in LENGTH_GRID if w]
    assert all(f["info_prior"] == "length" for f in asked)
    assert list(runs) == [f"c={w:g}" for w in LENGTH_GRID]
    assert picks == {"a": "c=0", "b": "c=0", "c": "c=0.02"}
    assert choice["recall@5"] == [0.5, 0.5, 0.0]  # never a conversation's own winner
    assert every == "c=0.02"
    _, picks, every, _ = length_fit(
        questions, whole, lambda f: ModeResult("h", True, per_question=dict(whole))
    )
    assert picks == {"a": "c=0", "b": "c=0", "c": "c=0"} and every == "c=0"
