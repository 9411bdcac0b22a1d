"""Fitting memories into a context window: a character budget shared by ranked texts.

Every surface that hands memories to a model (the MCP tools, an HTTP recall,
a framework adapter) must bound what it returns: a recall that dumps every
matching note floods the caller's context. :func:`share_budget` divides one
budget among ranked texts so that short texts stay whole and long ones share
what is left. The prompt-ready block of memories (personality, one line per
memory, the receipt of ids) is :func:`memstore.context_block.build_context_block`.

>>> texts, cut = share_budget(["short", "x" * 150, "y" * 150], 240)
>>> [len(t) for t in texts], cut
([5, 117, 117], True)
>>> share_budget(["a", "b"], 100)
(['a', 'b'], False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from memstore.search import Explanation

__all__ = [
    "ELLIPSIS",
    "MIN_SHARE",
    "clip",
    "explanation_text",
    "share_budget",
]

ELLIPSIS: Final = "…"
"""What ends a clipped text (one character, counted in the budget)."""
MIN_SHARE: Final = 80
"""The fewest characters a kept text is cut to: below that, fewer texts are kept instead."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in :data:`ELLIPSIS` when cut.

    >>> clip("the nightly backup runs at two", 12)
    'the nightly…'
    >>> clip("short", 12)
    'short'
    """
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + ELLIPSIS


def share_budget(texts: Sequence[str], max_chars: int) -> tuple[list[str], bool]:
    """Cut ranked ``texts`` so that together they hold at most ``max_chars`` characters.

    Water-filling: texts shorter than an equal share are kept whole and what
    they leave is shared by the longer ones, each clipped to its share. When
    the budget cannot give every text :data:`MIN_SHARE` characters, only the
    first ``max_chars // MIN_SHARE`` texts are kept (at least one): the best
    ranked matter most. Returns the kept texts, in order, and whether
    anything was cut or dropped. Cost: O(n log n) for n texts.

    >>> kept, cut = share_budget(["a" * 300, "b" * 300, "c" * 300], 100)
    >>> [len(t) for t in kept], kept[0][-1], cut
    ([100], '…', True)
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    if sum(len(t) for t in texts) <= max_chars:
        return list(texts), False
    keep = min(len(texts), max(1, max_chars // MIN_SHARE))
    kept = list(texts[:keep])
    if sum(len(t) for t in kept) <= max_chars:
        return kept, True
    # Raise a common cap until the budget is spent: shortest texts settle first.
    order = sorted(range(len(kept)), key=lambda i: len(kept[i]))
    remaining, left = max_chars, len(kept)
    cap = 0
    for i in order:
        share = remaining // left
        if len(kept[i]) <= share:
            remaining -= len(kept[i])
            left -= 1
            continue
        cap = share
        break
    return [t if len(t) <= cap else clip(t, cap) for t in kept], True


def explanation_text(why: Explanation) -> str:
    """One line saying how a search result was found and scored (ranks count from 1).

    >>> from memstore.search import Explanation
    >>> explanation_text(Explanation(channels=["lexical"], lexical_rank=0, lexical_score=2.5,
    ...                              base_score=1.0, multipliers={"recency": 1.2}))
    'found by lexical; lexical rank 1 (score 2.5); base 1; recency x1.2'
    """
    parts = [f"found by {', '.join(why.channels) or 'nothing recorded'}"]
    if why.lexical_rank is not None:
        parts.append(f"lexical rank {why.lexical_rank + 1} (score {_num(why.lexical_score)})")
    if why.semantic_rank is not None:
        parts.append(f"semantic rank {why.semantic_rank + 1} (similarity {_num(why.similarity)})")
    if why.spread_from:
        parts.append(f"linked from {why.spread_from} (+{_num(why.spread_score)})")
    if why.fused_score is not None:
        parts.append(f"fused {_num(why.fused_score)}")
    if why.base_score is not None:
        parts.append(f"base {_num(why.base_score)}")
    parts.extend(f"{name} x{_num(v)}" for name, v in sorted(why.multipliers.items()))
    if why.collapsed:
        parts.append(f"collapsed {len(why.collapsed)} near-duplicate(s)")
    return "; ".join(parts)


def _num(x: float | None) -> str:
    return "?" if x is None else f"{x:.4g}"
