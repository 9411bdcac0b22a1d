"""Partition isolation of hybrid search, as a property over random multi-tenant stores.

Items are tagged ``tenant/a``, ``tenant/b`` or nothing; some carry ``shared``,
some are private to an owner. For every partition a caller may name, whatever
the query, neither search mode ever returns an item of another partition
(unless it is shared) nor a private item; a full search with room for every
item returns exactly what the partition may see. The same holds with a host's
own ``visible`` / ``doc_visible`` predicates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conftest import FakeClock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Store
from memstore.search import SearchConfig, Searcher, default_visible
from memstore.tags import PARTITION_ALL, SHARED_TAG, partition_from_tags
from memstore_index.cellstore import CellStore
from memstore_index.entry import IndexEntry
from memstore_index.hash_embedder import HashEmbedder

WORDS = (
    "ledger",
    "pool",
    "deploy",
    "canary",
    "tax",
    "filing",
    "token",
    "refresh",
    "garden",
    "quota",
)
PARTITIONS = ("a", "b", "", PARTITION_ALL)
SECRET = "secret"
"""A tag the host predicates hide from every partition."""


@dataclass(frozen=True)
class Spec:
    tenant: str
    shared: bool
    private: bool
    secret: bool
    text: tuple[str, ...]


specs = st.builds(
    Spec,
    tenant=st.sampled_from(("a", "b", "")),
    shared=st.booleans(),
    private=st.booleans(),
    secret=st.booleans(),
    text=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(tuple),
)
corpora = st.lists(specs, min_size=1, max_size=10)
queries = st.lists(st.sampled_from((*WORDS, "quokka")), min_size=1, max_size=3).map(" ".join)


def make_item(i: int, spec: Spec) -> Item:
    tags = []
    if spec.tenant:
        tags.append(f"tenant/{spec.tenant}")
    if spec.shared:
        tags.append(SHARED_TAG)
    if spec.private:
        tags.append("user:owner1")
    if spec.secret:
        tags.append(SECRET)
    words = list(spec.text)
    return Item(
        id=f"i{i:02d}",
        kind="note",
        title=" ".join(words[:2]),
        content=" ".join(words),
        scope="private" if spec.private else "public",
        tags=tags,
    )


def rule(item: Item, partition: str) -> bool:
    """The partition rule, written out independently of the engine."""
    if item.scope == "private":
        return False
    if partition == PARTITION_ALL:
        return True
    own = partition_from_tags(item.tags)
    return own == "" or own == partition or SHARED_TAG in item.tags


def host_visible(item: Item, partition: str) -> bool:
    return default_visible(item, partition) and SECRET not in item.tags


def host_doc_visible(entry: IndexEntry, partition: str) -> bool:
    if entry.private or SECRET in entry.tags:
        return False
    if partition == PARTITION_ALL:
        return True
    return entry.partition in ("", partition) or entry.shared


@dataclass(frozen=True)
class Host:
    name: str
    config: dict[str, Any]
    allowed: Callable[[Item, str], bool]
    exact: bool
    """Whether a full search with room for everything returns exactly ``allowed``."""


HOSTS = (
    Host("default", {}, rule, True),
    Host(
        "visible+doc_visible",
        {"visible": host_visible, "doc_visible": host_doc_visible},
        lambda it, p: rule(it, p) and SECRET not in it.tags,
        True,
    ),
    Host(
        "visible only",
        {"visible": host_visible},
        lambda it, p: rule(it, p) and SECRET not in it.tags,
        True,
    ),
    Host("doc_visible only", {"doc_visible": host_doc_visible}, rule, False),
)


def build(corpus: list[Spec]) -> tuple[Store, CellStore, list[Item]]:
    store = Store(Config(clock=FakeClock()))
    cells = CellStore(HashEmbedder(dim=32))
    cells.attach(store)
    items = [store.upsert(make_item(i, s)) for i, s in enumerate(corpus)]
    return store, cells, items


def check(store: Store, cells: CellStore, items: list[Item], query: str) -> None:
    n = len(items)
    by_id = {it.id: it for it in items}
    for host in HOSTS:
        searcher = Searcher(SearchConfig(store=store, cells=lambda: cells, **host.config))
        for partition in PARTITIONS:
            allowed = {it.id for it in items if host.allowed(it, partition)}
            runs = {
                "search/3": searcher.hybrid_search(query, partition=partition, limit=3),
                "search/all": searcher.hybrid_search(query, partition=partition, limit=n + 1),
                "full/3": searcher.hybrid_search_full(query, partition=partition, limit=3),
                "full/all": searcher.hybrid_search_full(query, partition=partition, limit=n + 1),
            }
            for mode, results in runs.items():
                got = [r.item.id for r in results]
                where = (host.name, repr(partition), mode, query)
                assert len(got) == len(set(got)), where
                leaked = [by_id[i].tags for i in got if i not in allowed]
                assert not leaked, (where, leaked)
                assert all(by_id[i].scope != "private" for i in got), where
                if mode == "full/all" and host.exact:
                    assert set(got) == allowed, (where, sorted(allowed - set(got)))


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(corpus=corpora, query=queries)
def test_no_search_crosses_a_partition(corpus: list[Spec], query: str) -> None:
    store, cells, items = build(corpus)
    check(store, cells, items, query)


def test_a_fixed_multi_tenant_store() -> None:
    corpus = [
        Spec("a", False, False, False, ("ledger", "pool")),
        Spec("b", False, False, False, ("ledger", "pool")),
        Spec("b", True, False, False, ("ledger", "pool", "shared")),
        Spec("", False, False, False, ("ledger", "pool", "untagged")),
        Spec("a", False, True, False, ("ledger", "pool", "mine")),
        Spec("", True, True, False, ("ledger", "pool", "private", "shared")),
    ]
    store, cells, items = build(corpus)
    searcher = Searcher(SearchConfig(store=store, cells=lambda: cells))
    want = {
        "a": ["i00", "i02", "i03"],
        "b": ["i01", "i02", "i03"],
        "": ["i02", "i03"],
        PARTITION_ALL: ["i00", "i01", "i02", "i03"],
    }
    for partition, expected in want.items():
        for search in (searcher.hybrid_search, searcher.hybrid_search_full):
            got = sorted(r.item.id for r in search("ledger pool", partition=partition))
            assert got == expected, (partition, search.__name__)
    check(store, cells, items, "ledger pool")
    check(store, cells, items, "quokka")


def test_a_host_rule_wider_than_the_default_is_honoured_by_both_channels() -> None:
    # The host lets partition "a" read "b" as well (a parent tenant, say).
    def wide(p: str) -> tuple[str, ...]:
        return ("a", "b") if p == "a" else (p,)

    def visible(item: Item, p: str) -> bool:
        own = partition_from_tags(item.tags)
        return item.scope != "private" and (own in ("", *wide(p)) or p == PARTITION_ALL)

    def doc_visible(entry: IndexEntry, p: str) -> bool:
        return not entry.private and (entry.partition in ("", *wide(p)) or p == PARTITION_ALL)

    corpus = [
        Spec("a", False, False, False, ("ledger", "pool")),
        Spec("b", False, False, False, ("garden", "quota")),
    ]
    store, cells, _ = build(corpus)
    searcher = Searcher(
        SearchConfig(store=store, cells=lambda: cells, visible=visible, doc_visible=doc_visible)
    )
    lexical = [r.item.id for r in searcher.hybrid_search("garden quota", partition="a")]
    assert lexical == ["i01"]
    semantic = [r.item.id for r in searcher.hybrid_search_full("quokka", partition="a")]
    assert sorted(semantic) == ["i00", "i01"]
    assert [r.item.id for r in searcher.hybrid_search_full("quokka", partition="b")] == ["i01"]
