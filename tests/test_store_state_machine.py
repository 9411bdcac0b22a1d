"""A model-based test of the Store, and lexical search against a brute-force reference.

:class:`StoreMachine` drives random writes (upserts, dedup upserts, deletes,
expiry, supersession, links, refutation, mirrors, mutations, clock moves and
batches that sometimes raise) against a plain model of what every item should
hold, and after every step checks every index (``Store._check``), the ids, the
fields the model predicts, visibility, counts and the number of changes each
step reported to the store's observers.

``brute_force_hits`` is the reference for lexical search: it scores every
indexed item with :func:`~memstore.lexical.score_document`, weighting each
token by :func:`~memstore.lexical.token_weight` of the number of indexed items
the token matches at any level (counted by brute force too), and sorts by
score, then the most recently updated, then id.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from memstore import (
    MAX_MODEL_LINKS,
    REFUTED_DATA_KEY,
    VALID_THOUGHT_LINK_RELATIONS,
    Config,
    InvalidItemError,
    Item,
    ItemNotFoundError,
    Store,
    ThoughtLink,
)
from memstore.lexical import LEVEL_EDIT, score_document, token_weight, word_level
from memstore.limits import MAX_REFS
from memstore.neardup import dedup_comparable, near_duplicate_tokens
from memstore.store import DEDUP_ELIGIBLE_KINDS
from memstore.tags import restored_origin, service_tag_value
from memstore.text import dedup_tokens, event_date_words, kw_tokens, normalize_query, words
from memstore.validate import validate_base
from memstore.vocabulary import Vocabulary

T0 = dt.datetime(2024, 1, 1, 9, 0, tzinfo=dt.UTC)
HYPOTHESIS_TTL = dt.timedelta(hours=24)
ID_POOL = ("n0", "n1", "n2", "n3", "n4", "n5")
OWNERS = ("u1", "u2")
KINDS = ("note", "event", "hypothesis", "stable_fact", "watch_item")
RELATIONS = VALID_THOUGHT_LINK_RELATIONS
VOCAB = (
    "payment api timeout timeouts ledger deploy deployment retry retries box boxes batch "
    "batches queue latency database pool cache auth token the of café cafe naïve Привет мир "
    "数据库 编程 🚀 HTTPServer q3 9:30 0.3 straße Ωmega"
).split()
TYPOS = (
    "paymnet timeuot deplyo ledgr databse deploying paymentapi queuelatency retrys boxs "
    "cafè привет serv pay dep 数据 ment"
).split()
BIG = 10_000
PLURAL_TOGGLE = {
    "retries": "retry",
    "retry": "retries",
    "boxes": "box",
    "box": "boxes",
    "batches": "batch",
    "batch": "batches",
    "timeouts": "timeout",
    "timeout": "timeouts",
}


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


# ------------------------------------------------------------------ reference


def is_minted(id: str) -> bool:
    return id.startswith("memory-")


def doc_words(it: Item) -> list[str]:
    """The words the store indexes for a public item: title, content, then its id."""
    ws = words(it.title) + words(it.content) + event_date_words(it.event_date)
    return ws if is_minted(it.id) else ws + words(it.id)


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    covered: int
    fuzzy: bool


def stored_items(store: Store) -> list[Item]:
    """Copies of every stored item, private ones included (through the public lock)."""
    store.lock.acquire()
    try:
        return store.items_locked()
    finally:
        store.lock.release()


def _update_ts(it: Item) -> float:
    return it.updated_at.timestamp() if it.updated_at is not None else float("-inf")


def brute_force_hits(
    store: Store,
    query: str,
    now: dt.datetime,
    *,
    kind: str = "",
    subject: str = "",
    user_hash: str = "",
) -> list[Hit]:
    """What ``store.keyword_hits(query, kind, subject, BIG, user_hash=...)`` must return."""
    tokens = kw_tokens(normalize_query(query))
    if not tokens:
        return []
    items = stored_items(store)
    indexed = [it for it in items if it.status == "active" and it.scope != "private"]
    docs = {it.id: (doc_words(it), words(it.title)) for it in indexed}
    vocabulary = {w for dw, _ in docs.values() for w in dw}
    fuzzy_ok = [not any(word_level(t, w) >= LEVEL_EDIT for w in vocabulary) for t in tokens]
    df = [
        sum(1 for dw, tw in docs.values() if score_document([t], [1.0], dw, tw, [fz])[0] > 0)
        for t, fz in zip(tokens, fuzzy_ok, strict=True)
    ]
    weights = [token_weight(d, len(indexed)) for d in df]

    def admitted(it: Item) -> bool:
        if it.is_expired(now) or (kind and it.kind != kind):
            return False
        return not subject or it.subject == subject or service_tag_value(it) == subject

    hits: list[tuple[Hit, Item]] = []
    for it in indexed:
        if admitted(it):
            s, cov, fz = score_document(tokens, weights, *docs[it.id], fuzzy_ok)
            if s > 0:
                hits.append((Hit(it.id, s, cov, fz), it))
    if user_hash:
        for it in items:
            if it.scope != "private" or f"user:{user_hash}" not in it.tags:
                continue
            if it.status != "active" or not admitted(it):
                continue
            title = words(it.title)
            s, cov, fz = score_document(
                tokens,
                weights,
                title + words(it.content) + event_date_words(it.event_date),
                title,
                fuzzy_ok,
            )
            if s > 0:
                hits.append((Hit(it.id, s, cov, fz), it))
    hits.sort(key=lambda p: (-p[0].score, -_update_ts(p[1]), p[0].id))
    return [h for h, _ in hits]


def assert_search_matches_brute_force(
    store: Store,
    query: str,
    now: dt.datetime,
    *,
    kind: str = "",
    subject: str = "",
    user_hash: str = "",
) -> None:
    """``keyword_hits`` agrees with the brute-force scan on ids, scores, order and flags."""
    want = brute_force_hits(store, query, now, kind=kind, subject=subject, user_hash=user_hash)
    got, _ = store.keyword_hits(query, kind, subject, BIG, user_hash=user_hash)
    got_hits = [Hit(h.id, h.score, h.covered, h.fuzzy) for _, h in got]
    context = (query, kind, subject, user_hash)
    assert {h.id for h in got_hits} == {h.id for h in want}, context
    by_id = {h.id: h for h in want}
    for h in got_hits:
        assert abs(h.score - by_id[h.id].score) <= 1e-9, (context, h, by_id[h.id])
        assert (h.covered, h.fuzzy) == (by_id[h.id].covered, by_id[h.id].fuzzy), (context, h)
    assert [h.id for h in got_hits] == [h.id for h in want], context
    for it, _ in got:
        assert it.scope == "public" or f"user:{user_hash}" in it.tags, it
    for limit in (1, 2, 5):
        top, _ = store.keyword_hits(query, kind, subject, limit, user_hash=user_hash)
        assert [h.id for _, h in top] == [h.id for h in got_hits[:limit]], (context, limit)
    if not user_hash:
        # keyword_ranked: the same ranking and scores, with no item read.
        ranked, _ = store.keyword_ranked(query, kind, subject, BIG)
        assert [Hit(h.id, h.score, h.covered, h.fuzzy) for h in ranked] == got_hits, context
        # keyword_search_per_kind: the same ranking, at most ``per_kind`` of a kind.
        kinds = {it.id: it.kind for it, _ in got}
        taken: dict[str, int] = {}
        capped: list[str] = []
        for h in got_hits:
            if taken.get(kinds[h.id], 0) < 1 and len(capped) < 3:
                taken[kinds[h.id]] = taken.get(kinds[h.id], 0) + 1
                capped.append(h.id)
        per_kind = store.keyword_search_per_kind(query, kind, subject, limit=3, per_kind=1)
        assert [it.id for it in per_kind] == capped, context


def spread_reference(
    items: Sequence[Item], anchors: Sequence[str], depth: int, decay: float, now: dt.datetime
) -> dict[str, float]:
    """Best activation over every path of at most ``depth`` hops between live public items.

    Computed layer by layer over exact path lengths (links count both ways),
    independently of :func:`memstore.graph.spread`'s frontier bookkeeping.
    """
    live = {it.id: it for it in items if it.scope != "private" and it.is_active(now)}
    edges: dict[str, list[tuple[str, float]]] = {id: [] for id in live}
    for id, it in live.items():
        for lk in it.links:
            if lk.to_id in live:
                edges[id].append((lk.to_id, lk.weight))
                edges[lk.to_id].append((id, lk.weight))
    hops = depth if 1 <= depth <= 8 else 8
    start = [a for a in dict.fromkeys(anchors) if a in live]
    layer = dict.fromkeys(start, 1.0)
    best = dict(layer)
    for _ in range(hops):
        reached: dict[str, float] = {}
        for u, score in layer.items():
            for v, w in edges[u]:
                reached[v] = max(reached.get(v, 0.0), score * decay * w)
        for v, score in reached.items():
            best[v] = max(best.get(v, 0.0), score)
        layer = reached
    return {v: score for v, score in best.items() if v not in start}


def typo_query(text: str, typo: int, start: int = 0) -> str:
    """Up to three words of ``text`` from ``start``, the first maybe mistyped.

    ``typo``: 0 none, 1 a character dropped, 2 two characters swapped, 3 the
    first two words run together.
    """
    ws = text.split()
    ws = ws[start % len(ws) :][:3] if ws else ["ledger"]
    w = ws[0]
    if typo == 1 and len(w) > 3:
        ws[0] = w[: len(w) // 2] + w[len(w) // 2 + 1 :]
    elif typo == 2 and len(w) > 3:
        ws[0] = w[:1] + w[2] + w[1] + w[3:]
    elif typo == 3 and len(ws) > 1:
        ws[:2] = [ws[0] + ws[1]]
    return " ".join(ws)


# ------------------------------------------------------------------ the model


@dataclass(frozen=True)
class Spec:
    """A drawn item, turned into an :class:`Item` once its id and the time are known."""

    kind: str
    title: str
    content: str
    private: bool
    owner: str
    origin: str
    tags: tuple[str, ...]
    refs: tuple[str, ...]
    deadline: dt.timedelta | None
    status: str
    confidence: str
    event_date: str
    links: tuple[tuple[str, str, float], ...] | None
    """``None``: leave the stored links alone; else the whole new set (``links_set``)."""

    @property
    def valid(self) -> bool:
        if self.kind == "stable_fact" and self.confidence != "high":
            return False
        return not (self.kind == "event" and not self.event_date)

    def all_tags(self) -> list[str]:
        return [*self.tags, *([f"user:{self.owner}"] if self.private else [])]

    def new_links(self, id: str) -> list[tuple[str, str, float]]:
        return [link for link in self.links or () if link[0] != id]

    def item(self, id: str, now: dt.datetime) -> Item:
        return Item(
            id=id,
            kind=self.kind,
            title=self.title,
            content=self.content,
            scope="private" if self.private else "public",
            status=self.status,
            confidence=self.confidence,
            origin=self.origin,
            tags=self.all_tags(),
            links=[ThoughtLink(to_id=t, relation=r, weight=w) for t, r, w in self.new_links(id)],
            links_set=self.links is not None,
            evidence_refs=list(self.refs),
            stale_after=now + self.deadline if self.deadline is not None else None,
            event_date=self.event_date,
        )


@dataclass
class Rec:
    """What the model predicts one stored item holds."""

    kind: str
    title: str
    content: str
    scope: str
    tags: list[str]
    status: str
    stale_after: dt.datetime | None
    origin: str
    links: list[tuple[str, str, float]]
    refs: list[str]
    supersedes: list[str]
    updated_at: dt.datetime | None
    refuted: bool = False

    @property
    def owner(self) -> str:
        return next((t[5:] for t in self.tags if t.startswith("user:")), "")

    def expired(self, now: dt.datetime) -> bool:
        return self.stale_after is not None and now >= self.stale_after

    def active(self, now: dt.datetime) -> bool:
        return self.status == "active" and not self.expired(now)

    def effective_status(self, now: dt.datetime) -> str:
        return "stale" if self.status == "active" and self.expired(now) else self.status

    @staticmethod
    def of(it: Item) -> Rec:
        return Rec(
            kind=it.kind,
            title=it.title,
            content=it.content,
            scope=it.scope,
            tags=list(it.tags),
            status=it.status,
            stale_after=it.stale_after,
            origin=it.origin,
            links=[(lk.to_id, lk.relation, lk.weight) for lk in it.links],
            refs=list(it.evidence_refs),
            supersedes=list(it.supersedes),
            updated_at=it.updated_at,
            refuted=REFUTED_DATA_KEY in it.data,
        )


def cited(ref: str) -> str:
    return ref[5:] if ref.startswith("cell:") else ref


Changes = list[tuple[str, bool]]
"""The changes a step should commit: (id, whether the change hook should hear of it)."""


class Boom(Exception):
    """Raised on purpose inside a batch."""


class ListenerRefused(Exception):
    """Raised by the armed before-commit listener."""


# ---------------------------------------------------------------- strategies

id_choices = st.integers(min_value=0, max_value=40)
weights = st.sampled_from((0.25, 0.5, 0.75, 1.0))
relations = st.sampled_from((*RELATIONS, *RELATIONS[:2], "not_a_relation"))


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    kind = draw(st.sampled_from(KINDS))
    title = " ".join(draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3)))
    content = " ".join(draw(st.lists(st.sampled_from(VOCAB), max_size=5)))
    private = draw(st.integers(0, 3)) == 0
    confidence = "high" if kind == "stable_fact" and draw(st.integers(0, 9)) else ""
    links = draw(
        st.none()
        | st.lists(
            st.tuples(st.sampled_from(ID_POOL), st.sampled_from(RELATIONS), weights),
            max_size=2,
            unique_by=lambda lk: (lk[0], lk[1]),
        ).map(tuple)
    )
    return Spec(
        kind=kind,
        title=title,
        content=content,
        private=private,
        owner=draw(st.sampled_from(OWNERS)),
        origin=draw(st.sampled_from(("", "", "", "observed", "human"))),
        tags=tuple(
            draw(
                st.lists(
                    st.sampled_from(("service/auth", "author/ana", "tenant/a", "shared")),
                    unique=True,
                    max_size=2,
                )
            )
        ),
        refs=tuple(
            draw(st.lists(st.sampled_from((*ID_POOL, *(f"cell:{i}" for i in ID_POOL))), max_size=2))
        ),
        deadline=draw(
            st.sampled_from(
                (
                    None,
                    None,
                    None,
                    dt.timedelta(hours=-1),
                    dt.timedelta(hours=1),
                    dt.timedelta(days=2),
                )
            )
        ),
        status=draw(st.sampled_from(("active",) * 8 + ("stale", "superseded"))),
        confidence=confidence,
        event_date="" if kind == "event" and draw(st.integers(0, 9)) == 0 else "2024-03-01",
        links=links,
    )


queries = st.lists(st.sampled_from((*VOCAB, *TYPOS)), min_size=1, max_size=3).map(" ".join)

batch_ops = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), specs(), id_choices),
        st.tuples(st.just("delete"), id_choices),
        st.tuples(st.just("expire"), id_choices),
        st.tuples(st.just("link"), id_choices, id_choices, relations, weights),
        st.tuples(st.just("supersede"), id_choices, specs(), id_choices),
        st.tuples(st.just("refute"), id_choices),
    ),
    min_size=1,
    max_size=4,
)


# ------------------------------------------------------------- the machine


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.recs: dict[str, Rec] = {}
        self.hooked: list[str] = []
        self.listened: list[str] = []
        self.dirty = 0
        self.refuse_groups = False
        self.store = Store()  # replaced in setup

    @initialize(
        subject=st.sampled_from(("", "agent-1")),
        seed=st.lists(st.tuples(specs(), id_choices), min_size=2, max_size=8),
    )
    def setup(self, subject: str, seed: list[tuple[Spec, int]]) -> None:
        def bump() -> None:
            self.dirty += 1

        def before(changes: Sequence[Any]) -> None:
            if self.refuse_groups:
                raise ListenerRefused

        self.store = Store(Config(clock=self.clock, subject=subject, dirty=bump))
        self.store.set_change_hook(lambda op, it, id, kind: self.hooked.append(id))
        self.store.add_change_listener(lambda op, it, id, kind: self.listened.append(id))
        self.store.add_change_listener(before, before_commit=True)
        for spec, i in seed:
            self.observed(lambda spec=spec, i=i: self.op_upsert(spec, i))  # type: ignore[misc]

    # ------------------------------------------------------------ helpers

    @property
    def now(self) -> dt.datetime:
        return self.clock.now

    def pick(self, i: int) -> str:
        """An id: one of the fixed pool (present or not), or a minted one present."""
        ids = [*ID_POOL, *sorted(k for k in self.recs if k not in ID_POOL)]
        return ids[i % len(ids)]

    def observed(self, fn: Callable[[], Changes]) -> None:
        """Run one step; the observers must hear of exactly the changes it predicts."""
        d, h, n = self.dirty, len(self.hooked), len(self.listened)
        changes = fn()
        assert self.dirty - d == len(changes), changes
        assert self.listened[n:] == [id for id, _ in changes]
        assert self.hooked[h:] == [id for id, pub in changes if pub]

    def predict_upsert(self, spec: Spec, id: str, existing: Rec | None) -> Rec:
        tags = spec.all_tags()
        origin = spec.origin or (existing.origin if existing is not None else "")
        if not origin:
            origin = "human" if any(t.startswith("author/") for t in tags) else "derived"
        if spec.links is not None:
            links = spec.new_links(id)
        else:
            links = list(existing.links) if existing is not None else []
        if spec.deadline is not None:
            stale_after: dt.datetime | None = self.now + spec.deadline
        else:
            stale_after = self.now + HYPOTHESIS_TTL if spec.kind == "hypothesis" else None
        return Rec(
            kind=spec.kind,
            title=spec.title,
            content=spec.content,
            scope="private" if spec.private else "public",
            tags=tags,
            status=spec.status,
            stale_after=stale_after,
            origin=origin,
            links=links,
            refs=list(spec.refs),
            supersedes=list(existing.supersedes) if existing is not None else [],
            updated_at=self.now,
        )

    def change(
        self, id: str, rec: Rec | None, *, old: Rec | None = None, links: bool = False
    ) -> tuple[str, bool]:
        """Record a predicted change to ``id`` (``None`` deletes) and describe it: the id, and
        whether the change hook hears of it (published, or a published item made private)."""
        old = old if old is not None else self.recs.get(id)
        scope_of = rec if rec is not None else old
        assert scope_of is not None
        if rec is None:
            del self.recs[id]
        else:
            self.recs[id] = rec
        withdrawn = rec is not None and rec.scope == "private" and old is not None
        withdrawn = withdrawn and old is not None and old.scope == "public"
        return id, (scope_of.scope == "public" or withdrawn) and not links

    # ------------------------------------------------------------ operations

    def op_upsert(self, spec: Spec, i: int) -> Changes:
        id = self.pick(i) if i % 7 else ""
        if not spec.valid:
            with pytest.raises(InvalidItemError):
                self.store.upsert(spec.item(id, self.now))
            return []
        if id and self.forks(id, self.predict_upsert(spec, id, self.recs.get(id)), self.recs):
            # Made current again with the supersedes it kept, it would fork or loop a chain.
            with pytest.raises(InvalidItemError):
                self.store.upsert(spec.item(id, self.now))
            return []
        got = self.store.upsert(spec.item(id, self.now))
        assert got.id == id if id else is_minted(got.id)
        rec = self.predict_upsert(spec, got.id, self.recs.get(got.id))
        assert Rec.of(got) == rec
        return [self.change(got.id, rec)]

    def stamped(self, item: Item) -> Item:
        """``item`` with what a write stamps before dedup compares it: origin, subject."""
        it = item.clone()
        it.origin = it.origin or restored_origin(it)  # type: ignore[assignment]
        if it.scope == "private" and not it.subject:
            it.subject = self.store.subject()
        return it

    def dedup_target(self, stored: dict[str, Item], item: Item) -> str | None:
        """The reference for ``upsert_dedup``: the best live comparable near-duplicate.

        Candidates in id order, the first of the highest score wins; a private
        item only meets its own owner's items.
        """
        best: tuple[str, float] | None = None
        toks = dedup_tokens(item)
        for cid in sorted(stored):
            cand = stored[cid]
            if cand.kind != item.kind or not cand.is_active(self.now):
                continue
            if item.scope == "private" and Rec.of(cand).owner != Rec.of(item).owner:
                continue
            if not dedup_comparable(cand, item):
                continue
            score, dup = near_duplicate_tokens(dedup_tokens(cand), toks)
            if dup and (best is None or score > best[1]):
                best = (cid, score)
        return best[0] if best else None

    def op_upsert_dedup(self, spec: Spec, i: int) -> Changes:
        id = self.pick(i) if i % 3 else ""
        item = spec.item(id, self.now)
        if not spec.valid:
            with pytest.raises(InvalidItemError):
                self.store.upsert_dedup(item)
            return []
        stored = {it.id: it for it in stored_items(self.store)}
        scored = spec.kind in DEDUP_ELIGIBLE_KINDS and not (id and id in self.recs)
        expect = self.dedup_target(stored, self.stamped(item)) if scored else None
        if (
            expect is None
            and id
            and self.forks(id, self.predict_upsert(spec, id, self.recs.get(id)), self.recs)
        ):
            with pytest.raises(InvalidItemError):
                self.store.upsert_dedup(item)
            return []
        got, merged = self.store.upsert_dedup(item)
        assert merged == expect, (item.title, merged and stored[merged].title)
        if merged is None:
            assert got.id == id if id else is_minted(got.id)
            rec = self.predict_upsert(spec, got.id, self.recs.get(got.id))
            assert Rec.of(got) == rec
            return [self.change(got.id, rec)]
        # A merge: the cell keeps its id, links and supersedes; tags are unioned.
        assert got.id == merged
        old = self.recs[merged]
        rec = self.predict_upsert(spec, merged, None)
        rec.tags = list(dict.fromkeys([*old.tags, *rec.tags]))
        rec.links, rec.supersedes = list(old.links), list(old.supersedes)
        assert Rec.of(got) == rec
        return [self.change(merged, rec)]

    def op_delete(self, i: int) -> Changes:
        id = self.pick(i)
        assert self.store.delete(id) == (id in self.recs)
        return [self.change(id, None)] if id in self.recs else []

    def op_expire(self, i: int) -> Changes:
        id = self.pick(i)
        assert self.store.expire(id) == (id in self.recs)
        rec = self.recs.get(id)
        if rec is None or rec.status == "stale":
            return []
        new = copy.deepcopy(rec)
        new.status, new.updated_at = "stale", self.now
        return [self.change(id, new)]

    def op_link(self, i: int, j: int, relation: str, weight: float) -> Changes:
        from_id, to_id = self.pick(i), self.pick(j)
        link = ThoughtLink(to_id=to_id, relation=relation, weight=weight)
        rec = self.recs.get(from_id)
        admitted = rec is not None and relation in RELATIONS and from_id != to_id
        links: list[tuple[str, str, float]] = []
        if rec is not None and admitted:
            links = list(rec.links)
            same = [k for k, lk in enumerate(links) if lk[:2] == (to_id, relation)]
            if same:
                links[same[0]] = (to_id, relation, weight)
            elif len(links) >= MAX_MODEL_LINKS:
                low = min(range(len(links)), key=lambda k: links[k][2])
                if weight <= links[low][2]:
                    admitted = False
                else:
                    del links[low]
                    links.append((to_id, relation, weight))
            else:
                links.append((to_id, relation, weight))
        assert self.store.add_link(from_id, link) == admitted
        if rec is None or not admitted:
            return []
        new = copy.deepcopy(rec)
        new.links = links
        return [self.change(from_id, new, links=True)]

    def op_supersede(self, i: int, spec: Spec, j: int) -> Changes:
        old_id = self.pick(i)
        new_id = self.pick(j) if j % 5 else ""
        item = spec.item(new_id, self.now)
        if not spec.valid or new_id == old_id:
            with pytest.raises(InvalidItemError):
                self.store.supersede(old_id, item)
            return []
        if old_id not in self.recs:
            with pytest.raises(ItemNotFoundError):
                self.store.supersede(old_id, item)
            return []
        if self.claimant(old_id, new_id):  # a chain never forks
            with pytest.raises(InvalidItemError, match="already superseded by"):
                self.store.supersede(old_id, item)
            return []
        old = copy.deepcopy(self.recs[old_id])
        old.status, old.updated_at = "superseded", self.now
        if new_id:
            rec = self.predict_upsert(spec, new_id, self.recs.get(new_id))
            if old_id not in rec.supersedes:
                rec.supersedes = [*rec.supersedes, old_id][-MAX_REFS:]
            if self.forks(new_id, rec, {**self.recs, old_id: old}):
                with pytest.raises(InvalidItemError):
                    self.store.supersede(old_id, item)
                return []
        got = self.store.supersede(old_id, item)
        assert got.id == new_id if new_id else is_minted(got.id)
        out = [self.change(old_id, old)]
        rec = self.predict_upsert(spec, got.id, self.recs.get(got.id))
        if old_id not in rec.supersedes:
            rec.supersedes = [*rec.supersedes, old_id][-MAX_REFS:]
        assert Rec.of(got) == rec
        out.append(self.change(got.id, rec))
        return out

    def forks(self, id: str, rec: Rec, recs: dict[str, Rec]) -> bool:
        """Whether storing ``rec`` as ``id`` over ``recs`` would fork or loop a chain.

        Only a current item can: the names its write adds to ``supersedes``
        (all of them when a retired item becomes current again) may not be
        itself, an item another current item supersedes, or a current item
        whose chain of current items comes back to ``id``.
        """
        if not rec.active(self.now):
            return False
        existing = recs.get(id)
        refs = rec.supersedes
        if existing is not None and existing.active(self.now):
            refs = [r for r in refs if r not in existing.supersedes]
        if id in refs:
            return True
        for ref in refs:
            if any(
                cid != id and ref in r.supersedes and r.active(self.now) for cid, r in recs.items()
            ):
                return True
        seen: set[str] = set()
        stack = list(refs)
        while stack:
            at = stack.pop()
            if at in seen:
                continue
            seen.add(at)
            r = recs.get(at)
            if r is None or not r.active(self.now):
                continue
            if id in r.supersedes:
                return True
            stack.extend(r.supersedes)
        return False

    def claimant(self, id: str, besides: str) -> bool:
        """Whether an active item other than ``besides`` already supersedes ``id``."""
        return any(
            cid != besides and id in r.supersedes and r.active(self.now)
            for cid, r in self.recs.items()
        )

    def op_mark_superseded(self, i: int, j: int) -> Changes:
        id, by_id = self.pick(i), self.pick(j)
        ok = (
            id != by_id
            and id in self.recs
            and by_id in self.recs
            and self.recs[by_id].active(self.now)
            and not self.claimant(id, by_id)
        )
        assert self.store.mark_superseded(id, by_id) == ok
        if not ok:
            return []
        old = copy.deepcopy(self.recs[id])
        old.status, old.updated_at = "superseded", self.now
        out = [self.change(id, old)]
        keeper = self.recs[by_id]
        if id not in keeper.supersedes:
            new = copy.deepcopy(keeper)
            new.supersedes = [*new.supersedes, id][-MAX_REFS:]
            new.updated_at = self.now
            out.append(self.change(by_id, new))
        return out

    def op_refute(self, i: int) -> Changes:
        id = self.pick(i)
        if id not in self.recs:
            assert self.store.refute(id, "wrong") == (False, [])
            return []
        citing = sorted(
            cid
            for cid, r in self.recs.items()
            if cid != id
            and (id in map(cited, r.refs) or any(lk[0] == id for lk in r.links))
            and r.active(self.now)
            # An unset origin reads as restored_origin says: a person's with an author tag.
            and (r.origin or ("human" if any(t.startswith("author/") for t in r.tags) else ""))
            in ("", "derived")
        )
        found, cascaded = self.store.refute(id, "wrong", ["log:1"])
        assert found and cascaded == citing
        new = copy.deepcopy(self.recs[id])
        new.status, new.updated_at, new.refuted = "stale", self.now, True
        out = [self.change(id, new)]
        for cid in citing:
            r = copy.deepcopy(self.recs[cid])
            r.status, r.updated_at = "stale", self.now
            out.append(self.change(cid, r))
        return out

    def op_mutate(self, i: int, content: str, keep: bool, invalid: bool) -> Changes:
        id = self.pick(i)

        def fn(it: Item) -> bool:
            it.content = content
            if invalid:
                it.kind = "not a kind!"
            return keep

        if invalid and keep and id in self.recs:
            with pytest.raises(InvalidItemError):
                self.store.mutate(id, fn)
            return []
        assert self.store.mutate(id, fn) == (id in self.recs)
        if id not in self.recs or not keep:
            return []
        new = copy.deepcopy(self.recs[id])
        new.content, new.updated_at = content, self.now
        return [self.change(id, new)]

    def op_mirror(self, i: int, title: str, offset: dt.timedelta, spec: Spec) -> Changes:
        id = self.pick(i)
        current = {it.id: it for it in stored_items(self.store)}.get(id)
        if current is not None:
            item = current.clone(
                title=title or current.title,
                updated_at=current.updated_at + offset,  # type: ignore[operator]
            )
        else:
            if not spec.valid:
                return []
            item = spec.item(id, self.now).clone(
                created_at=self.now + offset, updated_at=self.now + offset
            )
            if validate_base(Vocabulary(), item):
                return []  # mirror stores what it is given: keep the store valid
        older = (
            current is not None
            and current.updated_at is not None
            and item.updated_at is not None
            and item.updated_at < current.updated_at
        )
        same = current is not None and current.model_dump() == item.model_dump()
        assert self.store.mirror(item) == (not older and not same)
        if older or same:
            return []
        return [self.change(id, Rec.of(item))]

    def op_sweep(self) -> Changes:
        due = sorted(
            id for id, r in self.recs.items() if r.status == "active" and r.expired(self.now)
        )
        assert self.store.sweep_expired() == due
        out = []
        for id in due:
            new = copy.deepcopy(self.recs[id])
            new.status, new.updated_at = "stale", self.now
            out.append(self.change(id, new))
        return out

    def run_op(self, op: tuple[Any, ...]) -> Changes:
        name, *args = op
        fns: dict[str, Callable[..., Changes]] = {
            "upsert": self.op_upsert,
            "delete": self.op_delete,
            "expire": self.op_expire,
            "link": self.op_link,
            "supersede": self.op_supersede,
            "refute": self.op_refute,
        }
        return fns[name](*args)

    # ------------------------------------------------------------ rules

    @rule(spec=specs(), i=id_choices)
    def upsert(self, spec: Spec, i: int) -> None:
        self.observed(lambda: self.op_upsert(spec, i))

    @rule(spec=specs(), i=id_choices)
    def upsert_dedup(self, spec: Spec, i: int) -> None:
        self.observed(lambda: self.op_upsert_dedup(spec, i))

    @rule(i=id_choices, toggle=st.booleans(), extra=st.sampled_from(("", "", "", "ledger")))
    def restate(self, i: int, toggle: bool, extra: str) -> None:
        """``upsert_dedup`` of a restatement of a stored item (plurals toggled, a word more)."""
        eligible = sorted(k for k, r in self.recs.items() if r.kind in DEDUP_ELIGIBLE_KINDS)
        if not eligible:
            return
        rec = self.recs[eligible[i % len(eligible)]]
        title = [PLURAL_TOGGLE.get(w, w) if toggle else w for w in rec.title.split()]
        spec = Spec(
            kind=rec.kind,
            title=" ".join([*title, *([extra] if extra else [])]),
            content=rec.content,
            private=rec.scope == "private",
            owner=rec.owner or OWNERS[0],
            origin="",
            tags=tuple(t for t in rec.tags if not t.startswith("user:")),
            refs=(),
            deadline=None,
            status="active",
            confidence="high" if rec.kind == "stable_fact" else "",
            event_date="2024-03-01",
            links=None,
        )
        self.observed(lambda: self.op_upsert_dedup(spec, 0))

    @rule(i=id_choices)
    def delete(self, i: int) -> None:
        self.observed(lambda: self.op_delete(i))

    @rule(i=id_choices)
    def expire(self, i: int) -> None:
        self.observed(lambda: self.op_expire(i))

    @rule()
    def sweep_expired(self) -> None:
        self.observed(self.op_sweep)

    @rule(i=id_choices, spec=specs(), j=id_choices)
    def supersede(self, i: int, spec: Spec, j: int) -> None:
        self.observed(lambda: self.op_supersede(i, spec, j))

    @rule(i=id_choices, j=id_choices)
    def mark_superseded(self, i: int, j: int) -> None:
        self.observed(lambda: self.op_mark_superseded(i, j))

    @rule(i=id_choices, j=id_choices, relation=relations, weight=weights)
    def add_link(self, i: int, j: int, relation: str, weight: float) -> None:
        self.observed(lambda: self.op_link(i, j, relation, weight))

    @rule(i=id_choices)
    def refute(self, i: int) -> None:
        self.observed(lambda: self.op_refute(i))

    @rule(
        i=id_choices,
        content=st.lists(st.sampled_from(VOCAB), max_size=3).map(" ".join),
        keep=st.booleans(),
        invalid=st.integers(0, 5).map(lambda n: n == 0),
    )
    def mutate(self, i: int, content: str, keep: bool, invalid: bool) -> None:
        self.observed(lambda: self.op_mutate(i, content, keep, invalid))

    @rule(
        i=id_choices,
        title=st.sampled_from(("", "", "ledger pool", "paymentapi outage")),
        offset=st.sampled_from((dt.timedelta(0), dt.timedelta(hours=-1), dt.timedelta(hours=1))),
        spec=specs(),
    )
    def mirror(self, i: int, title: str, offset: dt.timedelta, spec: Spec) -> None:
        self.observed(lambda: self.op_mirror(i, title, offset, spec))

    @rule(
        delta=st.sampled_from(
            (
                dt.timedelta(0),
                dt.timedelta(minutes=30),
                dt.timedelta(hours=2),
                dt.timedelta(hours=25),
                dt.timedelta(days=3),
            )
        )
    )
    def advance_clock(self, delta: dt.timedelta) -> None:
        self.clock.now += delta

    @rule(
        ops=batch_ops,
        inner=st.none() | batch_ops,
        outcome=st.sampled_from(("commit", "commit", "raise", "refused")),
    )
    def batch(
        self, ops: list[tuple[Any, ...]], inner: list[tuple[Any, ...]] | None, outcome: str
    ) -> None:
        """A group of writes; a nested savepoint raises when given; the group may raise."""
        snapshot = copy.deepcopy(self.recs)

        def group() -> Changes:
            out: Changes = []
            self.refuse_groups = outcome == "refused"
            try:
                with self.store.batch():
                    for op in ops:
                        out += self.run_op(op)
                    if inner is not None:
                        saved = copy.deepcopy(self.recs)
                        try:
                            with self.store.batch():
                                for op in inner:
                                    self.run_op(op)
                                raise Boom
                        except Boom:
                            self.recs = saved
                    if outcome == "raise":
                        raise Boom
            except Boom:
                assert outcome == "raise"
                self.recs = snapshot
                return []
            except ListenerRefused:
                assert outcome == "refused" and out, "a group with no change reached the listener"
                self.recs = snapshot
                return []
            finally:
                self.refuse_groups = False
            assert outcome == "commit" or not out
            return out

        self.observed(group)

    @rule(
        query=queries,
        kind=st.sampled_from(("", "", "note", "hypothesis", "event")),
        subject=st.sampled_from(("", "", "auth", "agent-1")),
        user_hash=st.sampled_from(("", "", "u1")),
    )
    def search_agrees_with_brute_force(
        self, query: str, kind: str, subject: str, user_hash: str
    ) -> None:
        assert_search_matches_brute_force(
            self.store, query, self.now, kind=kind, subject=subject, user_hash=user_hash
        )

    @rule(
        i=id_choices,
        typo=st.integers(0, 3),
        kind=st.sampled_from(("", "", "note", "event")),
        user_hash=st.sampled_from(("", "u1", "u2")),
    )
    def search_for_an_item_agrees_with_brute_force(
        self, i: int, typo: int, kind: str, user_hash: str
    ) -> None:
        """A query made of a stored item's words, maybe with a typo or two words run together."""
        rec = self.recs.get(self.pick(i))
        if rec is None:
            return
        query = typo_query(f"{rec.title} {rec.content}", typo)
        assert_search_matches_brute_force(
            self.store, query, self.now, kind=kind, user_hash=user_hash
        )

    @rule(
        anchors=st.lists(id_choices, min_size=1, max_size=3),
        depth=st.sampled_from((0, 1, 2, 3, 9)),
        decay=st.sampled_from((0.5, 0.6, 1.0)),
    )
    def traverse_agrees_with_reference(self, anchors: list[int], depth: int, decay: float) -> None:
        ids = [self.pick(i) for i in anchors]
        want = spread_reference(stored_items(self.store), ids, depth, decay, self.now)
        got = self.store.traverse_scored(ids, depth, decay)
        assert {s.item.id for s in got} == set(want), (ids, depth)
        for s in got:
            assert abs(s.score - want[s.item.id]) <= 1e-12, (s.item.id, s.score, want[s.item.id])
        assert [s.item.id for s in got] == [
            s.item.id for s in sorted(got, key=lambda s: (-s.score, s.item.id))
        ]

    # ------------------------------------------------------------ invariants

    @invariant()
    def indexes_agree_with_items(self) -> None:
        self.store._check()

    @invariant()
    def ids_and_fields_match_the_model(self) -> None:
        store, now = self.store, self.now
        assert len(store) == len(self.recs)
        public = {id for id, r in self.recs.items() if r.scope == "public"}
        assert {it.id for it in store.items()} == public
        for owner in OWNERS:
            own = {id for id, r in self.recs.items() if r.scope == "private" and r.owner == owner}
            seen = store.for_user(owner)
            assert {it.id for it in seen if it.scope == "private"} == own
            assert {it.id for it in seen if it.scope == "public"} == public
        for id, rec in self.recs.items():
            got = store.get(id)
            assert got is not None, id
            want = copy.copy(rec)
            want.status = rec.effective_status(now)
            assert Rec.of(got) == want, id

    @invariant()
    def every_live_public_item_is_found_by_its_title(self) -> None:
        now = self.now
        for id, rec in self.recs.items():
            if rec.scope != "public" or not rec.active(now):
                continue
            found = [it.id for it in self.store.keyword_search(rec.title, kind=rec.kind, limit=BIG)]
            assert id in found, (id, rec.title)
            assert id in [it.id for it in self.store.exact_matches(rec.title)], (id, rec.title)
            if "service/auth" in rec.tags:
                assert id in [it.id for it in self.store.exact_matches("auth")], id

    @invariant()
    def private_and_retired_items_stay_out_of_shared_reads(self) -> None:
        store, now = self.store, self.now
        live_public = {id for id, r in self.recs.items() if r.scope == "public" and r.active(now)}
        for rec in self.recs.values():
            ids = {it.id for it in store.keyword_search(rec.title, limit=BIG)}
            assert ids <= live_public, (rec.title, ids - live_public)
        assert all(it.scope == "public" for it in store.items())
        reached = {it.id for it in store.traverse(list(self.recs))}
        assert reached <= live_public, reached - live_public
        assert {it.id for it in store.recent(limit=BIG)} == live_public
        for status in ("active", "stale", "superseded"):
            want = {
                id
                for id, r in self.recs.items()
                if r.scope == "public" and r.effective_status(now) == status
            }
            assert {it.id for it in store.filtered(status=status)} == want, status
        for rec in self.recs.values():
            assert set(store.resolve_anchors(rec.title)) <= live_public, rec.title

    @invariant()
    def active_count_matches(self) -> None:
        assert self.store.count_active() == sum(r.active(self.now) for r in self.recs.values())


StoreMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestStoreMachine = StoreMachine.TestCase


# ------------------------------------------------- differential: search


@st.composite
def corpus_items(draw: st.DrawFn) -> Item:
    """A valid item for a search corpus: public mostly, sometimes private or expiring."""
    kind = draw(st.sampled_from(("note", "event", "watch_item")))
    private = draw(st.integers(0, 5)) == 0
    tags = ["user:u1"] if private else []
    if draw(st.integers(0, 3)) == 0:
        tags.append("service/auth")
    deadline = draw(st.sampled_from((None, None, None, -1, 1, 48)))
    return Item(
        id=f"d{draw(st.integers(0, 40))}" if draw(st.booleans()) else "",
        kind=kind,
        title=" ".join(draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4))),
        content=" ".join(draw(st.lists(st.sampled_from((*VOCAB, *TYPOS)), max_size=8))),
        event_date="2024-03-01" if kind == "event" else "",
        tags=tags,
        scope="private" if private else "public",
        stale_after=T0 + dt.timedelta(hours=deadline) if deadline is not None else None,
    )


def retitle(it: Item) -> bool:
    it.title = f"{it.title} retitled"
    return True


probes = st.tuples(
    st.none() | st.integers(0, 100),
    st.integers(0, 3),
    st.integers(0, 5),
    queries,
    st.sampled_from(("", "", "", "note", "event")),
    st.sampled_from(("", "", "", "auth")),
    st.sampled_from(("", "u1")),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    corpus=st.lists(corpus_items(), min_size=4, max_size=25),
    churn=st.lists(
        st.tuples(st.integers(0, 30), st.sampled_from(("delete", "expire", "retitle"))), max_size=8
    ),
    probes=st.lists(probes, min_size=1, max_size=6),
    minutes=st.sampled_from((0, 30, 120)),
)
def test_keyword_hits_match_a_brute_force_scan(
    corpus: list[Item],
    churn: list[tuple[int, str]],
    probes: list[tuple[int | None, int, int, str, str, str, str]],
    minutes: int,
) -> None:
    """Index-driven search returns exactly what scoring every indexed item would.

    Churn (deletes, expiry, re-titled items) frees and reuses index slots and
    removes words from the vocabulary before the queries run. A probe is a
    free query, or words of a corpus item, maybe mistyped or run together.
    """
    clock = FakeClock()
    store = Store(Config(clock=clock))
    ids = [store.upsert(it).id for it in corpus]
    for n, action in churn:
        id = ids[n % len(ids)]
        if action == "delete":
            store.delete(id)
        elif action == "expire":
            store.expire(id)
        else:
            store.mutate(id, retitle)
    clock.now += dt.timedelta(minutes=minutes)
    store._check()
    for source, typo, start, free, kind, subject, user_hash in probes:
        if source is None:
            query = free
        else:
            it = corpus[source % len(corpus)]
            query = typo_query(f"{it.title} {it.content}", typo, start)
        assert_search_matches_brute_force(
            store, query, clock.now, kind=kind, subject=subject, user_hash=user_hash
        )


def test_search_tie_order_does_not_depend_on_the_caller_owning_private_items() -> None:
    """Two equally scored public items keep one relative order in both searches.

    ``put`` (like ``mirror`` and ``restore``) can store an item without an
    ``updated_at``. The index ranks that as the newest (``_lexindex._ts``
    maps ``None`` to +inf) but the private merge in ``Store._merge_private``
    re-sorts every hit with ``store._ts``, which maps ``None`` to -inf: the
    public hits swap places as soon as the caller owns a matching private item.
    """
    store = Store(Config(clock=FakeClock()))
    store.put(Item(id="a", kind="note", title="ledger pool"))
    store.upsert(Item(id="b", kind="note", title="ledger pool"))
    store.upsert(Item(id="p", kind="note", title="ledger", scope="private", tags=["user:u1"]))
    shared = [it.id for it in store.keyword_search("ledger pool")]
    mine = [it.id for it in store.keyword_search_for_user("u1", "ledger pool")]
    assert [id for id in mine if id != "p"] == shared


# -------------------------------------------- differential: near-duplicates

DEDUP_VOCAB = (
    "queue retries boxes batches caches queries timeouts payment ledger pool latency "
    "deploy window canary token"
).split()
SINGULAR = {
    "retries": "retry",
    "boxes": "box",
    "batches": "batch",
    "caches": "cache",
    "queries": "query",
    "timeouts": "timeout",
}


@st.composite
def dedup_pairs(draw: st.DrawFn) -> tuple[Item, Item]:
    """An item and a restatement of it: some words swapped to singular, maybe one changed."""
    kind = draw(st.sampled_from(("watch_item", "hypothesis", "operational_pattern")))
    title = draw(st.lists(st.sampled_from(DEDUP_VOCAB), min_size=1, max_size=4, unique=True))
    content = draw(st.lists(st.sampled_from(DEDUP_VOCAB), max_size=6))
    restated = [SINGULAR.get(w, w) if draw(st.booleans()) else w for w in title]
    if draw(st.integers(0, 3)) == 0:
        restated.append(draw(st.sampled_from(DEDUP_VOCAB)))
    private = draw(st.booleans())
    tags = ["user:u1"] if private else []
    authored = draw(st.integers(0, 3)) == 0

    def make(words: list[str]) -> Item:
        return Item(
            kind=kind,
            title=" ".join(words),
            content=" ".join(content),
            scope="private" if private else "public",
            tags=[*tags, *(["author/ana"] if authored else [])],
        )

    return make(title), make(restated)


def expected_dedup_target(stored: Item, incoming: Item, subject: str) -> bool:
    """Whether ``incoming``, as the store would store it, restates ``stored``."""
    it = incoming.clone()
    if it.scope == "private" and not it.subject:
        it.subject = subject
    it.origin = it.origin or restored_origin(it)  # type: ignore[assignment]
    if not dedup_comparable(stored, it):
        return False
    return near_duplicate_tokens(dedup_tokens(stored), dedup_tokens(it))[1]


@settings(max_examples=200, deadline=None)
@given(pair=dedup_pairs(), subject=st.sampled_from(("", "agent-1")))
def test_upsert_dedup_merges_exactly_the_near_duplicates(
    pair: tuple[Item, Item], subject: str
) -> None:
    store = Store(Config(clock=FakeClock(), subject=subject))
    first, merged = store.upsert_dedup(pair[0])
    assert merged is None
    expect = expected_dedup_target(first, pair[1], subject)
    _, merged = store.upsert_dedup(pair[1])
    assert (merged == first.id) == expect, (first.title, pair[1].title, expect)
    assert len(store) == (1 if expect else 2)
    store._check()


def test_upsert_dedup_merges_a_restatement_whose_shared_words_are_es_or_ies_plurals() -> None:
    """Both items fold to {"box", "retry"}; the public candidate pool misses them.

    ``Store._find_duplicate_locked`` looks candidates up by the postings of each
    folded token and of token + "s"; "boxes" and "retries" are neither "box(s)"
    nor "retry(s)", so the identical restatement is never compared.
    """
    store = Store()
    first, _ = store.upsert_dedup(Item(kind="watch_item", title="boxes retries"))
    _, merged = store.upsert_dedup(Item(kind="watch_item", title="boxes retries"))
    assert merged == first.id
    assert len(store) == 1


def test_upsert_dedup_merges_private_restatements_when_the_store_has_a_subject() -> None:
    """The stored private item got ``Config.subject``; the incoming one is compared without it."""
    store = Store(Config(subject="agent-1"))
    item = Item(kind="watch_item", title="queue latency alarm", scope="private", tags=["user:u1"])
    first, _ = store.upsert_dedup(item)
    assert first.subject == "agent-1"
    _, merged = store.upsert_dedup(item)
    assert merged == first.id
    assert len(store) == 1


def test_upsert_dedup_merges_a_human_authors_own_restatement() -> None:
    """An ``author/`` tagged item is stored as human-written, but compared as derived."""
    store = Store()
    item = Item(kind="watch_item", title="queue latency alarm", tags=["author/ana"])
    first, _ = store.upsert_dedup(item)
    assert first.origin == "human"
    _, merged = store.upsert_dedup(item)
    assert merged == first.id
    assert len(store) == 1
