"""cluster_near_duplicates: the indexed pass against the plain scan it replaced.

The reference below is the original implementation, one ``dedup_comparable``
and one token intersection per (item, cluster) pair. The indexed pass must
group every generated input exactly as it does, in the same order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Item
from memstore.neardup import cluster_near_duplicates, dedup_comparable, near_duplicate_tokens
from memstore.text import dedup_tokens


def reference_clusters(items: Sequence[Item]) -> list[list[Item]]:
    """Each item joins the first cluster whose first member it near-duplicates."""
    clusters: list[list[Item]] = []
    heads: list[frozenset[str]] = []
    for it in items:
        toks = dedup_tokens(it)
        for cluster, head_toks in zip(clusters, heads, strict=True):
            if dedup_comparable(cluster[0], it) and near_duplicate_tokens(head_toks, toks)[1]:
                cluster.append(it)
                break
        else:
            clusters.append([it])
            heads.append(toks)
    return clusters


# A small vocabulary, so generated texts often near-duplicate one another
# (short ones must be near-identical, long ones need 30% or containment).
_WORDS = "ledger payment timeout replica backup disk orders quota q3 q4".split()
_WORDS += [f"word{i}" for i in range(14)]

_ITEM = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["stable_fact", "hypothesis"]),
        "scope": st.sampled_from(["public", "private"]),
        "subject": st.sampled_from(["", "Ledger", "ledger", "LEDGER", "disk"]),
        "origin": st.sampled_from(["", "derived", "human", "observed", "verified"]),
        "words": st.lists(st.sampled_from(_WORDS), max_size=14),
        "tags": st.lists(
            st.sampled_from(
                [
                    "tenant/a",
                    "tenant/b",
                    "service/auth",
                    "service/billing",
                    "author/xavier",
                    "author/yolanda",
                    "shared",
                    "user:ann",
                    "user:bob",
                ]
            ),
            max_size=3,
            unique=True,
        ),
    }
)


def _items(specs: list[dict[str, object]]) -> list[Item]:
    out = []
    for i, spec in enumerate(specs):
        fields = {k: v for k, v in spec.items() if k != "words"}
        words = spec["words"]
        assert isinstance(words, list)
        out.append(Item.model_validate({"id": f"i{i}", "content": " ".join(words), **fields}))
    return out


def _ids(clusters: list[list[Item]]) -> list[list[str]]:
    return [[it.id for it in cl] for cl in clusters]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ITEM, max_size=30))
def test_clusters_match_the_plain_scan(specs: list[dict[str, object]]) -> None:
    items = _items(specs)
    assert _ids(cluster_near_duplicates(items)) == _ids(reference_clusters(items))


def test_clusters_match_the_plain_scan_on_many_restatements() -> None:
    # Seeded, larger than hypothesis generates: long postings and many heads.
    rng = random.Random(42)
    specs: list[dict[str, object]] = [
        {
            "kind": "stable_fact",
            "scope": "public",
            "subject": rng.choice(["", "ledger"]),
            "origin": rng.choice(["", "human", "observed"]),
            "words": rng.sample(_WORDS, rng.randint(0, 12)),
            "tags": rng.sample(["tenant/a", "service/auth", "service/billing", "author/x"], 2),
        }
        for _ in range(400)
    ]
    items = _items(specs)
    got = _ids(cluster_near_duplicates(items))
    assert got == _ids(reference_clusters(items))
    assert any(len(cl) > 1 for cl in got) and any(len(cl) == 1 for cl in got)


def test_private_items_of_different_owners_are_never_comparable() -> None:
    text = "the ledger replica backup runs every night at two and takes forty minutes"
    mine = Item(id="m", kind="stable_fact", content=text, scope="private", tags=["user:ann"])
    same = mine.clone(id="s")
    theirs = mine.clone(id="t", tags=["user:bob"])
    assert dedup_comparable(mine, same)
    assert not dedup_comparable(mine, theirs) and not dedup_comparable(theirs, mine)
    assert _ids(cluster_near_duplicates([mine, theirs, same])) == [["m", "s"], ["t"]]
