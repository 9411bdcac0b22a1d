"""The indexed collapse gives what comparing every result with every survivor gives.

:class:`~memstore.search._collapse.Collapse` skips the survivors a result
shares too few tokens with; the reference below is the collapse as it was,
:func:`~memstore.neardup.near_duplicate_memory` against each survivor in
turn. Items are drawn from a small vocabulary (so restatements and partial
overlaps are common) with the fields the comparability rule reads: kind,
scope, subject, origin, partition, service and author tags.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Item
from memstore.neardup import near_duplicate_memory
from memstore.search._collapse import Collapse

WORDS = [f"w{i}" for i in range(14)] + ["deploy", "ledger", "q3", "q4"]
TAGS = ["tenant/a", "tenant/b", "service/auth", "service/billing", "author/x", "author/y", "shared"]


@st.composite
def items(draw: st.DrawFn) -> Item:
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=16))
    return Item(
        kind=draw(st.sampled_from(["stable_fact", "operational_pattern"])),
        confidence="high",
        content=" ".join(words),
        subject=draw(st.sampled_from(["", "payments", "Payments"])),
        origin=draw(st.sampled_from(["", "human", "observed"])),
        tags=draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True)),
    )


def naive(results: list[Item]) -> list[int | None]:
    """Each result's survivor index (among the survivors, in order), or None: it survives."""
    survivors: list[Item] = []
    out: list[int | None] = []
    for it in results:
        for j, s in enumerate(survivors):
            if s.kind == it.kind and near_duplicate_memory(s, it)[1]:
                out.append(j)
                break
        else:
            out.append(None)
            survivors.append(it)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(items(), max_size=30))
def test_the_indexed_collapse_matches_the_pairwise_one(results: list[Item]) -> None:
    collapse = Collapse()
    assert [collapse.into(it) for it in results] == naive(results)
