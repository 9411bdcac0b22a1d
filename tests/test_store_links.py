"""Links and the graph: add_link's rules and cap, pruning, spreading activation, anchors."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from conftest import T0, FakeClock, Recorder

from memstore import MAX_MODEL_LINKS, Config, InvalidItemError, Item, Store, ThoughtLink

HOUR = dt.timedelta(hours=1)


def _get(store: Store, id: str) -> Item:
    got = store.get(id)
    assert got is not None, id
    return got


def _node(store: Store, id: str, **kw: object) -> Item:
    return store.upsert(
        Item.model_validate({"id": id, "kind": "note", "title": f"node {id}", **kw})
    )


def _link(
    store: Store, src: str, dst: str, weight: float = 1.0, relation: str = "explains"
) -> None:
    assert store.add_link(src, ThoughtLink(to_id=dst, relation=relation, weight=weight))


def _scores(
    store: Store, anchors: list[str], depth: int = 3, decay: float = 0.5
) -> list[tuple[str, float]]:
    """``(id, activation)`` pairs, the activation rounded to compare exactly."""
    return [(s.item.id, round(s.score, 9)) for s in store.traverse_scored(anchors, depth, decay)]


def _links(store: Store, id: str) -> list[tuple[str, str, float]]:
    return [(lk.to_id, lk.relation, lk.weight) for lk in _get(store, id).links]


# ----------------------------------------------------------------- add_link


@pytest.mark.parametrize(
    ("from_id", "link", "named"),
    [
        ("outage", "cause", "link"),
        ("outage", {"to_id": "cause", "relation": "caused_by"}, "link"),
        ("outage", None, "link"),
        (None, ThoughtLink(to_id="cause", relation="caused_by"), "from_id"),
        (["outage"], ThoughtLink(to_id="cause", relation="caused_by"), "from_id"),
    ],
)
def test_add_link_refuses_arguments_of_the_wrong_type(
    store: Store, from_id: object, link: object, named: str
) -> None:
    store.upsert(Item(id="outage", kind="note", title="outage", content="db down"))
    with pytest.raises(InvalidItemError, match=f"^{named} must be"):
        store.add_link(from_id, link)  # type: ignore[arg-type]
    assert store.get("outage").links == []  # type: ignore[union-attr]


def test_add_link_stores_the_link_and_indexes_it_both_ways(store: Store) -> None:
    _node(store, "outage")
    _node(store, "cause")

    assert store.add_link("outage", ThoughtLink(to_id="cause", relation="caused_by", weight=0.7))

    assert _links(store, "outage") == [("cause", "caused_by", 0.7)]
    assert [s.item.id for s in store.traverse_scored(["outage"])] == ["cause"]
    assert [s.item.id for s in store.traverse_scored(["cause"])] == ["outage"]
    store._check()


@pytest.mark.parametrize(
    ("src", "link"),
    [
        pytest.param("a", ThoughtLink(to_id="a", relation="explains"), id="self link"),
        pytest.param("a", ThoughtLink(to_id="b", relation="likes"), id="bad relation"),
        pytest.param("a", ThoughtLink(to_id="", relation="explains"), id="empty target"),
        pytest.param("missing", ThoughtLink(to_id="b", relation="explains"), id="missing cell"),
    ],
)
def test_add_link_refusals_write_nothing(
    store: Store, recorder: Recorder, src: str, link: ThoughtLink
) -> None:
    _node(store, "a")
    _node(store, "b")
    recorder.clear()

    assert store.add_link(src, link) is False

    assert _get(store, "a").links == []
    assert recorder.quiet
    store._check()


def test_add_link_to_a_cell_this_store_does_not_hold_is_accepted(store: Store) -> None:
    _node(store, "a")
    assert store.add_link("a", ThoughtLink(to_id="kept-elsewhere", relation="explains"))
    assert _links(store, "a") == [("kept-elsewhere", "explains", 1.0)]
    store._check()


def test_add_link_keeps_the_item_otherwise_unchanged(store: Store, clock: FakeClock) -> None:
    _node(store, "a", content="ledger latency")
    _node(store, "b")
    clock.advance(HOUR)
    _link(store, "a", "b")
    got = _get(store, "a")
    assert got.content == "ledger latency"
    assert [it.id for it in store.keyword_search("ledger latency")] == ["a"]


def _fill_to_cap(store: Store) -> None:
    _node(store, "hub")
    for i in range(MAX_MODEL_LINKS):
        _node(store, f"t{i:02d}")
        _link(store, "hub", f"t{i:02d}", weight=(i + 1) / 20)


def test_a_stronger_link_at_the_cap_evicts_the_weakest(store: Store) -> None:
    _fill_to_cap(store)
    _node(store, "new")

    assert store.add_link("hub", ThoughtLink(to_id="new", relation="explains", weight=0.7))

    links = _links(store, "hub")
    assert len(links) == MAX_MODEL_LINKS
    assert ("t00", "explains", 0.05) not in links
    assert ("new", "explains", 0.7) in links
    assert "hub" not in [s.item.id for s in store.traverse_scored(["t00"])]
    store._check()


@pytest.mark.parametrize("weight", [0.05, 0.01])
def test_a_link_no_stronger_than_the_weakest_is_refused_at_the_cap(
    store: Store, recorder: Recorder, weight: float
) -> None:
    _fill_to_cap(store)
    _node(store, "new")
    before = _links(store, "hub")
    recorder.clear()

    assert store.add_link("hub", ThoughtLink(to_id="new", relation="explains", weight=weight)) is (
        False
    )

    assert _links(store, "hub") == before
    assert recorder.quiet


def test_replacing_the_same_target_and_relation_is_exempt_from_the_cap(store: Store) -> None:
    _fill_to_cap(store)

    assert store.add_link("hub", ThoughtLink(to_id="t05", relation="explains", weight=0.01))

    links = _links(store, "hub")
    assert len(links) == MAX_MODEL_LINKS
    assert ("t05", "explains", 0.01) in links
    assert [lk for lk in links if lk[0] == "t05"] == [("t05", "explains", 0.01)]
    # Another relation to the same target is a new link, so the cap applies.
    assert store.add_link("hub", ThoughtLink(to_id="t05", relation="precedes", weight=0.01)) is (
        False
    )
    store._check()


def test_replacing_a_link_below_the_cap_does_not_duplicate_it(store: Store) -> None:
    _node(store, "a")
    _node(store, "b")
    _link(store, "a", "b", 0.3)
    _link(store, "a", "b", 0.9)
    _link(store, "a", "b", 0.4, relation="precedes")
    assert _links(store, "a") == [("b", "explains", 0.9), ("b", "precedes", 0.4)]


# --------------------------------------------------------- prune_invalid_links


def test_prune_invalid_links_drops_empty_and_self_links(store: Store, recorder: Recorder) -> None:
    store.put(
        Item(
            id="a",
            kind="note",
            title="a",
            links=[
                ThoughtLink(to_id="", relation="explains"),
                ThoughtLink(to_id="a", relation="explains"),
                ThoughtLink(to_id="b", relation="explains"),
                ThoughtLink(to_id="kept-elsewhere", relation="precedes"),
            ],
        )
    )
    _node(store, "b", links=[ThoughtLink(to_id="a", relation="explains")])
    recorder.clear()

    assert store.prune_invalid_links() == 2

    assert _links(store, "a") == [("b", "explains", 1.0), ("kept-elsewhere", "precedes", 1.0)]
    assert _links(store, "b") == [("a", "explains", 1.0)]
    assert recorder.hook == []  # link-only edits are not published
    assert recorder.listener_ops() == [("upsert", "a")]
    assert recorder.dirty == 1
    store._check()

    recorder.clear()
    assert store.prune_invalid_links() == 0
    assert recorder.quiet


# ---------------------------------------------------------------- traversal


def test_each_hop_multiplies_decay_and_link_weight(store: Store) -> None:
    for id in "abc":
        _node(store, id)
    _link(store, "a", "b", 0.5)
    _link(store, "b", "c", 0.8)

    assert _scores(store, ["a"], decay=0.5) == [("b", 0.25), ("c", 0.1)]


def test_an_item_keeps_its_best_path(store: Store) -> None:
    for id in "abc":
        _node(store, id)
    _link(store, "a", "c", 0.1)  # direct but weak: 0.05
    _link(store, "a", "b", 1.0)
    _link(store, "b", "c", 0.8)  # two hops but strong: 0.2

    assert dict(_scores(store, ["a"], decay=0.5))["c"] == pytest.approx(0.2)


def test_links_are_followed_in_both_directions(store: Store) -> None:
    for id in "abc":
        _node(store, id)
    _link(store, "b", "a", 0.5)  # b -> a: found from a
    _link(store, "c", "b", 1.0)

    assert _scores(store, ["a"], decay=0.5) == [("b", 0.25), ("c", 0.125)]


def _chain(store: Store, n: int) -> list[str]:
    ids = [f"n{i}" for i in range(n)]
    for id in ids:
        _node(store, id)
    for src, dst in itertools.pairwise(ids):
        _link(store, src, dst)
    return ids


def test_depth_limits_the_hops(store: Store) -> None:
    _chain(store, 5)
    assert [id for id, _ in _scores(store, ["n0"], depth=1)] == ["n1"]
    assert [id for id, _ in _scores(store, ["n0"], depth=2)] == ["n1", "n2"]
    assert [id for id, _ in _scores(store, ["n0"], depth=3)] == ["n1", "n2", "n3"]


@pytest.mark.parametrize("depth", [0, -1, 9, 100])
def test_depth_outside_one_to_eight_means_eight(store: Store, depth: int) -> None:
    ids = _chain(store, 11)
    reached = [id for id, _ in _scores(store, ["n0"], depth=depth, decay=0.9)]
    assert reached == ids[1:9]


def test_scores_only_count_paths_within_the_depth_limit(store: Store) -> None:
    # a -> c -> d -> e is three hops; within two hops e is only reached as
    # a -> d -> e, over the weak a -> d link.
    for id in "acde":
        _node(store, id)
    _link(store, "a", "c", 1.0)
    _link(store, "a", "d", 0.1)
    _link(store, "c", "d", 1.0)
    _link(store, "d", "e", 1.0)

    scores = dict(_scores(store, ["a"], depth=2, decay=0.5))

    assert scores["d"] == pytest.approx(0.25)  # a -> c -> d, two hops
    assert scores["e"] == pytest.approx(0.025)  # a -> d -> e; not 0.125 over three hops
    assert dict(_scores(store, ["a"], depth=3, decay=0.5))["e"] == pytest.approx(0.125)


def test_anchors_are_excluded_from_the_result(store: Store) -> None:
    for id in "abc":
        _node(store, id)
    _link(store, "a", "b")
    _link(store, "b", "c")

    assert [id for id, _ in _scores(store, ["a", "b"])] == ["c"]
    assert [id for id, _ in _scores(store, ["a", "a"])] == ["b", "c"]


def test_ties_order_by_id(store: Store) -> None:
    for id in ("hub", "zeta", "mid", "beta"):
        _node(store, id)
    for id in ("zeta", "mid", "beta"):
        _link(store, "hub", id, 0.5)

    assert [s.item.id for s in store.traverse_scored(["hub"])] == ["beta", "mid", "zeta"]
    assert [it.id for it in store.traverse(["hub"])] == ["beta", "mid", "zeta"]


def test_private_items_are_neither_returned_nor_traversed_through(store: Store) -> None:
    _node(store, "a")
    _node(store, "p", scope="private", tags=["user:u1"])
    _node(store, "c")
    _link(store, "a", "p")
    _link(store, "p", "c")
    _node(
        store,
        "q",
        scope="private",
        tags=["user:u1"],
        links=[ThoughtLink(to_id="a", relation="explains")],
    )

    assert store.traverse_scored(["a"]) == []
    assert store.traverse_scored(["p"]) == []  # a private anchor does not spread either
    assert store.traverse(["c"]) == []


def test_inactive_items_are_neither_returned_nor_traversed_through(
    store: Store, clock: FakeClock
) -> None:
    for id in ("a", "stale", "b", "c"):
        _node(store, id)
    _node(store, "lapsing", stale_after=T0 + HOUR)
    _link(store, "a", "stale")
    _link(store, "stale", "b")
    _link(store, "a", "lapsing")
    _link(store, "lapsing", "c")
    store.expire("stale")
    assert [id for id, _ in _scores(store, ["a"])] == ["lapsing", "c"]

    clock.advance(2 * HOUR)

    assert _scores(store, ["a"]) == []
    assert _scores(store, ["b"]) == []


def test_traverse_rejects_a_decay_outside_zero_to_one(store: Store) -> None:
    _node(store, "a")
    for decay in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="decay"):
            store.traverse_scored(["a"], 3, decay)


def test_unknown_anchors_activate_nothing(store: Store) -> None:
    _node(store, "a")
    assert store.traverse_scored(["missing"]) == []
    assert store.traverse_scored([]) == []


# ---------------------------------------------------------- resolve_anchors


def test_resolve_anchors_prefers_an_exact_id(store: Store) -> None:
    _node(store, "Ledger-DB")
    _node(store, "x", subject="ledger-db")
    _node(store, "y", title="ledger-db pool")

    assert store.resolve_anchors("ledger-db") == ["Ledger-DB"]
    assert store.resolve_anchors("  LEDGER-DB ") == ["Ledger-DB"]


def test_resolve_anchors_then_an_exact_subject(store: Store) -> None:
    _node(store, "s2", subject="Ledger")
    _node(store, "s1", subject="ledger")
    _node(store, "t", title="ledger pool")
    _node(store, "u", subject="ledger-db")

    assert store.resolve_anchors("ledger") == ["s1", "s2"]


def test_resolve_anchors_then_a_subject_or_title_containing_it(store: Store) -> None:
    _node(store, "by-title", title="Ledger pool exhausted")
    _node(store, "by-subject", subject="ledger-pool-db")
    _node(store, "other", title="payment backlog")

    assert store.resolve_anchors("pool") == ["by-subject", "by-title"]
    assert store.resolve_anchors("nothing like it") == []
    assert store.resolve_anchors("   ") == []


def test_resolve_anchors_skips_private_and_inactive_items(store: Store, clock: FakeClock) -> None:
    _node(store, "mine", subject="ledger", scope="private", tags=["user:u1"])
    _node(store, "gone", subject="ledger")
    _node(store, "lapsing", subject="ledger", stale_after=T0 + HOUR)
    _node(store, "live", title="ledger notes")
    store.expire("gone")

    assert store.resolve_anchors("mine") == []
    assert store.resolve_anchors("ledger") == ["lapsing"]
    clock.advance(2 * HOUR)
    assert store.resolve_anchors("ledger") == ["live"]


# ------------------------------------------------------------------ context


def test_context_returns_the_anchors_and_what_they_activate(store: Store) -> None:
    _node(store, "outage", subject="payments")
    _node(store, "cause", title="ledger pool")
    _node(store, "fix", title="raise pool size")
    _link(store, "outage", "cause", 0.5)
    _link(store, "cause", "fix", 1.0)

    anchors, activated = store.context("payments")

    assert [it.id for it in anchors] == ["outage"]
    assert [(s.item.id, round(s.score, 9)) for s in activated] == [("cause", 0.3), ("fix", 0.18)]


@pytest.mark.parametrize(("depth", "reached"), [(None, 3), (0, 3), (2, 2), (20, 8)])
def test_context_depth_defaults_to_three_and_caps_at_eight(
    store: Store, depth: int | None, reached: int
) -> None:
    ids = _chain(store, 11)
    store.upsert(Item(id="n0", kind="note", title="node n0", subject="start"))

    _, activated = store.context("start") if depth is None else store.context("start", depth)

    assert [s.item.id for s in activated] == ids[1 : reached + 1]


def test_context_of_an_unknown_anchor_is_empty(store: Store) -> None:
    _node(store, "a")
    assert store.context("nothing") == ([], [])


def test_neighbours_are_one_hop_both_ways_along_the_named_relations(clock: FakeClock) -> None:
    read: list[str] = []
    store = Store(Config(clock=clock, read=lambda items: read.extend(i.id for i in items)))
    for id in ("a", "b", "c", "d", "e"):
        _node(store, id)
    _node(store, "mine", scope="private", tags=["user:u1"])
    _node(store, "old", stale_after=clock.now + HOUR)
    _link(store, "a", "b", 0.5, relation="precedes")
    _link(store, "c", "a", relation="precedes")
    _link(store, "a", "d", relation="explains")
    _link(store, "a", "mine", relation="precedes")
    _link(store, "a", "old", relation="precedes")
    clock.advance(2 * HOUR)  # "old" is past its deadline
    read.clear()
    got = store.neighbours(["a", "b", "e", "mine", "zzz"], ["precedes"])
    assert sorted(got) == ["a", "b"]
    assert sorted(got["a"]) == [("b", 0.5), ("c", 1.0)]
    assert got["b"] == [("a", 0.5)]
    assert sorted(store.neighbours(["a"], ["precedes", "explains"])["a"]) == [
        ("b", 0.5),
        ("c", 1.0),
        ("d", 1.0),
    ]
    assert store.neighbours(["a"], []) == {}
    assert read == [], "the graph is read, not the items"


def test_linking_to_answers_from_the_reverse_index_as_writes_change_it() -> None:
    store = Store()
    for id in ("hub", "a", "b", "secret", "old"):
        _node(store, id, **({"scope": "private", "tags": ["user:dana"]} if id == "secret" else {}))
    for src in ("b", "a", "secret", "old"):
        _link(store, src, "hub")
    store.expire("old")
    assert [it.id for it in store.linking_to("hub")] == ["a", "b"]  # by id; no private, no stale
    assert store.linker_ids("hub") == ["a", "b", "old", "secret"]  # ids of every holder
    store.upsert(_get(store, "a").model_copy(update={"links": [], "links_set": True}))  # unlinks
    store.delete("b")
    assert [it.id for it in store.linking_to("hub")] == []
    assert store.linker_ids("hub") == ["old", "secret"]
    store.delete("hub")  # a link to a deleted item is still a link in of it
    assert store.linker_ids("hub") == ["old", "secret"]
    with pytest.raises(InvalidItemError):
        store.linking_to(5)  # type: ignore[arg-type]


def test_links_in_copies_only_the_items_it_returns_and_counts_every_link() -> None:
    # A hub item a thousand others link to: links_in hands back (and copies, through
    # the read seam) the first `limit` by id, and counts the links of all of them.
    seen: list[str] = []
    store = Store(Config(read=lambda items: seen.extend(it.id for it in items)))
    _node(store, "hub")
    for n in range(1000):
        links = [ThoughtLink(to_id="hub", relation="explains")]
        if n == 0:
            links.append(ThoughtLink(to_id="hub", relation="precedes"))
        tags = ["tenant/beta"] if n % 10 == 9 else ["tenant/acme"]
        _node(store, f"s{n:04d}", links=links, tags=tags)
    _node(store, "retired", links=[ThoughtLink(to_id="hub", relation="explains")], status="stale")
    seen.clear()
    kept, links = store.links_in("hub", limit=5, skip=lambda it: "tenant/beta" in it.tags)
    assert [it.id for it in kept] == ["s0000", "s0001", "s0002", "s0003", "s0004"]
    assert links == 900 + 1  # acme's 900 spokes, one holding two links; not the stale one
    assert sorted(seen) == [it.id for it in kept]  # only those five were copied
    every, total = store.links_in("hub")
    assert [it.id for it in every] == [it.id for it in store.linking_to("hub")]
    assert total == 1001
    with pytest.raises(InvalidItemError):
        store.links_in("hub", limit=-1)
