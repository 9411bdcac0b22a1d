"""memstore.context_block: the budget always holds and the receipt is exact."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstore.context_block import build_context_block, memory_line
from memstore.item import Item
from memstore.search import SearchResult

texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=80)


def items(contents: list[str]) -> list[Item]:
    return [
        Item(id=f"m{n}", kind="note", content=c if c.strip() else "x")
        for n, c in enumerate(contents)
    ]


@given(st.lists(texts, max_size=12), st.text(max_size=200), st.integers(1, 600))
def test_budget_and_receipt(contents: list[str], personality: str, budget: int) -> None:
    given_items = items(contents)
    block = build_context_block(given_items, personality=personality, max_chars=budget)
    assert len(block.text) <= budget
    assert sorted(block.ids + block.omitted) == sorted(it.id for it in given_items)
    shown = [it for it in given_items if it.id in block.ids]
    assert [it.id for it in shown] == list(block.ids)  # rank order kept
    for it in shown:
        assert memory_line(it) in block.text.splitlines()
    assert block.personality == personality


def test_search_results_titles_and_event_dates() -> None:
    hits = [
        SearchResult(
            Item(
                id="e1",
                kind="event",
                title="Deploy",
                content="v2 shipped",
                event_date="2026-03-01T09:30:00Z",
            )
        ),
        SearchResult(Item(id="n1", kind="note", content="Met Ana", event_date="2026-03-02")),
    ]
    block = build_context_block(hits, id_of=lambda it: it.id.upper())
    assert block.text.splitlines() == [
        "Memories:",
        "- [E1] Deploy (2026-03-01T09:30:00Z): v2 shipped",
        "- [N1] Met Ana (2026-03-02)",
    ]
    assert block.ids == ("E1", "N1")


def test_a_long_personality_is_cut_and_marked() -> None:
    block = build_context_block(
        [Item(id="a", kind="note", content="fact")], personality="p" * 500, max_chars=100
    )
    assert len(block.text) == 100 and block.text.endswith("…")
    assert block.ids == () and block.omitted == ("a",)


def test_the_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        build_context_block([], max_chars=0)
