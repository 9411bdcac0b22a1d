"""Rerank arithmetic shared by the searcher: the base score of an input rank.

>>> rerank_base_score(0), round(rerank_base_score(10), 3)
(1.0, 0.667)
"""

from __future__ import annotations

__all__ = ["RERANK_RANK_DECAY", "rerank_base_score"]

RERANK_RANK_DECAY = 0.05
"""How fast the rerank base score falls with input rank."""


def rerank_base_score(rank: int) -> float:
    """The base score the rerank multipliers scale: ``1/(1 + rank * RERANK_RANK_DECAY)``.

    ``rank`` is 0-based (0 is the best input); a negative rank counts as 0.
    """
    return 1.0 / (1.0 + max(rank, 0) * RERANK_RANK_DECAY)
