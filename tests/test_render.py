"""memstore.render: one character budget shared by ranked texts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memstore.render import ELLIPSIS, MIN_SHARE, clip, share_budget


@given(st.lists(st.text(max_size=400), max_size=30), st.integers(1, 3000))
def test_share_budget_never_exceeds_and_keeps_order(texts: list[str], budget: int) -> None:
    kept, cut = share_budget(texts, budget)
    assert sum(len(t) for t in kept) <= budget
    assert len(kept) <= len(texts)
    for original, got in zip(texts, kept, strict=False):  # a prefix of each, in rank order
        assert got == original or (got.endswith(ELLIPSIS) and len(got) < len(original))
    fits = sum(len(t) for t in texts) <= budget
    assert cut == (not fits)
    if fits:
        assert kept == texts


@given(st.lists(st.text(min_size=1, max_size=50), min_size=1, max_size=10))
def test_texts_that_fit_together_are_untouched(texts: list[str]) -> None:
    total = sum(len(t) for t in texts)
    assert share_budget(texts, total) == (texts, False)


def test_long_texts_share_what_short_ones_leave() -> None:
    kept, cut = share_budget(["tiny", "a" * 1000, "b" * 1000], 400)
    assert cut and kept[0] == "tiny"
    assert len(kept[1]) == len(kept[2]) == 198


def test_a_tight_budget_keeps_the_best_ranked() -> None:
    kept, cut = share_budget(["a" * 500] * 10, 2 * MIN_SHARE)
    assert cut and len(kept) == 2


def test_clip() -> None:
    assert clip("abcdef", 4) == "abc" + ELLIPSIS
    assert clip("abc", 0) == ""
