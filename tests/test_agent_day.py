"""An agent's day, end to end, through the front door with the real local model.

Morning observations, a hypothesis built on them and a plan built on that; the
hypothesis refuted (the plan goes with it); links and context; private notes
for two users; restatements merging; a watch item expiring on an injected
clock; a restart from disk with identical search results; ``as_of`` before a
delete.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from memstore import Config, Memory
from tests.conftest import FakeClock

QUERIES = [
    "why is checkout slow?",
    "what do we know about the cache?",
    "deploy schedule",
    "who is on call this week?",
]


def test_an_agents_day(tmp_path: Path) -> None:
    clock = FakeClock()
    folder = tmp_path / "memory"
    mem = Memory(folder, embedder="local", config=Config(clock=clock))

    # 09:00 observations
    slow = mem.add(
        "checkout p95 latency rose from 300 ms to 2.1 s after 08:40",
        kind="event",
        event_date="2025-01-06",
        origin="observed",
        partition="shop",
    )
    evict = mem.add(
        "the product cache evicted 40% of its keys at 08:41",
        kind="event",
        event_date="2025-01-06",
        origin="observed",
        partition="shop",
    )
    mem.link(slow.id, evict.id, "caused_by", 0.8)

    # 10:00 a hypothesis, and a plan resting on it
    clock.advance(dt.timedelta(hours=1))
    guess = mem.add(
        "the cache node ran out of memory",
        kind="hypothesis",
        confidence="medium",
        evidence_refs=[evict.id],
        partition="shop",
    )
    plan = mem.add(
        "double the cache node's memory before the sale",
        kind="operational_pattern",
        confidence="medium",
        evidence_refs=[guess.id],
        partition="shop",
    )
    anchors, related = mem.context(slow.id)
    assert [a.id for a in anchors] == [slow.id]
    assert evict.id in [r.item.id for r in related]

    # 11:00 the metrics refute it: the plan built on it expires too
    clock.advance(dt.timedelta(hours=1))
    assert mem.refute(guess.id, "memory stayed under 40% all morning") == [plan.id]
    assert mem.get(plan.id).status == "stale"
    top = [h.item.id for h in mem.search("cache memory", partition="shop")]
    assert guess.id not in top and plan.id not in top

    # restatements land on one fact
    fact = mem.add(
        "The product cache is flushed by the nightly catalogue import at 02:00 UTC.",
        kind="stable_fact",
        confidence="high",
        partition="shop",
    )
    again = mem.add(
        "The product cache is flushed by the nightly catalogue import at 02:00 UTC!",
        kind="stable_fact",
        confidence="high",
        partition="shop",
    )
    assert again.id == fact.id

    # private notes for two users
    mem.add("I am on call this week; escalate to me first.", private_to="dana", partition="shop")
    mem.add("I am on holiday until Friday.", private_to="eli", partition="shop")
    dana = [
        h.item.content
        for h in mem.search("who is on call this week?", partition="shop", user="dana")
    ]
    eli = [
        h.item.content
        for h in mem.search("who is on call this week?", partition="shop", user="eli")
    ]
    assert dana[0] == "I am on call this week; escalate to me first."
    assert "I am on call this week; escalate to me first." not in eli
    public = [h.item.content for h in mem.search("on call", partition="shop")]
    assert not any(c.startswith("I am") for c in public)

    # a watch item with a deadline expires on the injected clock
    watch = mem.add(
        "watch checkout latency until the evening",
        kind="watch_item",
        confidence="medium",
        stale_after=clock() + dt.timedelta(hours=6),
        partition="shop",
    )
    mem.add(
        "deploys are frozen on Friday afternoons",
        kind="stable_fact",
        confidence="high",
        partition="shop",
    )
    clock.advance(dt.timedelta(hours=7))
    assert watch.id not in [
        h.item.id for h in mem.search("watch checkout latency", partition="shop")
    ]

    # a delete, remembered by the journal
    before_delete = mem.stats().head
    mem.delete(evict.id)
    assert evict.id not in [it.id for it in mem.as_of(mem.stats().head, partition="shop")]
    assert evict.id in [it.id for it in mem.as_of(before_delete, partition="shop")]

    results = {
        q: [(h.item.id, round(h.score, 9)) for h in mem.search(q, partition="shop")]
        for q in QUERIES
    }
    mem.close()

    # the next morning: a restart from disk answers exactly the same
    mem = Memory(folder, embedder="local", config=Config(clock=clock))
    again_results = {
        q: [(h.item.id, round(h.score, 9)) for h in mem.search(q, partition="shop")]
        for q in QUERIES
    }
    assert again_results == results
    # every item has its vector back without embedding, but the two refuted ones
    assert mem.stats().vectors == mem.stats().items - 2
    assert mem.get(plan.id).status == "stale"
    assert [v.op for v in mem.history(evict.id)] == ["upsert", "delete"]
    mem.close()
