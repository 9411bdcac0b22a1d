"""The front door: one object that wires the store, vectors, search, journal and hub.

:class:`Memory` is what most programs need: give it a folder and it keeps
everything there (a SQLite journal and the vectors beside it); give it
nothing and it lives in memory. Writes take plain text or an
:class:`~memstore.item.Item`, with ``Item`` fields as keyword arguments;
``partition=`` names the tenant (the ``tenant/<name>`` tag, never spelled by
hand) and ``private_to=`` makes a note visible to one user alone.

>>> from memstore import Memory
>>> with Memory(embedder="hash") as mem:
...     fact = mem.add("The user is vegetarian and cooks dinner for two.",
...                    kind="stable_fact", confidence="high", partition="alice")
...     [hit.item.content for hit in mem.search("vegetarian dinner", partition="alice")]
['The user is vegetarian and cooks dinner for two.']

Every error a caller can cause is a :class:`~memstore.errors.MemstoreError`
whose message says what to do, and a failed call changes nothing. Each
method checks its arguments' types and sizes first (:mod:`memstore.arguments`,
with the bounds of :mod:`memstore.limits`): a wrong type is an
:class:`~memstore.errors.InvalidItemError`, never a ``TypeError`` from inside.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import inspect
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

from memstore import arguments as arg
from memstore._gc import write_batch
from memstore._memory_build import (
    DEFAULT_KIND,
    build_entries,
    build_item,
    check_fields,
    kept_placement,
    partition_name,
    short,
    validated,
)
from memstore._memory_stats import MemoryStats
from memstore._memory_wiring import JOURNAL_FILE, open_cells, open_hub, open_journal
from memstore._progress import Progress
from memstore.config import Change, Config
from memstore.consolidate import ConsolidationReport
from memstore.errors import (
    InvalidItemError,
    ItemNotFoundError,
    MemstoreError,
    ReadOnlyError,
)
from memstore.graph import Context
from memstore.item import SCOPE_PRIVATE, Item, ScoredItem, ThoughtLink
from memstore.journal import Journal, JournalBase, Lsn, Version
from memstore.limits import (
    CONTEXT_REACH,
    MAX_CONTEXT_DEPTH,
    MAX_EMBED_QUERIES,
    MAX_KIND_CHARS,
    MAX_QUERY_CHARS,
    MAX_REASON_CHARS,
    MAX_REF_CHARS,
    MAX_REFS,
    MAX_RESULTS,
    MAX_SUBJECT_CHARS,
)
from memstore.search import SearchConfig, Searcher, SearchResult, default_visible
from memstore.search._fusion_rules import merge_by_rank
from memstore.search._relevance import assign_relevance
from memstore.search._types import check_config
from memstore.store import Store
from memstore.tags import (
    PARTITION_ALL,
    partition_from_tags,
    private_owner,
)
from memstore.validate import thought_link_rejection

if TYPE_CHECKING:
    from memstore_hub import Hub, Subscription
    from memstore_index import Embedder

__all__ = ["DEFAULT_KIND", "JOURNAL_FILE", "Memory", "MemoryStats"]

T = TypeVar("T")

_INHERITED: Final = ("kind", "subject", "event_date", "confidence", "origin", "tags")
_SEARCH_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(SearchConfig)) - {
    "store",
    "cells",  # Memory's own vector index
}


class Memory:
    """A memory for one agent program: durable, searchable, thread-safe.

    ``path``: a folder for the journal and the vectors (created if missing);
    ``None`` keeps everything in memory. ``journal``: any
    :class:`~memstore.journal.Journal` instead of the folder's SQLite file,
    or a ``postgresql://`` DSN (a ``PostgresJournal`` in schema ``memstore``,
    or the one its ``memstore_schema`` parameter names: many processes share
    one memory, and their vectors, see ``docs/postgres.md``).
    ``embedder``: ``"auto"`` (for a folder whose vectors an embedder memstore
    ships made, that one; else the local MiniLM model when installed, else a
    hash embedder, with a warning), ``"local"``, ``"local-int8"`` (the same
    model multiplied in integers: about twice as fast, vectors of a space of
    their own), ``"hash"``, ``None`` (lexical search only) or any
    :class:`~memstore_index.Embedder`. ``config``: the
    store's :class:`~memstore.config.Config` (host seams, clock, vocabulary).
    ``search``: options of :class:`~memstore.search.SearchConfig` (e.g.
    ``{"always_fuse": True}``). ``hub``: ``True`` for a change hub
    (:meth:`subscribe`), or a hub to use.

    ``readonly=True`` opens an existing folder for reading beside the process
    that writes it (the journal's single writer): the items as the journal
    held them when opened, the vectors the writer stored (only items without
    one are embedded, in memory), and every write refused with
    :class:`~memstore.errors.ReadOnlyError`. No data in the folder is created
    or changed (SQLite, as for any reader of a write-ahead-logged database,
    may leave its empty ``-wal`` and ``-shm`` side files); a folder without a
    journal raises :class:`MemstoreError`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        embedder: str | Embedder | None = "auto",
        journal: Journal | str | None = None,
        config: Config | None = None,
        search: Mapping[str, Any] | None = None,
        hub: bool | Hub = False,
        readonly: bool = False,
    ) -> None:
        self.readonly = arg.flag(readonly, "readonly")
        if self.readonly and (path is None or journal is not None):
            raise MemstoreError("readonly=True opens a folder's journal: give the folder as path")
        if path is not None and not isinstance(path, str | os.PathLike):
            raise MemstoreError(f"path must be a folder path or None, got {arg.describe(path)}")
        if search is not None and not isinstance(search, Mapping):
            raise MemstoreError(f"search must be a mapping of options, got {arg.describe(search)}")
        if config is not None and not isinstance(config, Config):
            raise MemstoreError(f"config must be a memstore.Config, got {arg.describe(config)}")
        if journal is not None and not isinstance(journal, str | Journal):
            raise MemstoreError(
                f"journal must be a Journal or a postgresql:// DSN, got {arg.describe(journal)}"
            )
        options = dict(search or {})
        unknown = sorted(set(options) - _SEARCH_FIELDS)
        if unknown:
            raise MemstoreError(
                f"unknown search option(s) {unknown}; valid ones: {sorted(_SEARCH_FIELDS)}"
            )
        try:  # before anything opens: a bad value is refused here, not at the first search
            check_config(SearchConfig(store=None, **options))  # type: ignore[arg-type]
        except ValueError as e:
            raise MemstoreError(f"search option: {e}") from None
        self.path = Path(path) if path is not None else None
        self._lock = threading.RLock()
        self._closed = False
        self._closers: list[Callable[[], None]] = []
        self.store = Store(config)
        # A write that passed _check_open as close() began must not land in a
        # store whose journal has gone: every group asks again under the lock.
        self.store.add_change_listener(self._refuse_after_close, before_commit=True)
        try:
            self.journal = open_journal(
                journal,
                store=self.store,
                path=self.path,
                readonly=self.readonly,
                closers=self._closers,
            )
            self.cells = open_cells(
                embedder,
                store=self.store,
                journal=self.journal,
                path=self.path,
                readonly=self.readonly,
                closers=self._closers,
            )
            self.hub = open_hub(hub, store=self.store, journal=self.journal, closers=self._closers)
            cells = self.cells
            self.searcher = Searcher(
                SearchConfig(
                    store=self.store,
                    cells=(lambda: cells) if cells is not None else None,
                    **{"subject_filter": True, **options},  # a subject narrows every channel
                )
            )
        except BaseException:
            self.close()  # nothing half-open stays behind (the journal's file lock)
            raise

    # -------------------------------------------------------------- writes

    def add(
        self,
        text_or_item: str | Item,
        *,
        partition: str | None = None,
        private_to: str | None = None,
        dedup: bool = True,
        **fields: Any,
    ) -> Item:
        """Store a note; returns it as stored (with its id).

        Plain text becomes the content of a ``note`` (or of ``kind=``). With
        ``dedup`` (the default), a restatement of a knowledge cell of the same
        kind (``stable_fact``, ``hypothesis``, ...) updates that cell instead
        of adding a near-duplicate; the cell it landed on is returned.
        """
        dedup = arg.flag(dedup, "dedup")
        item = build_item(text_or_item, partition, private_to, fields)
        self._check_open()
        # ``item`` was built here for this write: the store need not copy it.
        if dedup:  # it reads what it may land on: one step with the write
            return self._atomic(lambda: self.store._upsert_dedup(item, owned=True)[0])
        return self.store._upsert(item, owned=True)

    def add_many(
        self,
        items: Iterable[str | Item | Mapping[str, Any]],
        *,
        partition: str | None = None,
        progress: bool = False,
    ) -> list[Item]:
        """Store many notes in one transaction (one embedding pass, one sync).

        Each entry is text, an :class:`Item`, or a mapping of ``Item`` fields
        (with ``text``/``partition``/``private_to`` accepted too). All or
        nothing: one invalid entry raises (naming its position) and nothing is
        stored. ``progress=True`` draws a progress bar on stderr. Unlike
        :meth:`add`, no entry is merged into a near-duplicate: each is stored
        as given (:meth:`consolidate` retires restatements afterwards).
        """
        progress = arg.flag(progress, "progress")
        # What a batch builds lives on: the cyclic collector would only walk it
        # again and again, during and after (see memstore._gc.write_batch).
        with write_batch():
            plain: list[bool] = []
            built = build_entries(items, partition, plain)
            self._check_open()
            if not progress:
                # The entries were built here, for this write: the store takes them
                # as they are (no defensive copy), validated all before any is written
                # (the plain ones were, as they were built).
                return self.store._upsert_many(built, owned=True, plain=plain)
            return self._add_with_progress(built)

    def _add_with_progress(self, built: list[Item]) -> list[Item]:
        bar = Progress(len(built))
        out: list[Item] = []
        with self.store.batch():
            for n, it in enumerate(built):
                try:
                    out.append(self.store.upsert(it))
                except InvalidItemError as e:
                    raise InvalidItemError(f"entry {n}: {e.reason}") from None
                bar.step()
            bar.note("embedding and writing")
        bar.done()
        return out

    def update(self, id: str, /, **fields: Any) -> Item:
        """Change fields of an item; returns the stored result.

        New ``tags`` replace the free tags; the item's partition and owner tags
        stay (an update never moves an item to another partition or owner).
        A field given empty is emptied (``links=[]``, ``supersedes=[]``).
        Raises :class:`~memstore.errors.ItemNotFoundError` for an unknown id and
        :class:`~memstore.errors.InvalidItemError` for an unknown field or a
        value the item's rules refuse; either way nothing changes.
        """
        id = arg.id_arg(id)
        check_fields(fields)
        if "id" in fields:
            raise InvalidItemError("update cannot change an item's id")
        self._check_open()
        return self._atomic(lambda: self._update(id, dict(fields)))  # a fresh copy per run

    def _update(self, id: str, fields: dict[str, Any]) -> Item:
        with self.store.batch():  # read, change and write as one step: no lost update
            current = self.store.get(id)
            if current is None:
                raise ItemNotFoundError(id)
            data = current.model_dump()
            data["no_embed"] = current.no_embed  # an in-process flag model_dump leaves out
            if "tags" in fields:
                fields["tags"] = kept_placement(current, fields["tags"])
            data.update(fields)
            if "links" in fields:
                data["links_set"] = True
            # ``data`` is the whole item: supersedes=[] clears the list (an upsert keeps it).
            return self.store._upsert(validated(data), owned=True, whole=True)

    def delete(self, id: str) -> bool:
        """Delete an item (the journal keeps its history); whether it existed."""
        id = arg.id_arg(id)
        self._check_open()
        return self._atomic(lambda: self.store.delete(id))

    def expire(self, id: str) -> bool:
        """Mark an item stale now, a superseded one too (as Store.expire); whether it exists."""
        id = arg.id_arg(id)
        self._check_open()
        return self._atomic(lambda: self.store.expire(id))

    def supersede(
        self,
        old_id: str,
        text_or_item: str | Item,
        *,
        private_to: str | None = None,
        **fields: Any,
    ) -> Item:
        """Retire ``old_id`` and store its replacement (which records what it replaced).

        Given as text, the replacement keeps the old item's kind, subject,
        event date, confidence, origin and tags unless told otherwise, and a
        private note's replacement stays private to the same owner.
        """
        old_id = arg.id_arg(old_id, "old_id")
        self._check_open()
        return self._atomic(lambda: self._supersede(old_id, text_or_item, private_to, dict(fields)))

    def _supersede(
        self, old_id: str, text_or_item: str | Item, private_to: str | None, fields: dict[str, Any]
    ) -> Item:
        partition = fields.pop("partition", None)
        old = self.store.get(old_id)
        if old is None:
            raise ItemNotFoundError(old_id)
        if partition is None:
            partition = partition_from_tags(old.tags) or None
        owner = private_to
        if not isinstance(text_or_item, Item):  # a restatement keeps what it does not change
            for name in _INHERITED:
                fields.setdefault(name, getattr(old, name))
            if owner is None and old.scope == SCOPE_PRIVATE:
                owner = private_owner(old)  # a private note's replacement stays private
        new = build_item(text_or_item, partition, owner, fields)
        return self.store.supersede(old_id, new)

    def refute(self, id: str, reason: str, evidence: Sequence[str] = ()) -> list[str]:
        """Refute an item and expire what was derived from it; the ids expired by the cascade."""
        id = arg.id_arg(id)
        reason = arg.text_arg(reason, "reason", MAX_REASON_CHARS, empty=False)
        evidence = arg.text_list(evidence, "evidence", MAX_REFS, MAX_REF_CHARS)
        self._check_open()
        found, cascaded = self._atomic(lambda: self.store.refute(id, reason, evidence))
        if not found:
            raise ItemNotFoundError(id)
        return cascaded

    def link(
        self, from_id: str, to_id: str, relation: str = "correlates_with", weight: float = 1.0
    ) -> bool:
        """Link ``from_id`` -> ``to_id``; whether it was admitted (``False``: the cap held).

        ``relation`` is one of ``triggers``, ``caused_by``, ``correlates_with``,
        ``precedes``, ``explains``, ``contradicts``; ``weight`` in 0..1.
        """
        from_id, to_id = arg.id_arg(from_id, "from_id"), arg.id_arg(to_id, "to_id")
        relation = arg.text_arg(relation, "relation", MAX_KIND_CHARS)
        weight = arg.unit_weight(weight)
        self._check_open()

        def add_link() -> bool:  # the ids are looked up in the same step as the write
            for id in (from_id, to_id):
                if self.store.get(id) is None:
                    raise ItemNotFoundError(id)
            try:
                link = ThoughtLink(to_id=to_id, relation=relation, weight=weight)
            except ValueError as e:
                raise InvalidItemError(f"bad link: {short(str(e))}") from None
            why = thought_link_rejection(from_id, link)
            if why:
                raise InvalidItemError(why)
            return self.store.add_link(from_id, link)

        return self._atomic(add_link)

    # --------------------------------------------------------------- reads

    def get(self, id: str) -> Item | None:
        """The item with this id (any status), or ``None``."""
        id = arg.id_arg(id)
        self._check_open()
        return self.store.get(id)

    def search(
        self,
        query: str,
        *,
        partition: str | None = None,
        kind: str = "",
        subject: str = "",
        limit: int = 10,
        explain: bool = False,
        user: str | None = None,
        min_relevance: float = 0.0,
        query_vector: npt.ArrayLike | None = None,
    ) -> list[SearchResult]:
        """Hybrid search: lexical first, semantic fused in when the lexical answer is unsure.

        ``partition`` sees its own items, untagged ones and ``shared`` ones
        (``"*"`` sees every partition); without one (``None``, the default) a
        search sees only untagged and ``shared`` items, never a partition's.
        ``user`` adds that user's private notes
        (matched lexically, merged by rank, ahead of public results of the same
        rank). ``explain=True`` tells, per
        result, how it was found and scored. A blank ``query``, or a ``kind``
        the vocabulary does not list as searchable (when it lists any), raises
        :class:`~memstore.errors.InvalidItemError` (as the HTTP adapters answer 400).

        Each result's ``relevance`` (in [0, 1]) estimates the probability that
        it is evidence for the query, from what it shares with the query, not
        from its rank, so it compares across calls (see ``docs/search.md``).
        ``min_relevance`` (a number in [0, 1], default 0) drops the results
        below it: a question the memory cannot answer may get none.

        ``query_vector``: the query's embedding, when the caller has it already
        (a row of :meth:`embed_queries`, which embeds many queries in one call:
        what a server answering concurrent searches does). The results are the
        same as without it; a vector of the wrong dimension, with a NaN or
        infinity, or all zeros raises :class:`~memstore.errors.InvalidItemError`,
        as does any vector when this Memory has no embedder.
        """
        return self._search(
            query,
            partition,
            kind,
            subject,
            limit,
            explain,
            user,
            min_relevance,
            full=False,
            vector=query_vector,
        )

    def search_full(
        self,
        query: str,
        *,
        partition: str | None = None,
        kind: str = "",
        subject: str = "",
        limit: int = 10,
        explain: bool = False,
        user: str | None = None,
        min_relevance: float = 0.0,
        query_vector: npt.ArrayLike | None = None,
    ) -> list[SearchResult]:
        """:meth:`search`, plus exact-id promotion and the host's live matches."""
        return self._search(
            query,
            partition,
            kind,
            subject,
            limit,
            explain,
            user,
            min_relevance,
            full=True,
            vector=query_vector,
        )

    def embed_queries(self, queries: Sequence[str]) -> npt.NDArray[np.float32]:
        """The embeddings of ``queries`` in one embedding call, one unit-length row each.

        Row ``i`` is the vector :meth:`search` would compute for ``queries[i]``;
        pass it back as ``search(queries[i], query_vector=row)``. One call for
        many queries costs much less than one per query with a local model
        (one model run) or a provider (one request).

        :raises InvalidItemError: ``queries`` is not a list of text, or this
            Memory has no embedder.
        :raises EmbeddingError: the model or the provider failed.
        """
        texts = arg.text_list(queries, "queries", MAX_EMBED_QUERIES, MAX_QUERY_CHARS)
        self._check_open()
        if self.cells is None:
            raise InvalidItemError("embed_queries needs an embedder: this Memory has none")
        return self.cells.embed_queries(texts)

    def _search(
        self,
        query: str,
        partition: str | None,
        kind: str,
        subject: str,
        limit: int,
        explain: bool,
        user: str | None,
        min_relevance: float,
        *,
        full: bool,
        vector: npt.ArrayLike | None = None,
    ) -> list[SearchResult]:
        query = arg.text_arg(query, "query", MAX_QUERY_CHARS)
        if not query.strip():
            raise InvalidItemError(
                "query is empty: search for some words (use recent() to list the newest items)"
            )
        kind = arg.text_arg(kind, "kind", MAX_KIND_CHARS)
        why = self.store.vocabulary().validate_search_kind(kind)
        if why:  # else: no results, indistinguishable from "nothing matches"
            raise InvalidItemError(why)
        subject = arg.text_arg(subject, "subject", MAX_SUBJECT_CHARS)
        limit = arg.count(limit, "limit", 1, MAX_RESULTS)
        explain = arg.flag(explain, "explain")
        min_relevance = arg.unit_interval(min_relevance, "min_relevance")
        if user is not None and user != "":
            user = arg.name_arg(user, "user")
        part = partition_name(partition) if partition not in (None, PARTITION_ALL) else partition
        self._check_open()
        run = self.searcher.hybrid_search_full if full else self.searcher.hybrid_search
        hits = run(
            query,
            kind,
            subject,
            part or "",
            limit,
            explain=explain,
            min_relevance=min_relevance,
            query_vector=vector,
        )
        if user:
            own = self.store.keyword_hits(
                query,
                kind,
                subject,
                limit,
                user_hash=user,
                own_only=True,
                partition=None if part == PARTITION_ALL else part or "",
            )
            mine = [SearchResult(it, h.score) for it, h in own[0]]
            # Only a note with a subject can be about another subject than the query names.
            named = (
                self.store.named_subjects(query)
                if any(r.item.subject for r in mine)
                else frozenset()
            )
            assign_relevance(mine, {h.id: h.score for _, h in own[0]}, 0.0, None, None, named)
            mine = [r for r in mine if r.relevance >= min_relevance]
            hits = merge_by_rank(mine, hits, limit)  # a user's own notes first on ties
        if self.hub is not None and hits:  # the hub's hit stream (private ids are dropped)
            self.store.notify_hit([h.item.id for h in hits], query, kind)
        return hits

    def recent(
        self, limit: int = 10, *, kind: str = "", partition: str | None = None
    ) -> list[Item]:
        """Active public items, newest first.

        ``partition`` narrows the list as it narrows a :meth:`search` (that
        partition's items, untagged and ``shared`` ones); unlike a search,
        ``None`` lists every partition's items. ``limit`` is
        1..:data:`~memstore.limits.MAX_RESULTS`.
        """
        limit = arg.count(limit, "limit", 1, MAX_RESULTS)
        kind = arg.text_arg(kind, "kind", MAX_KIND_CHARS)
        if partition not in (None, PARTITION_ALL):
            partition_name(partition)
        self._check_open()
        if partition is None:
            return self.store.recent(kind=kind, limit=limit)
        part = partition_name(partition) if partition != PARTITION_ALL else partition
        visible = self.searcher.config.visible or default_visible
        return self.store.recent(kind=kind, limit=limit, skip=lambda it: not visible(it, part))

    def context(
        self, anchor: str, max_depth: int = 3, *, reach: int = CONTEXT_REACH
    ) -> tuple[list[Item], list[ScoredItem]]:
        """What ``anchor`` (an id, a title or a query) activates through links.

        ``max_depth`` hops at most, 1..:data:`~memstore.limits.MAX_CONTEXT_DEPTH`;
        at most ``reach`` anchors and ``reach`` items reached (``0``: no bound),
        so a hub costs ``reach`` items: :meth:`context_within` says if it cut.
        """
        found = self.context_within(anchor, max_depth, reach=reach)
        return found.anchors, found.related

    def context_within(
        self, anchor: str, max_depth: int = 3, *, reach: int = CONTEXT_REACH
    ) -> Context:
        """:meth:`context` as a :class:`~memstore.graph.Context`: ``complete`` is ``False``
        when ``reach`` cut it short, else the answer is the unbounded walk's."""
        anchor = arg.text_arg(anchor, "anchor", MAX_QUERY_CHARS)
        max_depth = arg.count(max_depth, "max_depth", 1, MAX_CONTEXT_DEPTH)
        self._check_open()
        return self.store.context_within(anchor, max_depth, reach=reach)

    def consolidate(self, partition: str, *, apply: bool = False) -> ConsolidationReport:
        """Find near-duplicate knowledge in a partition; with ``apply``, retire all but the best."""
        name = arg.name_arg(partition, "partition")
        apply = arg.flag(apply, "apply")
        self._check_open()
        report = self.searcher.consolidate(partition_name(name), apply=apply)
        if report.error:
            raise MemstoreError(f"consolidate: {report.error}")
        return report

    # ------------------------------------------------------------- history

    def history(self, id: str) -> list[Version]:
        """Every version of ``id``, oldest first (needs a journal)."""
        return self._journal().history(arg.id_arg(id))

    def as_of(self, when: Lsn | _dt.datetime | str, *, partition: str | None = None) -> list[Item]:
        """The items as they were at a journal position or an aware datetime.

        ``when``: an :class:`~memstore.journal.Lsn`, an ``Hlc``,
        ``"wall_ms.counter"`` text, or an aware datetime, any moment (before
        1970 is before every write, past 2248 after every write). A position
        out of range raises :class:`~memstore.journal.InvalidLsnError`
        naming ``as_of`` and the range.

        ``partition`` keeps that partition's items and ``shared`` ones; unlike
        :meth:`search`, items with no partition are left out (``None`` keeps all).
        """
        part = None if partition in (None, PARTITION_ALL) else partition_name(partition)
        return self._journal().as_of(when, partition=part)

    def export(self, fp: IO[str], partition: str | None = None) -> int:
        """Write items with their history as NDJSON (a partition: its own only); how many."""
        fp = arg.writable(fp)
        part = None if partition in (None, PARTITION_ALL) else partition_name(partition)
        return self._journal().export(part, fp)

    def import_(self, fp: IO[str], *, check_rules: bool = False) -> int:
        """Load an :meth:`export` (validated whole, then written in one transaction).

        An import restores what the exported store held: every item comes
        back as it was, held only to what any stored item obeys (the record
        rule), not to the rules a write obeys, so an export always imports
        into an empty memory with the same config. ``check_rules=True`` holds
        every item to those too (knowledge rules, limits, ``Config.validate``):
        for a file from elsewhere. A bad file raises ``InvalidItemError``
        naming its line and changes nothing. Returns how many items it
        changed: an item whose versions are all on record already is
        unchanged, so importing a file twice returns 0 the second time.
        """
        journal = self._journal(writing="import")
        return journal.import_(arg.readable(fp), check_rules=check_rules)

    def purge(self, ids: Iterable[str]) -> list[str]:
        """Hard delete: erase every version of these items (not secure erasure of the disk)."""
        return self._journal(writing="purge").purge(arg.id_list(ids))

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run ``fn``, reads of this memory then writes, as one step on the current state.

        ``fn`` runs inside one ``store.batch()``: its writes commit together
        or not at all. In one process that alone makes a read and the write
        it decides one step. Several processes sharing a PostgreSQL journal
        each read their own store, which follows the others' writes a few
        milliseconds late; there the group is refused if another process
        wrote one of its ids since this one read it, and ``fn`` runs again
        once this process has caught up
        (:meth:`~memstore.journal.postgres.PostgresJournal.atomically`; after
        16 refusals in a row, :class:`~memstore.errors.WriteConflictError`).
        :meth:`update`, :meth:`delete`, :meth:`expire`, :meth:`supersede`,
        :meth:`refute`, :meth:`link` and ``add(dedup=True)`` run this way: of
        two processes deleting one item, exactly one is told it deleted it.
        ``fn`` may run more than once: it should only read and write this memory.
        Only the ids the group writes are checked: an item ``fn`` merely reads
        (a link's target) may have changed elsewhere meanwhile.

        :raises InvalidItemError: ``fn`` is not a plain function (a coroutine
            function's writes would run after the step, unchecked).
        """
        if not callable(fn) or inspect.iscoroutinefunction(fn):
            raise InvalidItemError(
                f"atomically takes a plain function of no arguments, got {arg.describe(fn)}"
            )
        self._check_open()

        def group() -> T:
            with self.store.batch():
                return fn()

        return self._atomic(group)

    def _atomic(self, fn: Callable[[], T]) -> T:
        """:meth:`atomically` for this class's own steps, each one write group already.

        No ``store.batch()`` around them: it would hold the store's lock over
        the host's validation and the reads before the write, which the
        store's own write takes for the group alone.
        """
        journal = self.journal
        return journal.atomically(fn) if isinstance(journal, JournalBase) else fn()

    def _journal(self, *, writing: str = "") -> Journal:
        """The journal, for a read or (``writing`` names it) a write a read-only memory refuses."""
        self._check_open()
        if self.journal is None:
            raise MemstoreError(
                "this Memory keeps no journal: give it a folder (Memory('data/')) "
                "or journal= to have history, as_of, export and import"
            )
        if writing and self.readonly:
            raise ReadOnlyError(
                f"this memory was opened read-only (readonly=True); {writing} was refused "
                "and nothing changed. Open the folder without readonly to write"
            )
        return self.journal

    # ---------------------------------------------------------- the rest

    def stats(self) -> MemoryStats:
        """Counts and counters: items, vectors, journal head, search statistics, hub."""
        self._check_open()
        return MemoryStats(
            items=len(self.store),
            active=self.store.count_active(),
            vectors=len(self.cells) if self.cells is not None else 0,
            head=self.journal.head() if self.journal is not None else None,
            search=dict(self.searcher.stats.ops()),
            hub=self.hub.stats() if self.hub is not None else None,
            vectors_pending=self.cells.pending if self.cells is not None else 0,
        )

    def subscribe(self, **options: Any) -> Subscription:
        """A subscription to the change hub (``Memory(hub=True)``); see :mod:`memstore_hub`.

        ``partition`` is checked as :meth:`search` checks it (``None`` or
        ``"*"``: every partition; ``""``: only what every partition sees): a
        name no item can carry raises :class:`InvalidItemError` rather than
        subscribing to a partition that never has an event.
        """
        self._check_open()
        if self.hub is None:
            raise MemstoreError("subscribe needs a hub: create the Memory with hub=True")
        partition = options.get("partition")
        if partition not in (None, "", PARTITION_ALL):
            options["partition"] = partition_name(partition)
        return self.hub.subscribe(**options)

    def close(self) -> None:
        """Detach and close the journal, the vector index and the hub (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            closers, self._closers = self._closers, []
        for close in reversed(closers):
            close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self.path) if self.path is not None else "in memory"
        return f"Memory({where}, {len(self.store)} items)"

    # ------------------------------------------------------------ helpers

    def _check_open(self) -> None:
        if self._closed:
            raise MemstoreError("this Memory is closed")

    def _refuse_after_close(self, changes: Sequence[Change]) -> None:
        """Undo a write group that commits after :meth:`close` began (a before-commit listener).

        ``close`` marks the memory closed before it detaches the journal, and
        the detach waits for the store's lock; so a group either commits (and
        is recorded) before the detach, or meets this check and is undone: a
        write is never acknowledged without its durable record. A group that
        only mirrors what another process recorded (a PostgreSQL follower's)
        records nothing, so it is let through until the detach stops the follower.
        """
        if self._closed and not all(c.mirrored for c in changes):
            raise MemstoreError("this Memory is closed; the write was not made")
