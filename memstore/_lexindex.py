"""The store's lexical index: a Lexicon plus per-document arrays for filters.

The :class:`~memstore.lexical.Lexicon` finds candidate documents per token;
this module scores them with numpy over integer slots (the sums and the cut:
:mod:`memstore._lexscore`) and applies the kind, subject and deadline filters
as vectorised masks, so a query costs O(candidates) in C-level set and array
operations, never a loop over all items.
Writes wait in a queue (:mod:`memstore._lexqueue`) and every read applies them
first, in one batch: texts split together, the vocabulary counted in one pass,
the filter columns written a column at a time.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import threading
from collections.abc import Iterable, Sequence
from itertools import compress
from operator import attrgetter, itemgetter
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from memstore import _wordbatch
from memstore._bm25 import bm25 as bm25_score
from memstore._bm25 import idf as bm25_idf
from memstore._bm25 import live_tokens
from memstore._gc import bulk_load
from memstore._lexcheck import check_index
from memstore._lexhits import LexicalColumns, LexicalHit, LexicalHits, SlotMap, tuple_hits
from memstore._lexqueue import QUEUE_MAX, Queued, WriteQueue
from memstore._lexscore import (
    NativeToken,
    QueryPlan,
    Scoring,
    Unranked,
    _accumulate,
    _kth_largest,
    native_rank,
    order_hits,
    plan_tokens,
)
from memstore._lexsnapshot import LexiconSnapshotError, read_lexicon, save_lexicon
from memstore._wordbatch import TextDoc
from memstore.item import Item
from memstore.lexical import TITLE_WEIGHT, Lexicon, token_weight
from memstore.tags import SHARED_TAG, partition_from_tags, service_from_tags
from memstore.text import event_date_words, words, words_many

__all__ = ["LexicalColumns", "LexicalHit", "LexicalHits", "LexicalIndex", "QueryPlan"]

_INF = float("inf")


_NO_HITS_SCORES = np.zeros(0, np.float64)
_NO_HITS_SCORES.flags.writeable = False


_NO_SLOTS = np.zeros(0, np.intp)
_NO_LEVELS = np.zeros(0, np.float64)
_BM25: Scoring = (1.0, 0.0, 0.0)
"""BM25 in the compiled rank: the sum of weight (idf) x level (length factor) as is, no
title bonus, every match covered."""
_Filters = tuple[str, str, Sequence[str], str | None]
"""A ranking's filters: kind, subject, hidden kinds, partition (see :meth:`LexicalIndex.rank`)."""


def _no_hits() -> LexicalHits:
    return LexicalHits((), (), _NO_HITS_SCORES)


class _Codes:
    """Interns strings to small ints ("" is 0) for vectorised equality tests."""

    def __init__(self) -> None:
        self._code: dict[str, int] = {"": 0}

    def code(self, s: str) -> int:
        c = self._code.get(s)
        if c is None:
            c = self._code[s] = len(self._code)
        return c

    def codes(self, names: list[str]) -> list[int]:
        """:meth:`code` of each of ``names``, by C-level lookups while every name is known."""
        got = list(map(self._code.get, names))
        return [self.code(s) for s in names] if None in got else cast("list[int]", got)

    def lookup(self, s: str) -> int:
        return self._code.get(s, -1)

    def __len__(self) -> int:
        return len(self._code)

    def names(self) -> list[str]:
        """Every string interned, in first-seen order, without ``""``."""
        return [s for s in self._code if s]


def _deadline_ts(dt: _dt.datetime | None) -> float:
    """A deadline as a timestamp; no deadline is +inf (never due)."""
    return dt.timestamp() if dt is not None else _INF


def _updated_ts(dt: _dt.datetime | None) -> float:
    """An update time as a timestamp; none is -inf (the oldest), as the store orders it."""
    return dt.timestamp() if dt is not None else -_INF


_KIND, _SUBJECT, _TAGS = itemgetter("kind"), itemgetter("subject"), itemgetter("tags")
_UPDATED, _STALE = itemgetter("updated_at"), itemgetter("stale_after")
_ID, _TEXT = itemgetter("id"), itemgetter("id", "title", "content", "event_date")
"""Getters of an item's fields from its ``__dict__`` (:meth:`LexicalIndex._set_columns`)."""

_DICT = attrgetter("__dict__")
_ITEM, _INDEX_ID, _REINDEX, _WORDS = (itemgetter(i) for i in range(4))
"""Getters of an item's ``__dict__`` and of a :class:`~memstore._lexqueue.Queued`'s fields,
for C-level maps over a batch (a pydantic model's attribute read passes its ``__getattr__``
hook, and a named tuple's field read is a bytecode step)."""

_CODE_TABLES = ("_kinds", "_subjects", "_partitions")
"""The :class:`_Codes` a snapshot saves with the filter columns."""


@functools.lru_cache(maxsize=4096)
def _date_words(event_date: str | None) -> tuple[str, ...]:
    """:func:`~memstore.text.event_date_words`, remembered: dates recur across items and batches.

    No date (``None`` or ``""``) has no words: every item's date is looked up
    here, in one C-level map over a batch.
    """
    return tuple(event_date_words(event_date)) if event_date else ()


def _documents(puts: Sequence[Queued], fields: Sequence[dict[str, Any]]) -> list[TextDoc]:
    """The queued puts as :meth:`Lexicon.index_texts` documents: each id, title and content
    (the writer's words when it had them, else the texts), and the content's extra words:
    the event date's (read once per distinct date) and, with ``index_id``, the id's own.

    ``fields``: each put's item's ``__dict__``. Built a column at a time, by C-level maps
    and ``zip``: no Python step per document unless a put carries its words or its id's.
    """
    if not puts:
        return []
    ids, titles, contents, whens = zip(*map(_TEXT, fields), strict=True)
    extras: list[Sequence[str]] = list(map(_date_words, whens))
    flags = list(map(_INDEX_ID, puts))
    if any(flags):
        id_words = iter(words_many(list(compress(ids, flags))))
        extras = [
            [*extra, *next(id_words)] if flag else extra
            for extra, flag in zip(extras, flags, strict=True)
        ]
    if any(map(_WORDS, puts)):  # a writer's words (a pair, never empty) replace the texts
        split = list(map(_WORDS, puts))
        titles = tuple(t if w is None else w[0] for t, w in zip(titles, split, strict=True))
        contents = tuple(c if w is None else w[1] for c, w in zip(contents, split, strict=True))
    return list(zip(ids, titles, contents, extras, strict=True))


class LexicalIndex:
    """Lexicon + per-slot metadata (kind, subject, service, recency, deadline)."""

    def __init__(self, *, compact_min: int = 4096, overlay_max: int = 4096) -> None:
        self._lexicon = Lexicon(compact_min=compact_min, overlay_max=overlay_max)
        self._kinds = _Codes()
        self._subjects = _Codes()  # subjects and service tag values share codes
        self._partitions = _Codes()
        cap = 64
        self._kind = np.zeros(cap, np.int32)
        self._subject = np.zeros(cap, np.int32)
        self._service = np.zeros(cap, np.int32)
        self._updated = np.zeros(cap, np.float64)
        self._stale = np.full(cap, _INF, np.float64)
        self._partition = np.zeros(cap, np.int32)
        self._shared = np.zeros(cap, np.bool_)
        # id -> the item indexed, and the ids indexed with their id's words
        # (index_id). The item is the store's, which never changes one in place
        # (it clones on the way in and out): putting the same object again is a
        # no-op. A flag set instead of a (item, flag) pair per id: one object
        # less per item for the cyclic collector to track and walk.
        self._text: dict[str, Item] = {}
        self._with_id: set[str] = set()
        # The last split() made: (title, content, their words), for the put
        # of the same strings that follows it (see split).
        self._split: tuple[str, str, tuple[list[str], list[str]]] | None = None
        self._subject_words: tuple[int, dict[str, list[tuple[str, frozenset[str]]]]] = (0, {})
        # Which subject codes a live item carries, for (lexicon generation,
        # metadata writes) as they were: a put that changes only an item's
        # subject leaves the lexicon's generation as it was.
        self._writes = 0
        self._live_codes: tuple[tuple[int, int], npt.NDArray[np.bool_]] | None = None
        # Writes wait here for the next read (see put), under this lock.
        self._queue = WriteQueue()
        self._lock = threading.RLock()
        self._lexicon.on_renumber(self._renumber)
        self._slot_map = SlotMap()  # for the hits handed over as columns (rank's columns)

    def named_subjects(self, query_words: Iterable[str]) -> frozenset[str]:
        """The live items' subjects (and ``service/`` values) whose every word is a query word.

        Codes are only ever added, so the word table is rebuilt when their
        number grows, not on every write; a subject whose items were all
        deleted (or changed to another subject) keeps its code and is dropped
        here by :meth:`_live_subject_codes`.
        """
        self.flush()
        found = self._named_codes(query_words)
        if not found:
            return frozenset()
        live = self._live_subject_codes()
        code = self._subjects.lookup
        return frozenset(name for name in found if live[code(name)])

    def _live_subject_codes(self) -> npt.NDArray[np.bool_]:
        """Per subject code, whether a live item carries it (as subject or service value).

        One pass over the slots per change of the index, then a lookup.
        """
        key = (self._lexicon.generation, self._writes)
        cached = self._live_codes
        if cached is not None and cached[0] == key and cached[1].size == len(self._subjects):
            return cached[1]
        n = min(self._lexicon.capacity, len(self._subject))
        alive = self._lexicon.alive_slots()[:n]
        live = np.zeros(len(self._subjects), np.bool_)
        live[self._subject[:n][alive]] = True
        live[self._service[:n][alive]] = True
        live[0] = False  # "": no subject
        self._live_codes = (key, live)
        return live

    def _named_codes(self, query_words: Iterable[str]) -> frozenset[str]:
        """Every interned subject (live or not) whose every word is a query word."""
        qwords = set(query_words)
        n, table = self._subject_words
        if n != len(self._subjects):
            table = {}
            for name in self._subjects.names():
                ws = frozenset(words(name))
                for w in ws:
                    table.setdefault(w, []).append((name, ws))
            self._subject_words = (len(self._subjects), table)
        return frozenset(
            name for w in qwords for name, ws in table.get(w, ()) if ws and ws <= qwords
        )

    def __len__(self) -> int:
        return len(self.lexicon)

    def __contains__(self, id: str) -> bool:
        with self._lock:
            return self._queue.holds(id, id in self._text)

    def _grow(self, need: int) -> None:
        cap = len(self._kind)
        if need <= cap:
            return
        new = max(need, cap * 2)
        for name in (
            "_kind",
            "_subject",
            "_service",
            "_updated",
            "_stale",
            "_partition",
            "_shared",
        ):
            old = getattr(self, name)
            arr = np.full(new, _INF if name == "_stale" else 0, old.dtype)
            arr[:cap] = old
            setattr(self, name, arr)

    _ARRAYS = ("_kind", "_subject", "_service", "_updated", "_stale", "_partition", "_shared")

    def _renumber(self, kept: npt.NDArray[np.intp]) -> None:
        """Follow a Lexicon compaction: new slot ``i`` was slot ``kept[i]``."""
        n = int(kept.size)
        for name in self._ARRAYS:
            arr = getattr(self, name)
            arr[:n] = arr[kept]
            arr[n:] = _INF if name == "_stale" else 0

    def ids_with_words(self, words: Iterable[str], kind: str) -> list[str]:
        """The ids of the indexed items of ``kind`` holding any of ``words``, sorted.

        The write gate's candidates: one pass over the words' postings and a
        mask on the kind, so the items of other kinds that share a word (a
        store of notes beside a few facts) cost nothing per item.
        """
        lex = self.lexicon  # every queued write applied
        with self._lock:
            code = self._kinds.lookup(kind)
            if code < 0:
                return []
            held = lex.mask_with_words(words)
            n = min(held.size, self._kind.size)
            slots = np.flatnonzero(held[:n] & (self._kind[:n] == code))
            ids = lex._ids
            return sorted(ids[s] or "" for s in slots.tolist())

    def split(self, item: Item) -> tuple[list[str], list[str]]:
        """``words(item.title)``, ``words(item.content)``, kept for the next :meth:`put`.

        A writer that needs an item's words before indexing it (the store's
        near-duplicate check) splits them here, and the :meth:`put` of the
        same title and content strings (tested by identity) takes them
        instead of splitting the text again. The lists must not be changed.
        """
        split = (words(item.title), words(item.content))
        self._split = (item.title, item.content, split)
        return split

    def put(self, item: Item, index_id: bool) -> None:
        """Index (or re-index) ``item`` by the next read; the text is re-split only when it changed.

        The write is queued (:mod:`memstore._lexqueue`) and applied with the
        others queued when anything reads the index, so a burst of writes is
        indexed in one batch and every read sees every write before it.
        Putting the very item object indexed under its id again (with the same
        ``index_id``) is a no-op: items must not change in place once put (the
        store's never do). A restore puts each item twice (the snapshot's load
        and the store's own pass), the second time for a dictionary lookup.
        """
        id = item.id
        kept, self._split = self._split, None
        split = None
        if kept is not None and kept[0] is item.title and kept[1] is item.content:
            split = kept[2]
        with self._lock:
            indexed = self._text.get(id)
            pending = self._queue.pending
            if indexed is None and id not in pending:
                # What the queue's put does with a document new to the index and the
                # queue, without its frame: a write's common case.
                pending[id] = tuple.__new__(Queued, (item, index_id, True, split))
                waiting = len(pending)
            else:
                waiting = self._queue.put(
                    item, index_id, indexed=indexed, indexed_flag=id in self._with_id, words=split
                )
            if waiting >= QUEUE_MAX:
                self.flush()

    def remove(self, id: str) -> None:
        """Drop ``id`` by the next read; unknown ids are a no-op."""
        with self._lock:
            self._queue.remove(id, indexed=id in self._text)

    @property
    def lexicon(self) -> Lexicon:
        """The lexicon, with every queued write applied."""
        self.flush()
        return self._lexicon

    @property
    def queued(self) -> int:
        """Writes queued and not yet applied (``0`` after any read)."""
        return len(self._queue)

    def flush(self) -> None:
        """Apply every queued write now (every read does first): the removes, then the
        puts in one batch.

        The cyclic collector is paused meanwhile: the batch's word sets and
        lists are thousands of containers alive at once, which would start
        young collections that promote them and so bring the next full
        collection (a walk of every stored item) nearer; reference counting
        frees them all at the end.
        """
        if not self._queue:  # the common read: nothing waits, no lock taken
            return
        with self._lock, bulk_load(collect=False):
            if not self._queue:
                return
            lex = self._lexicon
            text, with_id = self._text, self._with_id
            taken = self._queue.take()
            # The puts (a Queued is a non-empty tuple, a remove None), by C-level
            # maps: each step below is a column of the batch, not a loop over it.
            puts: list[Queued] = list(filter(None, taken.values()))
            if len(puts) != len(taken):
                for id, queued in taken.items():
                    if queued is None and text.pop(id, None) is not None:
                        with_id.discard(id)
                        lex.remove(id)
            if not puts:
                return
            items: list[Item] = list(map(_ITEM, puts))
            fields: list[dict[str, Any]] = list(map(_DICT, items))
            reindex = list(map(_REINDEX, puts))
            if all(reindex):
                lex.index_texts(_documents(puts, fields))
            elif any(reindex):
                lex.index_texts(
                    _documents(list(compress(puts, reindex)), list(compress(fields, reindex)))
                )
            ids: list[str] = list(map(_ID, fields))
            text.update(zip(ids, items, strict=True))
            # Each id is put once a batch: with its id's words exactly when its flag says.
            with_id.difference_update(ids)
            with_id.update(compress(ids, map(_INDEX_ID, puts)))
            # Read after every document is in: a compaction may have renumbered slots.
            self._set_columns(lex.slots_of(ids), fields)
            self._writes += len(puts)

    def _set_columns(self, slots: list[int], fields: list[dict[str, Any]]) -> None:
        """Write the per-slot filter columns of items at ``slots``, one assignment a column.

        The fields are read from the items' ``__dict__`` (``fields``) by C-level
        getters (an attribute read on a pydantic model passes its ``__getattr__``
        hook), and coded by dictionary lookups (a Python step only for a name new
        to a table). A column every item leaves empty (no tags, no deadline) is
        one scalar assignment.
        """
        self._grow(max(slots) + 1)
        at = np.array(slots, np.intp)
        self._kind[at] = self._kinds.codes(list(map(_KIND, fields)))
        self._subject[at] = self._subjects.codes(list(map(_SUBJECT, fields)))
        tags = list(map(_TAGS, fields))
        if any(tags):
            code = self._subjects.code
            part = self._partitions.code
            # What a list of tags places an item by (service code, partition code,
            # shared), worked out once per distinct list of the batch (a tenant's
            # items share theirs); codes enter their tables in the items' order.
            placed: dict[tuple[str, ...], tuple[int, int, bool]] = {}
            rows: list[tuple[int, int, bool]] = []
            for key in map(tuple, tags):
                got = placed.get(key)
                if got is None:
                    # No tags: no service, no partition (code 0 is ""), not shared.
                    service = code(service_from_tags(key) or "") if key else 0
                    got = placed[key] = (service, part(partition_from_tags(key)), SHARED_TAG in key)
                rows.append(got)
            services, partitions, shared = zip(*rows, strict=True)
            self._service[at] = services
            self._partition[at] = partitions
            self._shared[at] = shared
        else:
            self._service[at] = 0
            self._partition[at] = 0
            self._shared[at] = False
        self._updated[at] = [-_INF if t is None else t.timestamp() for t in map(_UPDATED, fields)]
        stale = list(map(_STALE, fields))
        if any(stale):  # a datetime is always true
            self._stale[at] = [_INF if t is None else t.timestamp() for t in stale]
        else:
            self._stale[at] = _INF

    def save_snapshot(self, path: str | os.PathLike[str], *, generation: int) -> None:
        """Write the index to ``path`` (see :mod:`memstore._lexsnapshot`) at ``generation``.

        The lexicon, and the filter columns of its (dense) slots with the
        strings their codes stand for, so a load derives nothing per item.
        """
        self.flush()

        def columns() -> dict[str, npt.NDArray[Any]]:
            n = self._lexicon.capacity  # dense: the save compacted first
            out: dict[str, npt.NDArray[Any]] = {
                f"x_{name[1:]}": getattr(self, name)[:n] for name in self._ARRAYS
            }
            # Whether each slot's id words are indexed: the store's config
            # decides it (id_prefix, skip_id_text), and a load must match it.
            with_id = self._with_id
            out["x_with_id"] = np.array([i in with_id for i in self._lexicon._ids[:n]], np.bool_)
            for name in _CODE_TABLES:
                strings = list(getattr(self, name)._code)
                if any("\0" in c for c in strings):
                    raise LexiconSnapshotError("a kind, subject or partition holds a NUL")
                out[f"x_codes{name}"] = np.frombuffer("\0".join(strings).encode(), np.uint8)
            return out

        save_lexicon(self._lexicon, path, generation=generation, extras=columns)

    @classmethod
    def from_snapshot(
        cls,
        path: str | os.PathLike[str],
        items: Iterable[tuple[Item, bool]],
        *,
        expect_generation: int | None = None,
        compact_min: int = 4096,
    ) -> LexicalIndex:
        """An index over ``items`` (with their ``index_id`` flags), read from ``path``.

        Nothing is derived per item: the lexicon and the filter columns come
        from the file, and each item is only matched to the slot of its id.
        The items must be exactly the snapshot's documents (same ids), else
        :class:`~memstore._lexsnapshot.LexiconSnapshotError`; that their text
        and filter fields are the ones indexed is what the generation vouches for.
        """
        lex, extras = read_lexicon(
            path, expect_generation=expect_generation, compact_min=compact_min
        )
        pairs = list(items)
        ids = [it.id for it, _ in pairs]
        slots = list(map(lex._slot_of.get, ids))
        if len(pairs) != len(lex) or None in slots:
            raise LexiconSnapshotError("the snapshot's documents are not the items given")
        saved = extras.get("x_with_id")
        flags = np.fromiter((flag for _, flag in pairs), np.bool_, len(pairs))
        if (
            saved is None
            or saved.dtype != np.bool_
            or saved.shape != (len(lex),)
            or not np.array_equal(saved[np.fromiter(slots, np.intp, len(slots))], flags)
        ):
            # Indexed with another choice of which ids' words count (the
            # store's id_prefix or skip_id_text changed): re-index.
            raise LexiconSnapshotError("the snapshot indexed other ids' words than asked")
        # The items' own id strings in place of the file's equal copies: a hit's id then
        # finds its entry in the store's dictionaries (and the search snapshot's) by
        # identity, where an equal copy costs a comparison of its characters, a cache
        # miss each in a deep pool.
        held = lex._ids
        for id, slot in zip(ids, cast("list[int]", slots), strict=True):
            held[slot] = id
        lex._slot_of = {cast("str", held[slot]): slot for slot in lex._slot_of.values()}
        index = cls(compact_min=compact_min)
        index._lexicon = lex
        lex.on_renumber(index._renumber)
        index._install(extras, len(lex))
        index._text = {it.id: it for it, _ in pairs}
        index._with_id = {it.id for it, flag in pairs if flag}
        return index

    def _install(self, extras: dict[str, npt.NDArray[Any]], n: int) -> None:
        """Take the filter columns of a snapshot of ``n`` dense slots (checked)."""
        try:
            codes = {
                name: extras[f"x_codes{name}"].tobytes().decode().split("\0")
                for name in _CODE_TABLES
            }
            cols = {name: extras[f"x_{name[1:]}"] for name in self._ARRAYS}
        except (KeyError, UnicodeDecodeError) as e:
            raise LexiconSnapshotError(f"snapshot lacks the filter columns: {e}") from e
        for name, strings in codes.items():
            if not strings or strings[0] != "" or len(set(strings)) != len(strings):
                raise LexiconSnapshotError(f"snapshot code table {name} is inconsistent")
            table = _Codes()
            table._code = dict(zip(strings, range(len(strings)), strict=True))
            setattr(self, name, table)
        limits = {
            "_kind": len(codes["_kinds"]),
            "_subject": len(codes["_subjects"]),
            "_service": len(codes["_subjects"]),
            "_partition": len(codes["_partitions"]),
        }
        self._grow(n)
        for name, col in cols.items():
            mine = getattr(self, name)
            if col.dtype != mine.dtype or col.shape != (n,):
                raise LexiconSnapshotError(f"snapshot column {name} has the wrong type or size")
            top = limits.get(name)
            if top is not None and n and (col.min() < 0 or col.max() >= top):
                raise LexiconSnapshotError(f"snapshot column {name} holds an unknown code")
            mine[:n] = col

    def plan(self, tokens: Sequence[str]) -> QueryPlan:
        """Match every token once and weigh it by the documents it matches."""
        lex = self.lexicon
        n = len(lex)
        matches = tuple(lex.match_token(t) for t in tokens)
        weights = tuple(token_weight(m.df, n) for m in matches)
        fuzzy_ok = tuple(m.fuzzy_ok for m in matches)
        return QueryPlan(tuple(tokens), matches, weights, fuzzy_ok)

    def rank(
        self,
        plan: QueryPlan,
        *,
        kind: str,
        subject: str,
        hidden_kinds: Sequence[str],
        now_ts: float,
        limit: int | None,
        partition: str | None = None,
        columns: bool = False,
    ) -> LexicalHits | LexicalColumns:
        """Score the plan's candidates, filter them, and return the best ``limit``.

        Order: score descending, then the most recently updated, then id.
        ``limit=None`` returns every match. ``partition`` keeps the items tagged
        for it, the untagged ones and the ``shared`` ones (``None``: no filter).
        ``columns``: the compiled rank may return the same hits as
        :class:`~memstore._lexhits.LexicalColumns` (the searcher's lean path).

        One accumulation over the concatenated matches of every token
        (``np.bincount``, summing in token order as a per-token loop would),
        the filters as masks over the candidates, a partition at the cut, and
        Python objects only for the hits returned.
        """
        total_w = plan.total_weight
        cap = self.lexicon.capacity
        if total_w <= 0.0 or cap == 0:
            return _no_hits()
        filters = (kind, subject, hidden_kinds, partition)
        native = _wordbatch.speedups
        if native is not None:
            try:
                tokens, scoring = plan_tokens(plan)
                return self._rank_native(native, tokens, scoring, filters, now_ts, limit, columns)
            except Unranked:
                pass
        found = _accumulate(plan, cap)
        if found is None:
            return _no_hits()
        cand, acc, title, covered, fuzzy = found
        scores = (acc + TITLE_WEIGHT * title) / ((1.0 + TITLE_WEIGHT) * total_w)
        return self._cut(cand, scores, covered, fuzzy, now_ts, limit, filters)

    def _cut(
        self,
        cand: npt.NDArray[np.intp],
        scores: npt.NDArray[np.float64],
        covered: npt.NDArray[np.intp],
        fuzzy: npt.NDArray[np.bool_],
        now_ts: float,
        limit: int | None,
        filters: _Filters,
    ) -> LexicalHits:
        """The scored candidates that pass the filters, the best ``limit`` of them in order.

        The ones that pass are taken by position: two gathers, where masking
        every column took five; ``covered`` and ``fuzzy`` are read at the
        hits' positions alone.
        """
        keep = self._filter_mask(cand, self._stale[cand] > now_ts, *filters)
        passed: npt.NDArray[np.intp] | None = None
        if keep is not None:
            passed = np.flatnonzero(keep)
            cand, scores = cand[passed], scores[passed]
        if cand.size == 0:
            return _no_hits()
        pos: npt.NDArray[np.intp] = np.arange(cand.size)
        if limit is not None and cand.size > limit:
            # Keep everything tied with the limit-th score, so the tie-breaks
            # below see the whole tie.
            pos = np.flatnonzero(scores >= _kth_largest(scores, limit))
        at = order_hits(cand, scores, pos, limit, self._updated, self._lexicon._ids)
        found_at = at if passed is None else passed[at]
        return self._hits(cand[at], scores[at], covered[found_at], fuzzy[found_at])

    def _hits(
        self,
        slots: npt.NDArray[np.intp],
        scores: npt.NDArray[np.float64],
        covered: npt.NDArray[np.intp],
        fuzzy: npt.NDArray[np.bool_],
    ) -> LexicalHits:
        """The hits at live ``slots``, in order, with their columns (``scores`` is kept)."""
        # One conversion per column (the same Python numbers as per-element casts),
        # the ids in one C pass (a live candidate's slot always holds its id).
        held: tuple[str | None, ...] = tuple(map(self._lexicon._ids.__getitem__, slots.tolist()))
        hit_ids = cast("tuple[str, ...]", held)
        if None in held:  # pragma: no cover - a candidate is a live slot
            hit_ids = tuple(i or "" for i in held)
        scores.flags.writeable = False
        hits = tuple_hits(hit_ids, scores.tolist(), covered.tolist(), fuzzy.tolist())
        return LexicalHits(hits, hit_ids, scores)

    def bm25(
        self,
        tokens: Sequence[str],
        *,
        kind: str,
        subject: str,
        hidden_kinds: Sequence[str],
        now_ts: float,
        limit: int,
        partition: str | None = None,
        columns: bool = False,
    ) -> LexicalHits | LexicalColumns:
        """The best ``limit`` documents by BM25 of the tokens' words (:mod:`memstore._bm25`).

        The same filters and the same order on equal scores as :meth:`rank`
        (the most recently updated, then id); a hit's ``covered`` counts the
        tokens it holds, and no hit is fuzzy. ``N``, ``df`` and ``avgdl`` are
        the whole index's live documents', as the lexicon's token weights are.
        Ranked by the compiled ``lex_rank`` where it is built (each word's
        documents at their length factor, as levels; ``columns``: as :meth:`rank`'s), else
        with numpy.
        """
        lex = self.lexicon
        df = lex._df
        held = [w for w in dict.fromkeys(tokens) if w in df]
        if not held or limit < 1:
            return _no_hits()
        n = len(lex)
        idfs = [bm25_idf(n, df[w]) for w in held]
        alive = lex.alive_slots()
        words = live_tokens(lex.word_postings(held), idfs, alive, lex.length_factors())
        filters = (kind, subject, hidden_kinds, partition)
        native = _wordbatch.speedups
        if native is not None:
            empty = (_NO_SLOTS, _NO_LEVELS)
            native_tokens = tuple((s, f, *empty, w) for s, f, w in words)
            try:  # each word's documents at their length factor, as levels; all covered
                return self._rank_native(
                    native, native_tokens, _BM25, filters, now_ts, limit, columns
                )
            except Unranked:
                pass
        cand, scores, covered = bm25_score(words, lex.capacity)
        fuzzy = np.zeros(cand.size, np.bool_)
        return self._cut(cand, scores, covered, fuzzy, now_ts, limit, filters)

    def _rank_native(
        self,
        native: Any,
        tokens: tuple[NativeToken, ...],
        scoring: Scoring,
        filters: _Filters,
        now_ts: float,
        limit: int | None,
        columns: bool = False,
    ) -> LexicalHits | LexicalColumns:
        """The tokens ranked by the compiled kernel (:func:`~memstore._lexscore.native_rank`),
        as tuples, or as columns (``columns``).

        :raises Unranked: it cannot take them; the caller ranks with numpy.
        """
        kind, subject, hidden_kinds, partition = filters
        hidden = () if kind else tuple(c for k in hidden_kinds if (c := self._kinds.lookup(k)) >= 0)
        codes = (
            self._kinds.lookup(kind) if kind else None,
            self._subjects.lookup(subject) if subject else None,
            self._partitions.lookup(partition) if partition is not None else None,
        )
        cols: tuple[npt.NDArray[Any], ...] = (self._stale, self._updated, self._kind)
        cols += (self._subject, self._service, self._partition, self._shared)
        ids = self._lexicon._ids
        run = (native, tokens, scoring, cols, codes, hidden, now_ts, limit, ids)
        if columns:
            raw = native_rank(*run, None)
            return _no_hits() if raw is None else LexicalColumns(raw, ids, self._slot_map)
        got = native_rank(*run, LexicalHit)
        return _no_hits() if got is None else LexicalHits(*got)

    def _filter_mask(
        self,
        cand: npt.NDArray[np.intp],
        keep: npt.NDArray[np.bool_],
        kind: str,
        subject: str,
        hidden_kinds: Sequence[str],
        partition: str | None,
    ) -> npt.NDArray[np.bool_] | None:
        """Which candidates pass the filters (``None``: all of them); ``keep``, the
        candidates not past their deadline, is narrowed in place."""
        if kind:
            keep &= self._kind[cand] == self._kinds.lookup(kind)
        elif hidden_kinds:
            codes = self._kind[cand]
            for k in hidden_kinds:
                c = self._kinds.lookup(k)
                if c >= 0:
                    keep &= codes != c
        if subject:
            code = self._subjects.lookup(subject)
            keep &= (self._subject[cand] == code) | (self._service[cand] == code)
        if partition is not None:
            code = self._partitions.lookup(partition)
            part = self._partition[cand]
            keep &= (part == code) | (part == 0) | self._shared[cand]
        return None if keep.all() else keep

    def _check(self, expected: dict[str, Item], index_id: dict[str, bool]) -> None:
        """Assert the index holds exactly ``expected`` with matching metadata."""
        check_index(self, expected, index_id)
