"""The item view reads the item's neighbourhood, not the store: the same answer, bounded work.

Before, every click on an item walked every item of the store to find its
links in, and the view of a past moment rebuilt the whole partition from the
journal. The differential tests compare the view with that brute-force walk
over random link graphs (private items, other tenants, retired items and
later edits included); the history tests check the cap of 100 versions and
the counts of the ones left out.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstore import Item, Memory
from memstore.item import ThoughtLink
from memstore.journal import Lsn
from memstore.store import Store
from memstore.ui.neighbourhood import past_neighbourhood
from memstore.ui.views import (
    MAX_HISTORY,
    MAX_LINKS_IN,
    MAX_RELATED,
    RELATED_DEPTH,
    RELATED_REACH,
    item_view,
    owned,
)

RELATIONS = ["triggers", "caused_by", "correlates_with", "precedes", "explains"]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path, embedder=None) as m:
        yield m


def _links_in(items: list[Item], id: str) -> list[tuple[str, str, float]]:
    return sorted(
        (it.id, link.relation, link.weight) for it in items for link in it.links if link.to_id == id
    )


def _related(store: Store, id: str, partition: str) -> list[tuple[str, float]]:
    if store.get(id) is None:
        return []
    _, scored = store.context(id, RELATED_DEPTH)
    return [(s.item.id, s.score) for s in scored if s.item.id != id and owned(s.item, partition)]


def _brute_now(mem: Memory, partition: str, id: str) -> tuple[Any, Any]:
    """The old view: every item of the store walked for the links in; the related items
    the walk of a store holding the partition's items alone (as of a moment, too)."""
    others = [it for it in mem.store.all_items() if owned(it, partition)]
    store = Store()
    store.restore(others)
    return _links_in(others, id), _related(store, id, partition)


def _brute_past(mem: Memory, partition: str, id: str, when: Lsn) -> tuple[Any, Any]:
    """The old view of a moment: the whole partition rebuilt from the journal."""
    others = [it for it in mem.as_of(when, partition=partition) if owned(it, partition)]
    store = Store()
    store.restore(others)
    return _links_in(others, id), _related(store, id, partition)


def _shown(view: dict[str, Any]) -> tuple[Any, Any]:
    links_in = sorted((x["id"], x["relation"], x["weight"]) for x in view["links_in"])
    return links_in, [(x["id"], x["score"]) for x in view["related"]]


def _graph(mem: Memory, rng: random.Random, n: int, start: int = 0) -> list[str]:
    """``n`` items in two tenants (some private, some retired), each linking to earlier ones."""
    ids: list[str] = []
    for i in range(start, start + n):
        id = f"n{i:03d}"
        earlier = [f"n{j:03d}" for j in range(i)]
        targets = rng.sample(earlier, min(len(earlier), rng.randint(0, 3)))
        links = [
            ThoughtLink(to_id=t, relation=rng.choice(RELATIONS), weight=rng.choice([0.5, 1.0]))
            for t in targets
        ]
        item = Item(id=id, kind="note", content=f"note {i}", links=links)
        partition = rng.choice(["acme", "acme", "acme", "beta"])
        private_to = "dana" if rng.random() < 0.1 else None
        mem.add(item, partition=partition, private_to=private_to)
        if rng.random() < 0.1:
            mem.expire(id)
        ids.append(id)
    return ids


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_links_in_and_related_equal_the_walk_of_the_whole_store(mem: Memory, seed: int) -> None:
    rng = random.Random(seed)
    ids = _graph(mem, rng, 60)
    mem.delete(rng.choice(ids))  # a link to a deleted item stays a link in of nothing
    checked = 0
    for id in ids:
        for partition in ("acme", "beta"):
            try:
                view = item_view(mem, partition, id)
            except LookupError:
                continue
            assert _shown(view) == _brute_now(mem, partition, id), (id, partition)
            checked += 1
    assert checked > 40


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_the_view_of_a_moment_equals_rebuilding_the_whole_partition(mem: Memory, seed: int) -> None:
    assert mem.journal is not None
    rng = random.Random(seed)
    ids = _graph(mem, rng, 50)
    then = mem.journal.head()
    # Later: new items linking to old ones, and old items edited (their links kept).
    _graph(mem, rng, 15, start=50)
    for id in rng.sample(ids, 10):
        now = mem.get(id)
        if now is not None and now.scope != "private":
            mem.update(id, content=f"{now.content}, edited")
    checked = 0
    for id in ids:
        try:
            view = item_view(mem, "acme", id, when=then)
        except LookupError:
            continue
        assert view["related_complete"] is True
        assert _shown(view) == _brute_past(mem, "acme", id, then), id
        checked += 1
    assert checked > 20


def test_a_neighbourhood_past_its_cap_says_it_is_incomplete(mem: Memory) -> None:
    assert mem.journal is not None
    mem.add(Item(id="hub", kind="note", content="the hub"), partition="acme")
    for i in range(30):
        link = ThoughtLink(to_id="hub", relation="explains")
        mem.add(
            Item(id=f"s{i:02d}", kind="note", content=f"spoke {i}", links=[link]), partition="acme"
        )
    whole = past_neighbourhood(mem, "acme", "hub", mem.journal.head())
    assert whole.complete and len(whole.items) == 31
    cut = past_neighbourhood(mem, "acme", "hub", mem.journal.head(), cap=10)
    assert not cut.complete and len(cut.items) == 10 and "hub" in cut.items


def test_the_history_lists_the_newest_100_and_counts_the_older(mem: Memory) -> None:
    assert mem.journal is not None
    a = mem.add(Item(id="a", kind="note", content="version 0"), partition="acme")
    moments = [mem.journal.head()]
    for i in range(1, MAX_HISTORY + 30):
        mem.update(a.id, content=f"version {i}")
        moments.append(mem.journal.head())
    view = item_view(mem, "acme", a.id)
    shown = [v["item"]["content"] for v in view["history"]]
    assert len(shown) == MAX_HISTORY
    assert shown[0] == "version 30" and shown[-1] == f"version {MAX_HISTORY + 29}"
    assert (view["history_older"], view["history_newer"]) == (30, 0)
    # The first one listed is still compared with the version before it, not shown.
    (change,) = [c for c in view["history"][0]["changes"] if c["field"] == "content"]
    assert (change["before"], change["after"]) == ("version 29", "version 30")
    # As of an early moment: the versions around it, the later ones counted.
    past = item_view(mem, "acme", a.id, when=moments[3])
    assert past["history"][0]["item"]["content"] == "version 0"
    assert (past["history_older"], past["history_newer"]) == (0, 30)
    (current,) = [v for v in past["history"] if v["current"]]
    assert current["item"]["content"] == "version 3"


def test_a_short_history_is_listed_whole(mem: Memory) -> None:
    a = mem.add(Item(id="a", kind="note", content="one"), partition="acme")
    mem.update(a.id, content="two")
    view = item_view(mem, "acme", a.id)
    assert len(view["history"]) == 2
    assert (view["history_older"], view["history_newer"]) == (0, 0)


def test_many_foreign_linkers_are_not_all_read(mem: Memory) -> None:
    # Items of another partition linking to the hub are candidates the view refuses; their
    # histories are read only up to the budget, and the answer says it stopped short.
    assert mem.journal is not None
    mem.add(Item(id="hub", kind="note", content="the hub"), partition="acme")
    link = ThoughtLink(to_id="hub", relation="explains")
    for i in range(45):
        mem.add(
            Item(id=f"f{i:02d}", kind="note", content=f"foreign {i}", links=[link]),
            partition="beta",
        )
    hood = past_neighbourhood(mem, "acme", "hub", mem.journal.head(), cap=10)
    assert not hood.complete and list(hood.items) == ["hub"]
    whole = past_neighbourhood(mem, "acme", "hub", mem.journal.head(), cap=20)
    assert whole.complete and list(whole.items) == ["hub"]  # 46 reads: within 20 * 4


def test_links_in_list_the_first_100_and_count_the_rest(mem: Memory) -> None:
    # A hub item many items link to: the view lists MAX_LINKS_IN links in (by linking
    # item's id) and counts the others, its own partition's only, now and at a moment.
    assert mem.journal is not None
    mem.add(Item(id="hub", kind="note", content="the hub"), partition="acme")
    for i in range(MAX_LINKS_IN + 20):
        links = [ThoughtLink(to_id="hub", relation="explains")]
        if i == 0:  # two links from one item: two entries
            links.append(ThoughtLink(to_id="hub", relation="precedes"))
        mem.add(
            Item(id=f"s{i:03d}", kind="note", content=f"spoke {i}", links=links), partition="acme"
        )
    for i in range(30):  # another tenant's linkers: neither listed nor counted
        link = ThoughtLink(to_id="hub", relation="explains")
        mem.add(
            Item(id=f"f{i:03d}", kind="note", content="foreign", links=[link]), partition="beta"
        )
    for view in (
        item_view(mem, "acme", "hub"),
        item_view(mem, "acme", "hub", when=mem.journal.head()),
    ):
        shown = [(x["id"], x["relation"], x["title"]) for x in view["links_in"]]
        assert len(shown) == MAX_LINKS_IN
        assert shown[:3] == [
            ("s000", "explains", "spoke 0"),
            ("s000", "precedes", "spoke 0"),
            ("s001", "explains", "spoke 1"),
        ]
        assert shown[-1][0] == f"s{MAX_LINKS_IN - 2:03d}"
        assert view["links_in_more"] == MAX_LINKS_IN + 21 - MAX_LINKS_IN
        # What the hub activates: its 120 spokes, the best scored 100 listed.
        scores = [x["score"] for x in view["related"]]
        assert len(scores) == MAX_RELATED and scores == sorted(scores, reverse=True)
        assert view["related_more"] == 20
        assert not any(x["id"].startswith("f") for x in view["related"])


def test_a_few_links_in_are_listed_whole(mem: Memory) -> None:
    mem.add(Item(id="hub", kind="note", content="the hub"), partition="acme")
    link = ThoughtLink(to_id="hub", relation="explains")
    mem.add(Item(id="s", kind="note", content="spoke", links=[link]), partition="acme")
    view = item_view(mem, "acme", "hub")
    assert [x["id"] for x in view["links_in"]] == ["s"] and view["links_in_more"] == 0
    assert [x["id"] for x in view["related"]] == ["s"] and view["related_more"] == 0


def test_related_walks_at_most_its_reach_and_says_when_it_stopped(mem: Memory) -> None:
    # A hub of RELATED_REACH spokes is walked whole; one more, and the walk stops there:
    # related lists the best of the items reached, counts the others, and says it is cut.
    # Another tenant's spokes are never walked (nor listed, nor counted toward the reach).
    mem.add(Item(id="hub", kind="note", content="the hub"), partition="acme")
    link = ThoughtLink(to_id="hub", relation="explains")
    spokes = [
        Item(id=f"s{i:04d}", kind="note", content=f"spoke {i}", links=[link])
        for i in range(RELATED_REACH)
    ]
    mem.add_many(spokes, partition="acme")
    foreign = [
        Item(id=f"f{i:02d}", kind="note", content=f"foreign {i}", links=[link]) for i in range(10)
    ]
    mem.add_many(foreign, partition="beta")  # by id before every spoke: read first
    whole = item_view(mem, "acme", "hub")
    assert whole["related_complete"] is True
    assert len(whole["related"]) == MAX_RELATED
    assert whole["related_more"] == RELATED_REACH - MAX_RELATED
    _, brute = _brute_now(mem, "acme", "hub")
    assert _shown(whole)[1] == brute[:MAX_RELATED]
    mem.add(Item(id="s9999", kind="note", content="one more", links=[link]), partition="acme")
    cut = item_view(mem, "acme", "hub")
    assert cut["related_complete"] is False
    assert len(cut["related"]) == MAX_RELATED
    assert cut["related_more"] == RELATED_REACH - MAX_RELATED  # RELATED_REACH reached
    assert not any(x["id"].startswith("f") for x in cut["related"])
    _, brute = _brute_now(mem, "acme", "hub")
    assert len(brute) == RELATED_REACH + 1  # the whole walk: one more than was reached
    assert {x["id"] for x in cut["related"]} <= {id for id, _ in brute}
