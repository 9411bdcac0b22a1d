"""The native tools: memstore's own verbs, shaped for a model.

``remember`` writes (a restatement merges as :meth:`Memory.add` does),
``recall`` searches (hybrid, bounded by ``max_chars``, optionally as of a past
time), and the rest read, change, link and list memories. Every handler is a
translation onto :class:`~memstore.memory.Memory`; partitions come from the
caller (``--partition`` or the HTTP token's tenant).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ulid import ULID

from memstore.config import DEFAULT_ID_PREFIX
from memstore.errors import ItemNotFoundError
from memstore.graph import DEFAULT_CONTEXT_DECAY
from memstore.item import Item, ThoughtLink
from memstore.journal.hlc import InvalidLsnError, Lsn, read_as_of
from memstore.limits import CONTEXT_REACH, MAX_ID_CHARS
from memstore.memory import Memory
from memstore.render import explanation_text, share_budget
from memstore.search import SearchResult, default_visible
from memstore.tags import PARTITION_ALL

from .arguments import (
    DEFAULT_KIND,
    ForgetArgs,
    GetArgs,
    HistoryArgs,
    LinkArgs,
    RecallArgs,
    RecentArgs,
    RelatedArgs,
    RememberArgs,
    UpdateArgs,
    is_placement_tag,
)
from .shapes import (
    Forgotten,
    History,
    Items,
    Linked,
    MemoryOut,
    Recall,
    Related,
    RelatedOut,
    Remembered,
    hit_of,
    memory_of,
    version_of,
)
from .toolkit import SCOPE_FORGET, SCOPE_WRITE, Caller, ToolError, ToolSpec

__all__ = ["native_tools", "parse_as_of"]

_RELATED_ANCHORS = 3
"""How many best matches of a query become the starting points of ``related``."""


def parse_as_of(text: str) -> Lsn:
    """An ``as_of`` argument as the journal position it names, or a :class:`ToolError`.

    The engine's reading (:func:`~memstore.journal.hlc.read_as_of`): a log
    position ``wall_ms.counter`` or an RFC 3339 time with a zone, any time
    (past 2248 is after every write).

    >>> parse_as_of("1735689600000.0")
    Lsn(wall_ms=1735689600000, counter=0)
    >>> parse_as_of("2025-01-01T00:00:00Z").wall_ms
    1735689600000
    """
    try:
        return read_as_of(text)
    except InvalidLsnError as e:
        raise ToolError(str(e)) from None


class _Native:
    """The handlers, over one :class:`Memory`."""

    def __init__(self, memory: Memory) -> None:
        self.mem = memory

    # ------------------------------------------------------------ helpers

    @staticmethod
    def _part(caller: Caller) -> str:
        return caller.partition if caller.partition is not None else PARTITION_ALL

    def _visible(self, id: str, caller: Caller) -> Item | None:
        """The item, when it exists and the caller's partition may see it."""
        item = self.mem.get(id)
        if item is None or not default_visible(item, self._part(caller)):
            return None
        return item

    def _need(self, id: str, caller: Caller) -> Item:
        item = self._visible(id, caller)
        if item is None:
            raise ItemNotFoundError(id)
        return item

    # ------------------------------------------------------------- writes

    def remember(self, a: RememberArgs, caller: Caller) -> Remembered:
        for link in a.links:  # every target first: a bad one writes nothing
            self._need(link.to_id, caller)
        fields: dict[str, Any] = {
            "kind": a.kind or DEFAULT_KIND,
            "title": a.title,
            "subject": a.subject,
            "tags": list(a.tags),
            "event_date": a.event_date,
            "confidence": a.confidence,
        }
        if a.links:
            fields["links"] = [ThoughtLink(to_id=k.to_id, relation=k.relation) for k in a.links]
        # A fresh id of our own, as the store would mint it: when the stored
        # item carries another, the restatement was merged into that memory.
        fresh = f"{DEFAULT_ID_PREFIX}{ULID()}"

        def step() -> Remembered:  # the merge and its links: one step on the current state
            stored = self.mem.add(a.content, partition=caller.partition, id=fresh, **fields)
            merged = stored.id if stored.id != fresh else None
            if merged is not None:  # a merge keeps the old memory's links: add the new ones
                for k in a.links:
                    if k.to_id != merged:
                        self.mem.link(merged, k.to_id, k.relation)
            return Remembered(id=stored.id, merged_into=merged)

        return self.mem.atomically(step)

    def update(self, a: UpdateArgs, caller: Caller) -> Items:
        """Change the fields given; new ``tags`` replace the free tags, placement stays."""
        fields = {
            k: v
            for k, v in a.model_dump(exclude={"id"}).items()
            if v is not None and k in a.model_fields_set
        }
        if not fields:
            raise ToolError("update_memory needs at least one field to change besides id")

        def step() -> Items:
            # Read the placement and write it back as one step: under atomically,
            # a server sharing the journal that changed the memory meanwhile makes
            # this run again on its version instead of being overwritten.
            current = self._need(a.id, caller)
            changes = dict(fields)
            if "tags" in changes:
                changes["tags"] = [*changes["tags"], *placement_of(current)]
            return Items(items=[memory_of(self.mem.update(a.id, **changes))], missing=[])

        return self.mem.atomically(step)

    def forget(self, a: ForgetArgs, caller: Caller) -> Forgotten:
        ids = list(dict.fromkeys(a.ids))
        present = [i for i in ids if self._visible(i, caller) is not None]
        done = [i for i in present if self.mem.delete(i)]
        # Missing: never there, or deleted by another call between the look and the delete.
        return Forgotten(forgotten=done, missing=[i for i in ids if i not in done])

    def link(self, a: LinkArgs, caller: Caller) -> Linked:
        self._need(a.from_id, caller)
        self._need(a.to_id, caller)
        ok = self.mem.link(a.from_id, a.to_id, a.relation)
        return Linked(from_id=a.from_id, to_id=a.to_id, relation=a.relation, linked=ok)

    # -------------------------------------------------------------- reads

    def recall(self, a: RecallArgs, caller: Caller) -> Recall:
        if a.as_of:
            hits, past = self._search_past(a, caller)
        else:
            hits = self.mem.search(
                a.query,
                partition=self._part(caller),
                kind=a.kind,
                subject=a.subject,
                limit=a.limit,
                explain=a.explain,
                min_relevance=a.min_relevance,
            )
            past = {}
        contents, cut = share_budget([h.item.content for h in hits], a.max_chars)
        out = []
        for h, content in zip(hits, contents, strict=False):
            item = past.get(h.item.id, h.item)
            why = None
            if a.explain:
                why = explanation_text(h.explanation) if h.explanation else "found"
            out.append(hit_of(item, content, h.score, why, h.relevance))
        return Recall(hits=out, truncated=cut)

    def _search_past(
        self, a: RecallArgs, caller: Caller
    ) -> tuple[list[SearchResult], dict[str, Item]]:
        """Search the memory as it was at ``as_of``: a lexical search over that state.

        The past state is rebuilt in a scratch in-memory :class:`Memory`
        (O(items at that time) per call); the hits carry the past versions.
        """
        when = parse_as_of(a.as_of)
        part = self._part(caller)
        then = [it for it in self.mem.as_of(when) if default_visible(it, part)]
        with Memory(embedder=None) as scratch:
            if then:
                scratch.add_many(then)
            hits = scratch.search(
                a.query,
                partition=PARTITION_ALL,
                kind=a.kind,
                subject=a.subject,
                limit=a.limit,
                explain=a.explain,
                min_relevance=a.min_relevance,
            )
        return hits, {it.id: it for it in then}

    def get(self, a: GetArgs, caller: Caller) -> Items:
        found, missing = [], []
        for id in dict.fromkeys(a.ids):
            item = self._visible(id, caller)
            if item is None:
                missing.append(id)
            else:
                found.append(memory_of(item))
        return Items(items=found, missing=missing)

    def recent(self, a: RecentArgs, caller: Caller) -> Items:
        items = self.mem.recent(a.limit, kind=a.kind, partition=self._part(caller))
        return Items(items=[memory_of(it) for it in items], missing=[])

    def related(self, a: RelatedArgs, caller: Caller) -> Related:
        part = self._part(caller)
        anchor = self._visible(a.id_or_query, caller) if _may_be_id(a.id_or_query) else None
        if anchor is not None:
            anchors = [anchor.id]
        else:
            hits = self.mem.search(a.id_or_query, partition=part, limit=_RELATED_ANCHORS)
            anchors = [h.item.id for h in hits]
        # One walk from every anchor: each item keeps its best path from any of
        # them, as a walk per anchor merged by best score would give it.
        # Only the items answered are copied: the others the walk reached are not.
        reached, complete = self.mem.store.traverse_within(
            anchors,
            a.depth,
            DEFAULT_CONTEXT_DECAY,
            reach=CONTEXT_REACH,
            keep=lambda it: default_visible(it, part),
            limit=a.limit,
            through=lambda it: default_visible(it, part),  # the caller's graph, no other's
        )
        items = [
            RelatedOut(**memory_of(s.item).model_dump(), activation=round(s.score, 6))
            for s in reached
        ]
        return Related(anchors=anchors, items=items, complete=complete)

    def history(self, a: HistoryArgs, caller: Caller) -> History:
        versions = self.mem.history(a.id)
        if not versions:
            raise ItemNotFoundError(a.id)
        part = self._part(caller)
        last = next((v.item for v in reversed(versions) if v.item is not None), None)
        if last is not None and not default_visible(last, part):
            raise ItemNotFoundError(a.id)
        return History(versions=[version_of(v) for v in versions])


def placement_of(item: Item) -> list[str]:
    """The item's placement tags (partition, owner, ``shared``), which an update keeps."""
    return [t for t in item.tags if is_placement_tag(t)]


# ------------------------------------------------------------- renderings


def _line(m: MemoryOut, extra: str = "") -> str:
    head = f"[{m.kind}] {m.title}".rstrip()
    body = m.content.replace("\n", " ")
    if len(body) > 200:
        body = body[:199] + "…"
    return f"- {head}: {body} (id {m.id}{extra})"


def _render_recall(r: Recall) -> str:
    if not r.hits:
        return "No memories matched."
    lines = [
        f"{n}. [{h.kind}] {h.title + ': ' if h.title else ''}{h.content} "
        f"(id {h.id}, score {h.score:.3f})" + (f"\n   why: {h.why}" if h.why else "")
        for n, h in enumerate(r.hits, 1)
    ]
    if r.truncated:
        lines.append("(content cut to fit max_chars; get_memory returns a memory in full)")
    return "\n".join(lines)


def _render_items(r: Items) -> str:
    lines = [_line(m) for m in r.items] or ["No memories."]
    if r.missing:
        lines.append(f"Not found: {', '.join(r.missing)}")
    return "\n".join(lines)


def _may_be_id(text: str) -> bool:
    """Whether ``related``'s ``id_or_query`` may name a memory, or is only words.

    Text longer than an id (:data:`~memstore.limits.MAX_ID_CHARS`) or holding a
    NUL character names no memory: looking it up as an id would refuse the
    call ("id is 300 characters"), where the words are what to search.

    >>> _may_be_id("memory-01J"), _may_be_id("why " * 100)
    (True, False)
    """
    return len(text) <= MAX_ID_CHARS and "\x00" not in text


def _render_related(r: Related) -> str:
    if not r.anchors:
        return "Nothing to start from: no memory has that id or matches those words."
    lines = [_line(m, f", activation {m.activation:.3f}") for m in r.items]
    if not r.complete:
        lines.append(f"(the walk stopped at {CONTEXT_REACH} linked memories: some may be missing)")
    return "\n".join([f"From {', '.join(r.anchors)}:", *(lines or ["nothing linked."])])


def _render_history(r: History) -> str:
    return "\n".join(
        f"{v.at} {v.op} (lsn {v.lsn})"
        + (f": {v.item.title or v.item.content[:80]}" if v.item else "")
        for v in r.versions
    )


def _render_remembered(r: Remembered) -> str:
    if r.merged_into:
        return f"Merged into existing memory {r.merged_into}."
    return f"Remembered as {r.id}."


def _render_forgotten(r: Forgotten) -> str:
    text = f"Forgot {', '.join(r.forgotten)}." if r.forgotten else "Forgot nothing."
    return text + (f" Not found: {', '.join(r.missing)}." if r.missing else "")


def _render_linked(r: Linked) -> str:
    if not r.linked:
        return f"Not linked: {r.from_id} is at its link cap and the new link weighs no more."
    return f"Linked {r.from_id} -{r.relation}-> {r.to_id}."


def native_tools(memory: Memory) -> list[ToolSpec[Any, Any]]:
    """The native tools over ``memory``, in the order ``tools/list`` shows them."""
    h = _Native(memory)
    spec: Callable[..., ToolSpec[Any, Any]] = ToolSpec
    return [
        spec(
            "remember",
            "Remember",
            "Store one memory (a fact, decision, preference or observation) durably. "
            "A restatement of an existing fact updates it instead of duplicating it "
            "(merged_into says which). Returns the memory's id.",
            RememberArgs,
            Remembered,
            h.remember,
            _render_remembered,
            scope=SCOPE_WRITE,
        ),
        spec(
            "recall",
            "Recall",
            "Search memories by meaning and keywords (hybrid search), best first. "
            "Content is cut so that all hits together stay within max_chars. "
            "Use as_of to search memory as it was at a past time.",
            RecallArgs,
            Recall,
            h.recall,
            _render_recall,
            idempotent=True,
        ),
        spec(
            "get_memory",
            "Get memories",
            "Fetch memories in full by id.",
            GetArgs,
            Items,
            h.get,
            _render_items,
            idempotent=True,
        ),
        spec(
            "update_memory",
            "Update a memory",
            "Change fields of a memory; omitted fields keep their value. "
            "The old version stays in its history.",
            UpdateArgs,
            Items,
            h.update,
            _render_items,
            scope=SCOPE_WRITE,
            idempotent=True,
        ),
        spec(
            "forget",
            "Forget",
            "Delete memories by id (soft: history keeps every version).",
            ForgetArgs,
            Forgotten,
            h.forget,
            _render_forgotten,
            scope=SCOPE_FORGET,
            idempotent=True,
            destructive=True,
        ),
        spec(
            "link",
            "Link memories",
            "Link one memory to another (triggers, caused_by, correlates_with, precedes, "
            "explains, contradicts); related follows links.",
            LinkArgs,
            Linked,
            h.link,
            _render_linked,
            scope=SCOPE_WRITE,
            idempotent=True,
        ),
        spec(
            "related",
            "Related memories",
            "Memories linked to a memory (give its id) or to the best matches of some words, "
            "up to depth links away, strongest activation first.",
            RelatedArgs,
            Related,
            h.related,
            _render_related,
            idempotent=True,
        ),
        spec(
            "history",
            "History of a memory",
            "Every version of a memory, oldest first, with when it was written.",
            HistoryArgs,
            History,
            h.history,
            _render_history,
            idempotent=True,
        ),
        spec(
            "recent",
            "Recent memories",
            "The newest active memories, newest first.",
            RecentArgs,
            Items,
            h.recent,
            _render_items,
            idempotent=True,
        ),
    ]
