"""The inspector's views (:mod:`memstore.ui.views`) on a real :class:`~memstore.Memory`, no HTTP.

An item can change tenant: a trusted writer re-adds an existing id in another
partition, or makes it private. These tests pin down what each tenant sees
then: the item only while its current state (or, deleted, its last one) is
the tenant's, and of its history only the versions that were.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstore import Item, Memory
from memstore.ui.views import NotFound, forget, item_view, search

KEY = secrets.token_bytes(32)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path, embedder=None) as m:
        yield m


def contents(view: dict[str, object]) -> list[str]:
    history = view["history"]
    assert isinstance(history, list)
    return [v["item"]["content"] for v in history if v["item"] is not None]


def test_an_item_moved_to_another_tenant_is_no_longer_shown(mem: Memory) -> None:
    a = mem.add(Item(kind="note", title="draft", content="acme draft"), partition="acme")
    mem.add(Item(id=a.id, kind="note", content="beta payroll 1.2M"), partition="beta")
    with pytest.raises(NotFound):
        item_view(mem, "acme", a.id)
    with pytest.raises(NotFound):
        forget(mem, "acme", a.id, hard=False, key=KEY)
    with pytest.raises(NotFound):
        forget(mem, "acme", a.id, hard=True, key=KEY)
    assert mem.get(a.id) is not None and len(mem.history(a.id)) == 2
    # The new owner sees the item, and only its own version of the history.
    assert contents(item_view(mem, "beta", a.id)) == ["beta payroll 1.2M"]


def test_an_item_made_private_is_no_longer_shown(mem: Memory) -> None:
    a = mem.add(Item(kind="note", content="shared with the team"), partition="acme")
    secret = Item(id=a.id, kind="note", content="dana's salary")
    mem.add(secret, partition="acme", private_to="dana")
    with pytest.raises(NotFound):
        item_view(mem, "acme", a.id)
    preview = None
    with pytest.raises(NotFound):
        preview = forget(mem, "acme", a.id, hard=True, key=KEY)
    assert preview is None and len(mem.history(a.id)) == 2


def test_an_item_moved_in_shows_only_its_own_history(mem: Memory) -> None:
    a = mem.add(Item(kind="note", content="beta's acquisition target"), partition="beta")
    mem.add(Item(id=a.id, kind="note", content="acme note one"), partition="acme")
    mem.add(Item(id=a.id, kind="note", content="acme note two"), partition="acme")
    view = item_view(mem, "acme", a.id)
    assert view["item"]["content"] == "acme note two"
    assert contents(view) == ["acme note one", "acme note two"]
    first, second = view["history"]
    assert first["changes"] == []  # nothing to compare with: the version before is not acme's
    assert {c["field"] for c in second["changes"]} >= {"content"}
    assert "beta" not in repr(view)
    with pytest.raises(NotFound):
        item_view(mem, "beta", a.id)
    # acme may forget it now: it is acme's.
    assert forget(mem, "acme", a.id, hard=False, key=KEY)["removed"] is True


def test_a_deleted_item_belongs_to_its_last_tenant(mem: Memory) -> None:
    a = mem.add(Item(kind="note", content="acme draft"), partition="acme")
    mem.add(Item(id=a.id, kind="note", content="beta plan"), partition="beta")
    mem.delete(a.id)
    with pytest.raises(NotFound):
        item_view(mem, "acme", a.id)
    with pytest.raises(NotFound):
        forget(mem, "acme", a.id, hard=True, key=KEY)
    view = item_view(mem, "beta", a.id)
    assert view["deleted"] is True
    assert [v["op"] for v in view["history"]] == ["upsert", "delete"]
    assert contents(view) == ["beta plan"]


def test_the_past_shows_the_item_only_if_it_was_the_tenants_then(mem: Memory) -> None:
    assert mem.journal is not None
    a = mem.add(Item(kind="note", content="acme then"), partition="acme")
    then = mem.journal.head()
    mem.add(Item(id=a.id, kind="note", content="beta now"), partition="beta")
    past = item_view(mem, "acme", a.id, when=then)
    assert past["item"]["content"] == "acme then" and contents(past) == ["acme then"]
    with pytest.raises(NotFound):
        item_view(mem, "beta", a.id, when=then)
    assert contents(item_view(mem, "beta", a.id, when=mem.journal.head())) == ["beta now"]


def test_untagged_matches_do_not_crowd_out_the_tenants_own(tmp_path: Path) -> None:
    # Memory.search(partition=...) also finds untagged and shared items; the view must
    # search the tenant's items alone, not filter a page of results that others filled.
    with Memory(tmp_path, embedder="hash") as mem:
        for i in range(30):
            mem.add(Item(kind="note", title=f"pool note {i}", content="ledger pool exhausted"))
            mem.add(
                Item(kind="note", content=f"ledger pool shared {i}", tags=["shared"]),
                partition="beta",
            )
        ours = Item(kind="note", content="our ledger pool is sized at 20")
        mine = mem.add(ours, partition="acme")
        hits = search(mem, "acme", "ledger pool", limit=5)["hits"]
        assert [h["item"]["id"] for h in hits] == [mine.id]
        assert hits[0]["explanation"] is not None


def test_a_blank_query_lists_the_tenants_newest_past_newer_untagged_items(mem: Memory) -> None:
    mine = mem.add(Item(kind="note", content="acme's oldest note"), partition="acme")
    for i in range(100):
        mem.add(Item(kind="note", content=f"untagged note {i}"))
    hits = search(mem, "acme", "", limit=1)["hits"]
    assert [h["item"]["id"] for h in hits] == [mine.id]


def test_a_blank_query_lists_stale_and_superseded_items_with_their_status(mem: Memory) -> None:
    # A search ranks active items only; the inspector's list is where one finds the rest.
    old = mem.add(Item(kind="fact", content="the pool holds 20"), partition="acme")
    new = mem.supersede(old.id, "the pool holds 40")
    stale = mem.add(Item(kind="fact", content="the vpn is up"), partition="acme")
    mem.expire(stale.id)
    mem.add(Item(kind="fact", content="beta's fact"), partition="beta")
    listed = {h["item"]["id"]: h["item"]["status"] for h in search(mem, "acme", "")["hits"]}
    assert listed == {old.id: "superseded", new.id: "active", stale.id: "stale"}
    assert [h["item"]["id"] for h in search(mem, "acme", "pool")["hits"]] == [new.id]
    facts = search(mem, "acme", "", kind="fact", limit=2)
    assert len(facts["hits"]) == 2 and facts["more"] is True


@pytest.mark.parametrize("query", ["", "pager note"])
def test_show_more_ends_after_500_hits_each_shown_once(query: str) -> None:
    # Before: past 400 hits the page's "Show more" (20 a page) asked for offset 400,
    # which was held to 399: hit 399 came again, then the same page for ever, "more"
    # always true. The inspector promises up to 500 in all.
    with Memory(embedder=None) as mem:
        mem.add_many([f"pager note {i}" for i in range(520)], partition="a")
        seen: list[str] = []
        offset, more = 0, True
        while more:
            page = search(mem, "a", query, offset=offset)
            assert page["offset"] == offset
            seen += [h["item"]["id"] for h in page["hits"]]  # type: ignore[index]
            offset, more = offset + len(page["hits"]), bool(page["more"])  # type: ignore[arg-type]
            assert len(seen) <= 500
        assert len(seen) == len(set(seen)) == 500


def test_related_items_come_from_the_tenants_own_links_only(mem: Memory) -> None:
    """Another tenant's item linking two of acme's was a path between them in the walk:
    acme's Related panel listed a2 under a1 (scored through beta's item), revealing
    that beta links them. The walk now passes through acme's items alone."""
    from memstore.item import ThoughtLink

    a1 = mem.add(Item(kind="note", content="acme one"), partition="acme")
    a2 = mem.add(Item(kind="note", content="acme two"), partition="acme")
    bridge = [
        ThoughtLink(to_id=a1.id, relation="explains"),
        ThoughtLink(to_id=a2.id, relation="explains"),
    ]
    mem.add(Item(kind="note", content="beta bridge", links=bridge), partition="beta")
    view = item_view(mem, "acme", a1.id)
    assert view["related"] == [] and view["related_complete"] is True
    # acme's own link still relates them
    mem.add(Item(id=a2.id, kind="note", content="acme two", links=[bridge[0]]), partition="acme")
    related = item_view(mem, "acme", a1.id)["related"]
    assert [r["id"] for r in related] == [a2.id]  # type: ignore[attr-defined]
