"""The MCP ``related`` tool: one walk bounded by ``CONTEXT_REACH``, the old answer under it.

It used to walk from each anchor with ``Memory.context`` (unbounded, and
resolving the id as anchor text: a walk over every item each time) and merge
the walks by best score. The differential test keeps that as the oracle on
random graphs across partitions, walking a store of the caller's items alone
(the tool's walk passes through no other partition's items); a hub past the bound gives ``complete:
false``, and exactly at it ``true``.
"""

from __future__ import annotations

from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Item, Memory, Store, ThoughtLink
from memstore.limits import CONTEXT_REACH
from memstore.search import default_visible
from tests.mcp_harness import in_process

NODES = [f"n{i}" for i in range(8)]
WEIGHTS = [0.25, 0.5, 1.0]

nodes_st = st.lists(
    st.tuples(
        st.sampled_from(NODES),
        st.sampled_from(["p", "p", "q", "shared", "stale"]),
        st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(WEIGHTS)), max_size=3),
    ),
    min_size=1,
    max_size=8,
    unique_by=lambda n: n[0],
)


def _build(mem: Memory, nodes: list[tuple[str, str, list[tuple[str, float]]]]) -> None:
    for id, where, links in nodes:
        kw: dict[str, Any] = {}
        if where in ("p", "q"):
            kw["partition"] = where
        elif where == "stale":
            kw["status"] = "stale"
            kw["partition"] = "p"
        mem.add(
            Item(
                id=id,
                kind="note",
                content=f"heron note {id}",
                links=[
                    ThoughtLink(to_id=t, relation="explains", weight=w) for t, w in links if t != id
                ],
            ),
            **kw,
        )


def _oracle(mem: Memory, anchors: list[str], depth: int, limit: int) -> list[tuple[str, float]]:
    """The tool's answer as it was: a context walk per anchor, merged by best score, over a
    store of the caller's items alone (the walk passes through no other partition's)."""
    theirs = Store()
    theirs.restore([it for it in mem.store.all_items() if default_visible(it, "p")])
    best: dict[str, tuple[float, str]] = {}
    for id in anchors:
        _, scored = theirs.context(id, depth, reach=0)
        for s in scored:
            if s.item.id in anchors or not default_visible(s.item, "p"):
                continue
            have = best.get(s.item.id)
            if have is None or s.score > have[0]:
                best[s.item.id] = (s.score, s.item.id)
    ranked = sorted(best.values(), key=lambda t: (-t[0], t[1]))[:limit]
    return [(id, round(score, 6)) for score, id in ranked]


@settings(max_examples=60, deadline=None)
@given(
    nodes=nodes_st,
    start=st.sampled_from([*NODES[:4], "heron note"]),
    depth=st.integers(1, 3),
    limit=st.integers(1, 8),
)
def test_related_under_the_bound_is_the_per_anchor_walk_merged(
    nodes: list[tuple[str, str, list[tuple[str, float]]]], start: str, depth: int, limit: int
) -> None:
    async def main() -> None:
        with Memory(embedder=None) as mem:
            _build(mem, nodes)
            async with in_process(mem, partition="p") as c:
                got = await c.ok("related", {"id_or_query": start, "depth": depth, "limit": limit})
            assert got["complete"] is True
            want = _oracle(mem, got["anchors"], depth, limit)
            assert [(m["id"], m["activation"]) for m in got["items"]] == want

    anyio.run(main)


def test_related_from_a_hub_past_the_bound_says_it_stopped() -> None:
    async def main() -> None:
        with Memory(embedder=None) as mem:
            hub = mem.add("the heron hub", partition="p")
            spokes = [
                Item(
                    id=f"s{n:05d}",
                    kind="note",
                    content="a spoke",
                    links=[ThoughtLink(to_id=hub.id, relation="explains")],
                )
                for n in range(CONTEXT_REACH + 1)
            ]
            mem.add_many(spokes[:CONTEXT_REACH], partition="p")
            async with in_process(mem, partition="p") as c:
                whole = await c.ok("related", {"id": hub.id, "limit": 3})
                assert whole["complete"] is True
                assert [m["id"] for m in whole["items"]] == ["s00000", "s00001", "s00002"]
                mem.add(spokes[-1], partition="p")
                cut = await c.ok("related", {"id": hub.id, "limit": 3})
                assert cut["complete"] is False and cut["items"] == whole["items"]

    anyio.run(main)
