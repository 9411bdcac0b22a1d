"""What the inspector shows, as JSON-ready dicts: no HTTP here, only :class:`~memstore.Memory`.

Each function answers one question of the page for one partition (the
caller's tenant): the hits of a search with their explanations, an item with
its history, links and related items, the statistics. A ``when`` of
``None`` means now; an :class:`~memstore.journal.Lsn` means memory as it
was at that position, rebuilt from the journal (lexical search only then:
the vectors hold the present).

An item belongs to a partition when its partition tag names it and it is not
private: untagged, shared and private items are not shown, as MemoryProtocol
does not serve them either. An id can change hands (a trusted writer re-adds
it in another partition, or makes it private): a partition sees, forgets and
erases an item only while it is its own now (a deleted one: was last), and
of its history only the versions that were its own.

>>> import tempfile
>>> from memstore import Memory
>>> with tempfile.TemporaryDirectory() as d, Memory(d, embedder=None) as mem:
...     first = mem.add("Alice moved to Lyon.", partition="acme")
...     _ = mem.update(first.id, content="Alice moved to Paris.")
...     [h["item"]["content"] for h in search(mem, "acme", "Alice")["hits"]]
...     [c["field"] for c in item_view(mem, "acme", first.id)["history"][1]["changes"]]
['Alice moved to Paris.']
['content', 'updated_at']
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import hmac
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from memstore import arguments as arg
from memstore.errors import MemstoreError
from memstore.graph import DEFAULT_CONTEXT_DECAY
from memstore.item import SCOPE_PRIVATE, STATUS_ACTIVE, Item
from memstore.journal import Lsn, Version
from memstore.journal.hlc import read_as_of
from memstore.limits import MAX_KIND_CHARS, MAX_QUERY_CHARS, MAX_SUBJECT_CHARS, adapter_cap
from memstore.memory import JOURNAL_FILE, Memory
from memstore.search import SearchConfig, SearchResult
from memstore.stats import snapshot_from_ops
from memstore.store import Store
from memstore.tags import partition_from_tags
from memstore.ui.neighbourhood import HOPS, owned, past_neighbourhood
from memstore.ui.positions import read_at
from memstore.ui.tails import GROWTH, MAX_TAIL, tail

__all__ = [
    "MAX_HISTORY",
    "MAX_LIMIT",
    "MAX_LINKS_IN",
    "MAX_OFFSET",
    "MAX_REACH",
    "MAX_RELATED",
    "RELATED_REACH",
    "NotFound",
    "ReceiptMismatch",
    "forget",
    "item_view",
    "owned",
    "parse_moment",
    "search",
    "stats",
]

MAX_LIMIT: Final = adapter_cap(100)
"""The most hits one search shows: the inspector's own cap, on purpose.

The engine answers up to :data:`~memstore.limits.MAX_RESULTS` hits per search;
a page is read by a person, and each hit carries its explanation. A
``limit`` past it is refused (400), as one below 1 is (``docs/ui.md``)."""
MAX_REACH: Final = adapter_cap(500)
"""The most hits a listing reaches, all its pages together (narrow it to see others)."""
MAX_OFFSET: Final = MAX_REACH - 1
"""The most hits a search skips (its next page); a larger ``offset`` is refused (400)."""
_RANKED: Final = adapter_cap(MAX_REACH + 1)
"""Hits every ranked search asks the engine for, whatever the page.

The engine's order of equally scored hits depends on how many are asked for
(each channel pools a number of candidates that grows with the limit), so
pages cut from searches of different sizes could repeat some hits and skip
others. Every page is cut from one search of this size instead: the pages
of one listing are slices of one order.
"""
_T = TypeVar("_T")
RELATED_DEPTH: Final = HOPS
"""Hops of spreading activation for an item's related items."""
MAX_HISTORY: Final = 100
"""The most versions one item view lists; the answer counts the older and newer ones left out."""
MAX_LINKS_IN: Final = 100
"""The most links in one item view lists (the first by linking item's id); the rest are counted.

A hub item that thousands of items link to would otherwise make a page of
thousands of entries: the answer's ``links_in_more`` says how many are left out."""
MAX_RELATED: Final = 100
"""The most related items one item view lists (the best scored); the rest are counted.

Spreading activation from a hub reaches every item linked to it (and, from
one of those, every other one): the answer's ``related_more`` says how many
are left out."""
RELATED_REACH: Final = 1000
"""The most items the related items' walk reaches (of every partition) before it stops.

Spreading activation from a hub would otherwise copy every item within
:data:`RELATED_DEPTH` links of it: one click costing work in proportion to
the graph. Past this many the walk stops, ``related`` lists the best scored
of those it reached and ``related_complete`` is ``False``. A tenth of the
engine's bound on a graph read (:data:`~memstore.limits.CONTEXT_REACH`), on
purpose: a click in the inspector should answer at once, and the page lists
100 related items at most."""
_SKIP_DIFF: Final = frozenset({"id"})


class NotFound(MemstoreError, LookupError):
    """No item with that id in the caller's partition (now, or at that moment)."""


class ReceiptMismatch(MemstoreError, ValueError):
    """A hard delete's confirmation is not the one its preview gave (or the item changed)."""


def _owned_now(memory: Memory, partition: str, id: str, versions: list[Version]) -> Item:
    """The item as it is (a deleted one: as it last was), if it is ``partition``'s.

    What a tenant may view, forget or erase: never an item that was its own
    once but has since moved to another partition or been made private.

    :raises NotFound: no such item, or not ``partition``'s now.
    """
    item = memory.get(id)
    if item is None:  # deleted: the last state the journal holds
        item = next((v.item for v in reversed(versions) if v.item is not None), None)
    if item is None or not owned(item, partition):
        raise NotFound(f"no item {id[:80]!r} in partition {partition!r}")
    return item


def parse_moment(text: str) -> Lsn:
    """An "as of" moment: a log position (``wall_ms.counter``) or an RFC 3339 timestamp.

    The engine's reading (:func:`~memstore.journal.hlc.read_as_of`): any time
    is a moment (past 2248 is after every write); other text raises
    :class:`InvalidLsnError` naming ``as_of``.

    >>> parse_moment("1700000000000.3")
    Lsn(wall_ms=1700000000000, counter=3)
    >>> parse_moment("2023-11-14T22:13:20Z").wall_ms
    1700000000000
    >>> parse_moment("yesterday")
    Traceback (most recent call last):
    ...
    memstore.journal.hlc.InvalidLsnError: as_of 'yesterday' is neither a log position ...
    """
    return read_as_of(text)


# ----------------------------------------------------------------- shapes


def _moment(lsn: Lsn | None) -> dict[str, Any] | None:
    if lsn is None:
        return None
    return {"lsn": str(lsn), "time": lsn.to_datetime().isoformat().replace("+00:00", "Z")}


def _item(item: Item) -> dict[str, Any]:
    out: dict[str, Any] = item.model_dump(mode="json")
    out["partition"] = partition_from_tags(item.tags)
    return out


def _explanation(r: SearchResult) -> dict[str, Any] | None:
    return None if r.explanation is None else dataclasses.asdict(r.explanation)


def _hit(r: SearchResult) -> dict[str, Any]:
    return {
        "item": _item(r.item),
        "score": r.score,
        "via": r.via,
        "collapsed_count": r.collapsed_count,
        "explanation": _explanation(r),
    }


# ------------------------------------------------------------------ views


def _past(memory: Memory, partition: str, when: Lsn) -> list[Item]:
    return [it for it in memory.as_of(when, partition=partition) if owned(it, partition)]


def _owned_entry(entry: Any, partition: str) -> bool:
    """:func:`owned` for a vector index entry (its partition tag and scope, no text)."""
    return bool(entry.scope != SCOPE_PRIVATE and entry.partition == partition)


def _own_items_only(cfg: SearchConfig) -> None:
    """A search rule for the inspector: a partition sees its own items, nothing else.

    A plain search also admits untagged and ``shared`` items; filtering its
    results afterwards would leave fewer than ``limit`` (or none) when those
    fill the page. With the rule in the config both channels rank only the
    partition's items: the lexical one filters its hits as it reads them, the
    vector index checks each entry in its walk (no partition label set then,
    so a walk over the whole index: slower than a protocol search, which is
    fine for a debugging page).
    """
    cfg.visible = owned
    cfg.doc_visible = _owned_entry


def search(
    memory: Memory,
    partition: str,
    query: str,
    *,
    kind: str = "",
    subject: str = "",
    limit: int = 20,
    offset: int = 0,
    when: Lsn | None = None,
) -> dict[str, Any]:
    """The partition's items matching ``query`` (newest first when it is blank), explained.

    Only the partition's own items are searched or listed (untagged and shared
    ones never take a place among the ``limit``): :func:`_own_items_only`.
    A search now makes at most one embedding call, as :meth:`Memory.search`;
    a blank query walks the most recently updated items, of every status
    (stale and superseded ones too, which a search never ranks), until
    ``limit`` are the partition's.

    Pages: ``offset`` hits are skipped (the ones already shown), and ``more``
    says whether another page follows. ``limit`` is 1..:data:`MAX_LIMIT` and
    ``offset`` 0..:data:`MAX_OFFSET`; no page reaches past the first
    :data:`MAX_REACH` hits, so paging by ``more`` ends there, each hit shown once.

    ``read_at``: the journal position the answer was read at (``{"lsn",
    "time"}``, as ``as_of``), exactly: every change recorded at or before it
    is in the answer, none after it is (:func:`~memstore.ui.positions.read_at`),
    so a change stream's change (which carries its ``lsn``) can be told
    already in it, or to apply on top of it. ``None`` without a journal, or
    when the memory kept changing through every read; in the past, the moment.

    :raises InvalidItemError: ``limit`` or ``offset`` is out of its range (the
        message names the range; nothing is cut down to fit), or ``query``,
        ``kind`` or ``subject`` is too long.
    """
    limit = arg.count(limit, "limit", 1, MAX_LIMIT)
    offset = arg.count(offset, "offset", 0, MAX_OFFSET)
    page = _Page(offset, limit)
    query = arg.text_arg(query, "query", MAX_QUERY_CHARS)
    kind = arg.text_arg(kind, "kind", MAX_KIND_CHARS)
    subject = arg.text_arg(subject, "subject", MAX_SUBJECT_CHARS)
    if when is not None:
        past = _past(memory, partition, when)
        if not query.strip():
            shown = [it for it in past if _matches(it, kind, subject)]
            shown.sort(key=lambda it: it.updated_at or it.created_at or _EPOCH, reverse=True)
            return page.answer(when, shown, _listed, when)
        store = Store()
        store.restore(past)

        def over_the_past(cfg: SearchConfig) -> None:
            cfg.store, cfg.cells = store, None

        searcher = memory.searcher.with_(over_the_past)
        results = searcher.hybrid_search(query, kind, subject, partition, _RANKED, explain=True)
        return page.answer(when, results, _hit, when)
    if not query.strip():  # every status: a stale or superseded item is what one debugs
        newest, at = read_at(
            memory,
            lambda: memory.store.filtered(
                kind=kind,
                limit=page.reach,
                skip=lambda it: not (owned(it, partition) and _matches(it, kind, subject)),
            ),
        )
        return page.answer(None, newest, _listed, at)
    searcher = memory.searcher.with_(_own_items_only)
    results, at = read_at(
        memory,
        lambda: searcher.hybrid_search(query, kind, subject, partition, _RANKED, explain=True),
    )
    on_page = results[offset : page.end]
    if memory.hub is not None and on_page:  # the hub's hit stream, as Memory.search feeds it
        memory.store.notify_hit([r.item.id for r in on_page], query, kind)
    return page.answer(None, results, _hit, at)


@dataclasses.dataclass(frozen=True, slots=True)
class _Page:
    """One page of hits: ``limit`` of them after the first ``offset``.

    >>> _Page(2, 2).answer(None, list(range(5)), lambda n: {"n": n}, Lsn(1700000000000, 4))
    ... # doctest: +NORMALIZE_WHITESPACE
    {'as_of': None, 'hits': [{'n': 2}, {'n': 3}], 'offset': 2, 'more': True,
     'read_at': {'lsn': '1700000000000.4', 'time': '2023-11-14T22:13:20Z'}}
    """

    offset: int
    limit: int

    @property
    def end(self) -> int:
        """Where this page stops: ``limit`` hits on, never past :data:`MAX_REACH`.

        >>> _Page(480, 20).end, _Page(490, 20).end
        (500, 500)
        """
        return min(self.offset + self.limit, MAX_REACH)

    @property
    def reach(self) -> int:
        """Hits to ask the engine for: this page, those before it, one to tell "more"."""
        return self.end + 1

    def answer(
        self,
        when: Lsn | None,
        found: Sequence[_T],
        shape: Callable[[_T], dict[str, Any]],
        at: Lsn | None,
    ) -> dict[str, Any]:
        """The answer of a search that found ``found``, best (or newest) first, read at ``at``.

        Only this page's hits are shaped (``shape``: to their JSON form).
        ``read_at``: the journal position ``found`` is the state at
        (:func:`read_at`; the moment itself in the past), or ``None``.

        >>> last = _Page(480, 20).answer(None, list(range(600)), lambda n: {"n": n}, None)
        >>> [h["n"] for h in last["hits"]][-1], last["more"]
        (499, False)
        """
        return {
            "as_of": _moment(when),
            "hits": [shape(x) for x in found[self.offset : self.end]],
            "offset": self.offset,
            "more": len(found) > self.end and self.end < MAX_REACH,
            "read_at": _moment(at),
        }


_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _matches(item: Item, kind: str, subject: str) -> bool:
    return (not kind or item.kind == kind) and (not subject or item.subject == subject)


def _listed(item: Item) -> dict[str, Any]:
    return {
        "item": _item(item),
        "score": None,
        "via": "",
        "collapsed_count": 0,
        "explanation": None,
    }


def _changes(before: Item | None, after: Item | None) -> list[dict[str, Any]]:
    """The fields that differ between two consecutive versions (none for a first version)."""
    if before is None:
        return []
    old = before.model_dump(mode="json") if before is not None else {}
    new = after.model_dump(mode="json") if after is not None else {}
    out = []
    for name in sorted(set(old) | set(new)):
        if name in _SKIP_DIFF or old.get(name) == new.get(name):
            continue
        out.append({"field": name, "before": old.get(name), "after": new.get(name)})
    return out


def _theirs(versions: list[Version], partition: str) -> list[Version]:
    """The versions that were ``partition``'s: an item it owned, or the delete that ended one.

    An id can change hands (a trusted writer re-adds it in another partition,
    or makes it private); the versions of the other owner are left out, so a
    history never shows another tenant's text.
    """
    out = []
    was_theirs = False
    for v in versions:
        if v.item is not None:
            was_theirs = owned(v.item, partition)
        if was_theirs:
            out.append(v)
    return out


def _window(versions: list[Version], when: Lsn | None, skipped: int = 0) -> tuple[int, int]:
    """Which versions the view lists: at most :data:`MAX_HISTORY`, around the moment shown.

    Now: the newest ones. At a past moment: those around the version shown
    then (half before, half after, where there are enough). ``versions`` are
    the newest of the history, after ``skipped`` older ones not read (all of
    them older than ``when``): the window is the whole history's, counted
    from the first of ``versions``.

    >>> _window([None] * 5, None), _window([None] * 250, None)  # type: ignore[list-item]
    ((0, 5), (150, 250))
    """
    n = skipped + len(versions)
    if n <= MAX_HISTORY:
        return 0, len(versions)
    if when is None:
        return len(versions) - MAX_HISTORY, len(versions)
    at = skipped + sum(1 for v in versions if v.valid_from.lsn <= when)
    start = min(max(at - MAX_HISTORY // 2, 0), n - MAX_HISTORY)
    return start - skipped, start - skipped + MAX_HISTORY


def _recent_history(memory: Memory, partition: str, id: str) -> tuple[list[Version], int, bool]:
    """The versions of ``id`` the view of now needs, how many older it skips, whether all theirs.

    An item that always lived in ``partition`` and was never private (the
    common case) has every version its own: only the newest
    :data:`MAX_HISTORY` (and two before them, for the first one's diff) are
    read, not its whole history, and the third value is ``True``. Otherwise
    every version is read (to be filtered by :func:`_theirs`).
    """
    read = tail(memory, id, MAX_HISTORY + 2)  # a delete is never followed by another
    if read.complete:
        return read.versions, 0, False
    if read.partition == partition and not read.maybe_private:
        return read.versions, read.total - len(read.versions), True
    return memory.history(id), 0, False


def _history_then(
    memory: Memory, partition: str, id: str, when: Lsn
) -> tuple[list[Version], int, bool]:
    """:func:`_recent_history` for the view of a past moment: the versions since it, not all.

    An item that always lived in ``partition``, never private, has its newest
    versions read (:func:`~memstore.ui.tails.tail`), :data:`~memstore.ui.tails.GROWTH`
    times more each round, until they reach back past ``when`` far enough for
    the window the view lists (and two before it, for the first one's diff):
    a moment near now costs a short read, whatever the length of the
    history. Otherwise (or past
    :data:`~memstore.ui.tails.MAX_TAIL` versions) every version is read, as
    before. Same values as :func:`_recent_history`: the versions, how many
    older ones were skipped, whether all are ``partition``'s.
    """
    newest = MAX_HISTORY + 2
    while True:
        read = tail(memory, id, newest)
        if read.complete:
            return read.versions, 0, False
        if read.partition != partition or read.maybe_private or newest >= MAX_TAIL:
            return memory.history(id), 0, False
        skipped = read.total - len(read.versions)
        # The window starts two versions into the tail only if the tail reaches back
        # past ``when`` (before, it would start at or before the tail's first version):
        # then every skipped version is older than the moment, as _window assumes.
        if _window(read.versions, when, skipped)[0] >= 2:
            return read.versions, skipped, True
        newest = min(newest * GROWTH, MAX_TAIL)


def _history(versions: list[Version], when: Lsn | None, skipped: int = 0) -> dict[str, Any]:
    """The versions as the page lists them, each with what changed since the one before.

    At most :data:`MAX_HISTORY` of them (:func:`_window`); ``older`` and
    ``newer`` count those left out on each side (``older`` adds the
    ``skipped`` versions older than ``versions``, never read).
    """
    start, end = _window(versions, when, skipped)
    previous = next((v.item for v in reversed(versions[:start]) if v.item is not None), None)
    out = []
    for v in versions[start:end]:
        out.append(
            {
                "op": v.op,
                "valid_from": _moment(v.valid_from.lsn),
                "valid_to": _moment(v.valid_to.lsn) if v.valid_to is not None else None,
                "item": _item(v.item) if v.item is not None else None,
                "changes": _changes(previous, v.item),
                "current": v.visible_at(when) if when is not None else v.valid_to is None,
                "after_moment": when is not None and v.valid_from.lsn > when,
            }
        )
        if v.item is not None:
            previous = v.item
    return {"versions": out, "older": skipped + start, "newer": len(versions) - end}


def _title(item: Item) -> str:
    return item.title or item.content[:80]


def item_view(
    memory: Memory, partition: str, id: str, *, when: Lsn | None = None
) -> dict[str, Any]:
    """An item with its history, its links in and out, and what it activates.

    The item is ``partition``'s while its current state is (a deleted item:
    its last state); as of ``when``, while its state then was. Its history
    lists only the versions that were ``partition``'s (:func:`_theirs`), each
    compared with the one before it in that list, at most
    :data:`MAX_HISTORY` of them (``history_older`` and ``history_newer``
    count the ones left out). At most :data:`MAX_LINKS_IN` links in are listed
    (``links_in_more`` counts the others), and the :data:`MAX_RELATED` related
    items scored highest (``related_more`` counts the others).

    The work is bounded by the item's neighbourhood, never the store: now,
    the links in come from the store's reverse-link index
    (:meth:`~memstore.store.Store.links_in`, which copies only the items
    listed and counts the links of the others), and the related items from a
    walk that stops after :data:`RELATED_REACH` items
    (:meth:`~memstore.store.Store.traverse_within`); as of ``when``, only the
    items within :data:`RELATED_DEPTH` links are read back from the journal
    (:func:`~memstore.ui.neighbourhood.past_neighbourhood`). ``related_complete``
    is ``False`` when a cap cut the walk short: ``related`` and
    ``related_more`` then tell of the items it reached, not all of them.

    :raises NotFound: ``id`` is not ``partition``'s (now, or at ``when``).
    """
    complete = True
    skipped = 0
    if when is None:
        versions, skipped, all_theirs = _recent_history(memory, partition, id)
        _owned_now(memory, partition, id, versions)
        theirs = versions if all_theirs else _theirs(versions, partition)
        item = memory.get(id)  # None once deleted
        store: Store = memory.store
        linkers, linked = store.links_in(
            id, skip=lambda it: not owned(it, partition), limit=MAX_LINKS_IN
        )
        targets = [store.get(link.to_id) for link in (item.links if item is not None else [])]
        titles = {it.id: _title(it) for it in targets if it and owned(it, partition)}
    else:
        versions, skipped, all_theirs = _history_then(memory, partition, id, when)
        theirs = versions if all_theirs else _theirs(versions, partition)
        item = next((v.item for v in versions if v.visible_at(when)), None)
        if item is None or not owned(item, partition):
            raise NotFound(f"no item {id[:80]!r} in partition {partition!r} as of {when}")
        hood = past_neighbourhood(memory, partition, id, when, hops=RELATED_DEPTH)
        complete = hood.complete
        linkers = sorted(
            (it for it in hood.items.values() if any(lk.to_id == id for lk in it.links)),
            key=lambda it: it.id,
        )
        linked = sum(1 for it in linkers for lk in it.links if lk.to_id == id)
        store = Store()
        store.restore(hood.items.values())
        titles = {i: _title(it) for i, it in hood.items.items()}
    links_out = [
        {
            "id": link.to_id,
            "relation": link.relation,
            "weight": link.weight,
            "title": titles.get(link.to_id),
        }
        for link in (item.links if item is not None else [])
    ]
    incoming = [(it, link) for it in linkers for link in it.links if link.to_id == id]
    links_in = [
        {"id": it.id, "relation": link.relation, "weight": link.weight, "title": _title(it)}
        for it, link in incoming[:MAX_LINKS_IN]
    ]
    activated = []
    if item is not None and store.get(id) is not None:
        scored, reached_all = store.traverse_within(
            [id],
            RELATED_DEPTH,
            DEFAULT_CONTEXT_DECAY,
            reach=RELATED_REACH,
            through=lambda it: owned(it, partition),  # the partition's graph, no other's
        )  # best first
        complete = complete and reached_all
        activated = [s for s in scored if owned(s.item, partition)]
    related = [
        {"id": s.item.id, "score": s.score, "title": _title(s.item), "kind": s.item.kind}
        for s in activated[:MAX_RELATED]
    ]
    history = _history(theirs, when, skipped)
    return {
        "as_of": _moment(when),
        "id": id,
        "item": _item(item) if item is not None else None,
        "deleted": item is None,
        "history": history["versions"],
        "history_older": history["older"],
        "history_newer": history["newer"],
        "links_out": links_out,
        "links_in": links_in,
        "links_in_more": linked - len(links_in),
        "related": related,
        "related_more": len(activated) - len(related),
        "related_complete": complete,
    }


def stats(memory: Memory, partitions: tuple[str, ...], *, server: bool = False) -> dict[str, Any]:
    """Counts of the caller's items and the journal's head; the server's figures for an admin.

    ``partitions`` and ``kinds`` count the active items (not stale, superseded
    or past their deadline); ``statuses`` counts every item held, by status.
    Private items are never counted. The counts come from the store's tally
    (:meth:`~memstore.store.Store.tally`), kept as items change: a request
    costs what the partitions' kinds cost, not a walk over the store.
    ``journal.head`` is the log position every token is told (``whoami``,
    ``/healthz``): the moment time travel starts from.

    ``server`` (a token holding the ``admin`` scope) adds ``server``: the
    figures of the whole server, every tenant's work in them (the search
    counters and phases, the journal's size on disk, the number of
    vectors). Without it ``server`` is ``None``: a tenant's token learns
    nothing of how much the other tenants hold or search.
    """
    # From the tally per partition: Memory.stats() counts every partition and scope.
    head = memory.journal.head() if memory.journal is not None else None
    by_partition: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    by_status: Counter[str] = Counter()
    for p in dict.fromkeys(partitions):  # each once, in order
        for (kind, status), n in memory.store.tally(p).items():
            by_status[status] += n
            if status == STATUS_ACTIVE:
                by_partition[p] += n
                by_kind[kind] += n
    return {
        "partitions": {p: by_partition.get(p, 0) for p in partitions},
        "kinds": dict(sorted(by_kind.items())),
        "statuses": dict(sorted(by_status.items())),
        "journal": {"head": _moment(head)},
        "server": _server_figures(memory) if server else None,
    }


def _server_figures(memory: Memory) -> dict[str, Any]:
    """What :func:`stats` adds for an admin: every tenant's search counters, journal, vectors."""
    snap = snapshot_from_ops(dict(memory.searcher.stats.ops()))
    phases = {
        name: {"avg_ms": round(phase.avg_ms, 3), "count": phase.count}
        for name, phase in (
            (f.name, getattr(snap.phases, f.name)) for f in dataclasses.fields(snap.phases)
        )
    }
    size = None
    if memory.path is not None:
        files = [memory.path / (JOURNAL_FILE + suffix) for suffix in ("", "-wal", "-shm")]
        size = sum(f.stat().st_size for f in files if f.exists()) or None
    return {
        "search": {
            "total": snap.total,
            "lexical_fast_path": snap.lexical_count,
            "fused": snap.fused_count,
            "semantic_calls": snap.semantic_calls,
            "avg_lexical_ms": round(snap.avg_lexical_ms, 3),
            "avg_fused_ms": round(snap.avg_fused_ms, 3),
            "phases": phases,
        },
        "journal_bytes": size,
        "vectors": len(memory.cells) if memory.cells is not None else 0,
    }


# ----------------------------------------------------------------- forget


def _receipt(key: bytes, partition: str, id: str, versions: int) -> str:
    message = f"{partition}\0{id}\0{versions}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def forget(
    memory: Memory,
    partition: str,
    id: str,
    *,
    hard: bool,
    key: bytes,
    confirmation: str | None = None,
) -> dict[str, Any]:
    """Soft delete now; a hard delete is previewed first, then done with the preview's receipt.

    A soft delete removes the item (the journal keeps its history, so time
    travel still shows it). A hard delete without ``confirmation`` changes
    nothing and answers what would be erased with a ``confirmation`` sealed
    by ``key``; with it, every version is erased (:meth:`Memory.purge`). The
    receipt names the partition, the id and how many versions there were: an
    item written since the preview needs a new one.

    Only an item that is ``partition``'s now (deleted: was last) may be
    forgotten. A hard delete erases every version of the id, including any
    from before it came to ``partition`` (which its history does not show):
    the preview counts them all.

    :raises NotFound: no such item in ``partition`` (now).
    :raises ReceiptMismatch: a ``confirmation`` that is not the preview's.
    """
    read = tail(memory, id, 2)  # a deleted item's last state is in its newest two
    _owned_now(memory, partition, id, read.versions)
    versions = read.total
    if not hard:
        removed = memory.delete(id)
        return {"mode": "soft", "id": id, "removed": removed, "preview": False}
    receipt = _receipt(key, partition, id, versions)
    if confirmation is None:
        return {
            "mode": "hard",
            "id": id,
            "preview": True,
            "versions": versions,
            "confirmation": receipt,
        }
    if not hmac.compare_digest(confirmation, receipt):
        raise ReceiptMismatch(
            "this confirmation is not the preview's, or the item changed since: preview again"
        )
    erased = memory.purge([id])
    return {"mode": "hard", "id": id, "preview": False, "erased": erased, "versions": versions}
