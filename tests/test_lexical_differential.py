"""The columnar lexical index answers exactly as the set-based one it replaced.

tests/lexical_oracle.py keeps the previous ``Lexicon``/``LexicalIndex``
verbatim. Both are fed the same puts and removes (hypothesis-generated over
tiny alphabets, so grams, stems, one-edit neighbours, joined words, digit
words and fuzzy matches collide all the time; ties on score and update time
are frequent too), and must agree on every token's per-document levels, its
document frequency and fuzzy gate, and on every ranking: the same ids, in the
same order, with the same scores (to 1e-9; in practice bit for bit), tokens
covered and fuzzy flags, under every filter and cut. The new index compacts
after every other removal here (``compact_min=2``), so renumbering is always
exercised. The benchmark corpora are compared too. A query's plan is kept
until the next write, as the store keeps it, and ranked again under other
filters, limits and clocks: it must still agree with the oracle.
"""

from __future__ import annotations

import datetime as _dt
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memstore import _wordbatch
from memstore._lexindex import LexicalIndex, QueryPlan
from memstore._lexscore import _PARTITION_MAX, Unranked, _kth_largest, plan_tokens
from memstore.item import Item
from memstore.lexical import TokenMatch
from memstore.text import kw_tokens, normalize_query
from tests.lexical_oracle import OracleLexicalIndex

T0 = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)
NOW = T0 + _dt.timedelta(hours=5)
IDS = [f"d{i}" for i in range(10)]
KINDS = ["fact", "event", "note"]
SUBJECTS = ["", "billing", "auth"]
TAGS = [[], ["tenant/a"], ["tenant/b"], ["tenant/b", "shared"], ["service/auth"]]

# Letters that collide (stems need "ing"/"ed"/"s" endings), digits, one
# non-ASCII digit that is no ASCII digit (Ethiopic one: an Arabic-Indic digit
# is read as its ASCII digit).
word = st.one_of(
    st.text(alphabet="abde", min_size=1, max_size=6),
    st.text(alphabet="12፩", min_size=1, max_size=4),
    st.sampled_from(["bading", "baded", "bads", "abed", "deab", "ab12"]),
)
text = st.lists(word, max_size=6).map(" ".join)
hours = st.sampled_from([None, 1, 2, 2, 3, 9])


@st.composite
def items(draw: st.DrawFn) -> Item:
    updated = draw(st.sampled_from([1, 2, 2, 3]))
    stale = draw(hours)
    return Item(
        id=draw(st.sampled_from(IDS)),
        kind=draw(st.sampled_from(KINDS)),
        title=draw(text),
        content=draw(text),
        subject=draw(st.sampled_from(SUBJECTS)),
        tags=draw(st.sampled_from(TAGS)),
        updated_at=T0 + _dt.timedelta(hours=updated),
        stale_after=None if stale is None else T0 + _dt.timedelta(hours=stale),
        event_date=draw(st.sampled_from(["", "2023-06-27"])),
    )


def token_levels(index: LexicalIndex | OracleLexicalIndex, tok: str) -> dict[str, float]:
    """A token's best level per document id, from the set-per-level view."""
    m = index.lexicon.match_token(tok)
    out: dict[str, float] = {}
    for level, slots, _ in m.groups:
        for s in slots:
            ident = index.lexicon.id_at(s)
            assert ident is not None and ident not in out
            out[ident] = level
    return out


def assert_same_ranking(
    new: LexicalIndex,
    old: OracleLexicalIndex,
    tokens: list[str],
    *,
    kind: str = "",
    subject: str = "",
    hidden: tuple[str, ...] = (),
    limit: int | None = 10,
    partition: str | None = None,
    now_ts: float = NOW.timestamp(),
    plan: QueryPlan | None = None,
) -> None:
    p_new, p_old = plan or new.plan(tokens), old.plan(tokens)
    assert p_new.weights == p_old.weights
    assert p_new.fuzzy_ok == p_old.fuzzy_ok
    for m_new, m_old in zip(p_new.matches, p_old.matches, strict=True):
        assert m_new.df == m_old.df
    args = {
        "kind": kind,
        "subject": subject,
        "hidden_kinds": hidden,
        "now_ts": now_ts,
        "limit": limit,
        "partition": partition,
    }
    got = new.rank(p_new, **args)  # type: ignore[arg-type]
    want = old.rank(p_old, **args)  # type: ignore[arg-type]
    assert [h.id for h in got] == [h.id for h in want], (tokens, args)
    # The columns the lean path reads are the hits' own fields.
    assert got.ids == tuple(h.id for h in got)
    assert got.scores.tolist() == [h.score for h in got] and not got.scores.flags.writeable
    for g, w in zip(got, want, strict=True):
        assert abs(g.score - w.score) <= 1e-9
        assert (g.covered, g.fuzzy) == (w.covered, w.fuzzy)
    # The compiled rank (when built) and the numpy one: the same hits, bit for bit.
    with _wordbatch.pure_python():
        pure = new.rank(p_new, **args)  # type: ignore[arg-type]
    assert list(got) == list(pure) and got.ids == pure.ids, (tokens, args)
    assert got.scores.tobytes() == pure.scores.tobytes()


def slot_order(index: LexicalIndex) -> list[str | None]:
    """The ids indexed, in slot order."""
    lex = index.lexicon
    return [lex.id_at(s) for s in range(lex.capacity) if lex.alive_slots()[s]]


class DifferentialMachine(RuleBasedStateMachine):
    """Random puts and removes; every query and every token agree with the oracle."""

    def __init__(self) -> None:
        super().__init__()
        self.new = LexicalIndex(compact_min=2, overlay_max=3)  # vocabulary segments too
        self.old = OracleLexicalIndex()
        self.eager = LexicalIndex(compact_min=2, overlay_max=3)
        """The new index read after every write: each write applied alone, in order."""
        self.live: dict[str, Item] = {}
        self.history: dict[str, list[tuple[Item, bool]]] = {}
        self.plans: dict[tuple[str, ...], QueryPlan] = {}
        """The new index's plans, kept until a write (as the store keeps them)."""

    @rule(item=items(), index_id=st.booleans())
    def put(self, item: Item, index_id: bool) -> None:
        self.plans.clear()
        self.new.put(item, index_id)
        self.old.put(item, index_id)
        self.eager.put(item, index_id)
        self.eager.flush()  # applied at once: the index as it was before writes queued
        self.live[item.id] = item
        self.history.setdefault(item.id, []).append((item, index_id))

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data(), kind=st.sampled_from(KINDS), subject=st.sampled_from(SUBJECTS))
    def put_metadata(self, data: st.DataObject, kind: str, subject: str) -> None:
        """A live item's words again with other filter fields: its slot stays."""
        ident = data.draw(st.sampled_from(sorted(self.live)))
        index_id = data.draw(st.sampled_from([flag for it, flag in self.history[ident]]))
        self.put(self.live[ident].model_copy(update={"kind": kind, "subject": subject}), index_id)

    @precondition(lambda self: bool(self.history))
    @rule(data=st.data())
    def put_again(self, data: st.DataObject) -> None:
        """An item object put before, again: the one held (a no-op) or an older one."""
        ident = data.draw(st.sampled_from(sorted(self.history)))
        item, index_id = data.draw(st.sampled_from(self.history[ident]))
        self.put(item, data.draw(st.sampled_from([index_id, not index_id])))

    @rule(ident=st.sampled_from(IDS))
    def remove(self, ident: str) -> None:
        self.plans.clear()
        self.new.remove(ident)
        self.old.remove(ident)
        self.eager.remove(ident)
        self.eager.flush()
        self.live.pop(ident, None)
        assert (ident in self.new) is (ident in self.old)  # no read: the queue answers

    @invariant()
    def membership(self) -> None:
        for ident in IDS:  # answered without applying the queue
            assert (ident in self.new) is (ident in self.live)

    @precondition(lambda self: bool(self.live))
    @rule(
        query=st.lists(word, min_size=1, max_size=3).map(" ".join),
        kind=st.sampled_from(["", *KINDS]),
        subject=st.sampled_from(SUBJECTS),
        hidden=st.sampled_from([(), ("note",), ("note", "unknown")]),
        limit=st.sampled_from([None, 1, 2, 3, 10]),
        partition=st.sampled_from([None, "a", "b", "zz"]),
        now_h=st.sampled_from([0, 2, 5]),
        later_h=st.sampled_from([0, 1, 2, 3, 9, 10]),
    )
    def query(
        self,
        query: str,
        kind: str,
        subject: str,
        hidden: tuple[str, ...],
        limit: int | None,
        partition: str | None,
        now_h: int,
        later_h: int,
    ) -> None:
        tokens = kw_tokens(normalize_query(query))
        for tok in tokens:
            assert token_levels(self.new, tok) == token_levels(self.old, tok), tok
            m_new, m_old = self.new.lexicon.match_token(tok), self.old.lexicon.match_token(tok)
            assert m_new.fuzzy_ok == m_old.fuzzy_ok
            title_new = {lv: {self.new.lexicon.id_at(s) for s in g} for lv, g in m_new.title}
            title_old = {lv: {self.old.lexicon.id_at(s) for s in g} for lv, g in m_old.title}
            assert title_new == title_old, tok
            assert self.new.lexicon.candidates_for_tokens([tok]) == (
                self.old.lexicon.candidates_for_tokens([tok])
            )
        plan = self.plans.setdefault(tuple(tokens), self.new.plan(tokens))
        # The same plan and filters at another hour (deadlines are at hours 1, 2, 3 and 9).
        for hour in (now_h, later_h):
            assert_same_ranking(
                self.new,
                self.old,
                tokens,
                kind=kind,
                subject=subject,
                hidden=hidden,
                limit=limit,
                partition=partition,
                now_ts=(T0 + _dt.timedelta(hours=hour)).timestamp(),
                plan=plan,
            )

    @rule()
    def consistent(self) -> None:
        # A rule, not an invariant: reading applies the new index's queued
        # writes, so writes must also reach it in runs of several between reads.
        self.new.lexicon._check()
        assert len(self.new) == len(self.old) == len(self.live)
        # Writes applied in a batch leave the documents in the slot order (which
        # orders ties) that applying them one by one does.
        assert slot_order(self.new) == slot_order(self.eager)
        for ident in self.live:
            assert self.new.lexicon.doc_words(ident) == self.old.lexicon.doc_words(ident)
        for w in ("a", "ab", "bad", "1", "12"):
            assert self.new.lexicon.doc_freq(w) == self.old.lexicon.doc_freq(w)
            assert sorted(self.new.lexicon.ids_with_word(w)) == sorted(
                self.old.lexicon.id_at(s) or "" for s in self.old.lexicon._postings.get(w, ())
            )


TestDifferential = DifferentialMachine.TestCase
TestDifferential.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_ties_at_the_cut_break_by_recency_then_id() -> None:
    """Many equal scores and update times: the cut and the order follow the ids."""
    new, old = LexicalIndex(), OracleLexicalIndex()
    for i in range(40):
        it = Item(
            id=f"x{39 - i:02d}",
            kind="fact",
            content="alpha beta",
            updated_at=T0 + _dt.timedelta(hours=i % 2),
        )
        new.put(it, False)
        old.put(it, False)
    for limit in (None, 1, 5, 20, 21, 39, 40, 41):
        assert_same_ranking(new, old, ["alpha"], limit=limit)
        assert_same_ranking(new, old, ["alpha", "beta", "alpah"], limit=limit)


def test_compaction_renumbers_per_slot_filters() -> None:
    """After a compaction the kind, subject and deadline filters follow the documents."""
    new, old = LexicalIndex(compact_min=1, overlay_max=1), OracleLexicalIndex()
    for i in range(12):
        it = Item(
            id=f"i{i}",
            kind=KINDS[i % 3],
            content=f"common word{i % 4}",
            subject=SUBJECTS[i % 3],
            updated_at=T0 + _dt.timedelta(minutes=i),
        )
        new.put(it, False)
        old.put(it, False)
    for i in range(0, 12, 2):
        new.remove(f"i{i}")
        old.remove(f"i{i}")
    assert new.lexicon.capacity == 6  # compacted: dead slots are gone
    for kind in ("", *KINDS):
        for subject in SUBJECTS:
            assert_same_ranking(new, old, ["common"], kind=kind, subject=subject, limit=None)


def _benchmarks_path() -> None:
    bench = str(Path(__file__).resolve().parent.parent / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)


@pytest.mark.parametrize("size", [1500])
def test_benchmark_corpus_agrees(size: int) -> None:
    """The benchmark corpus and its query mix (every category) rank identically."""
    _benchmarks_path()
    from corpus import generate_corpus, make_queries

    notes = generate_corpus(size, seed=11)
    new, old = LexicalIndex(compact_min=64), OracleLexicalIndex()
    for i, n in enumerate(notes):
        it = Item(
            id=f"n{i:05d}",
            kind=n.kind,
            title=n.title,
            content=n.content,
            subject=n.subject,
            event_date=n.event_date,
            updated_at=T0 + _dt.timedelta(seconds=i % 97),
        )
        new.put(it, False)
        old.put(it, False)
    for i in range(0, size, 7):  # updates and deletes: dead slots, then a compaction
        n = notes[(i * 31) % size]
        it = Item(id=f"n{i:05d}", kind=n.kind, title=n.content[:30], content=n.title)
        new.put(it, False)
        old.put(it, False)
        if i % 3 == 0:
            new.remove(f"n{i + 1:05d}")
            old.remove(f"n{i + 1:05d}")
    for q in make_queries(notes, 120, seed=11):
        tokens = kw_tokens(normalize_query(q.text))
        if tokens:
            assert_same_ranking(new, old, tokens, hidden=("hypothesis",))
            assert_same_ranking(new, old, tokens, kind="event", limit=3)
    new.lexicon._check()


@settings(max_examples=300)
@given(
    st.lists(st.sampled_from([0.1, 0.25, 0.5, 0.75, 1.0]) | st.floats(0.01, 1.0), min_size=1),
    st.data(),
)
def test_kth_largest_is_the_partition_value(values: list[float], data: st.DataObject) -> None:
    scores = np.array(values)
    k = data.draw(st.integers(1, len(values)))
    assert _kth_largest(scores, k) == np.partition(scores, scores.size - k)[scores.size - k]
    # Past _PARTITION_MAX candidates it walks the distinct maxima first.
    many = np.tile(scores, _PARTITION_MAX // scores.size + 1)
    k = data.draw(st.integers(1, many.size))
    assert _kth_largest(many, k) == np.partition(many, many.size - k)[many.size - k]


needs_speedups = pytest.mark.skipif(
    _wordbatch.speedups is None, reason="memstore._speedups is not built (or switched off)"
)


@needs_speedups
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=st.lists(st.tuples(text, text, st.sampled_from([0, 1, 1, 2])), min_size=1, max_size=300),
    query=st.lists(word, min_size=1, max_size=4).map(" ".join),
    limit=st.sampled_from([None, 1, 2, 7, 50, 200]),
    dead=st.integers(0, 3),
)
def test_the_compiled_rank_is_the_numpy_one_on_large_ties(
    docs: list[tuple[str, str, int]], query: str, limit: int | None, dead: int
) -> None:
    """Hundreds of documents over a tiny vocabulary (scores and update times tie at the cut,
    the cut partitions many candidates), some replaced or removed: the compiled rank and
    the numpy one agree bit for bit."""
    index = LexicalIndex(compact_min=8)
    for i, (title, content, hour) in enumerate(docs):
        it = Item(id=f"d{i:03d}", kind=KINDS[i % 3], title=title, content=content)
        index.put(it.model_copy(update={"updated_at": T0 + _dt.timedelta(hours=hour)}), False)
    for i in range(0, len(docs), 1 + dead):
        if dead:
            index.remove(f"d{i:03d}")
    tokens = kw_tokens(normalize_query(query))
    if not tokens:
        return
    plan = index.plan(tokens)
    for kind, hidden in (("", ()), ("", ("note",)), ("event", ())):
        args = {"kind": kind, "subject": "", "hidden_kinds": hidden, "now_ts": NOW.timestamp()}
        got = index.rank(plan, limit=limit, **args)  # type: ignore[arg-type]
        with _wordbatch.pure_python():
            want = index.rank(plan, limit=limit, **args)  # type: ignore[arg-type]
        assert list(got) == list(want) and got.scores.tobytes() == want.scores.tobytes()


@needs_speedups
def test_the_compiled_rank_runs_and_hands_back_what_it_cannot_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A search ranks through ``lex_rank`` where it is built; a plan it cannot take (a
    match's slots out of order, not 8-byte integers, or not contiguous) is ranked by numpy."""
    index = LexicalIndex()
    for i in range(6):
        index.put(Item(id=f"i{i}", kind="fact", content=f"alpha beta{i % 2}"), False)
    native = _wordbatch.speedups
    calls: list[object] = []

    class Counting:
        def __getattr__(self, name: str) -> object:  # the write loop, as built
            return getattr(native, name)

        def lex_rank(self, *args: object) -> object:
            calls.append(args)
            return native.lex_rank(*args)  # type: ignore[union-attr]

    monkeypatch.setattr(_wordbatch, "speedups", Counting())
    args = {"kind": "", "subject": "", "hidden_kinds": (), "now_ts": NOW.timestamp(), "limit": 4}
    plan = index.plan(["alpha", "beta1"])
    got = index.rank(plan, **args)  # type: ignore[arg-type]
    assert len(calls) == 1 and [h.id for h in got] == ["i1", "i3", "i5", "i0"]
    m = plan.matches[0]
    odd = [
        TokenMatch(m.slots[::-1].copy(), m.levels[::-1].copy(), m.title_slots, m.title_levels),
        TokenMatch(m.slots[::-1], m.levels[::-1], m.title_slots, m.title_levels),
        TokenMatch(m.slots.astype(np.int32), m.levels, m.title_slots, m.title_levels),
    ]
    for bad in odd:
        skewed = QueryPlan(plan.tokens, (bad, *plan.matches[1:]), plan.weights, plan.fuzzy_ok)
        with pytest.raises(Unranked):
            tokens, scoring = plan_tokens(skewed)
            index._rank_native(native, tokens, scoring, ("", "", (), None), NOW.timestamp(), 4)
        assert list(index.rank(skewed, **args)) == list(got)  # type: ignore[arg-type]


def test_a_kept_plan_follows_a_metadata_write() -> None:
    """A plan kept across a write that changes an item's filters alone ranks by the new ones.

    Changing only an item's kind leaves its words, so the lexicon (and the
    plan's token matches) stay as they were; the kind filter must see the new kind.
    """
    index = LexicalIndex()
    a = Item(id="a", kind="fact", content="alpha")
    index.put(a, False)
    index.put(Item(id="b", kind="fact", content="alpha beta"), False)
    plan = index.plan(["alpha"])
    args = {"subject": "", "hidden_kinds": (), "now_ts": NOW.timestamp(), "limit": 5}
    assert [h.id for h in index.rank(plan, kind="fact", **args)] == ["a", "b"]  # type: ignore[arg-type]
    generation = index.lexicon.generation
    index.put(a.model_copy(update={"kind": "event"}), False)
    assert index.lexicon.generation == generation  # the words did not change
    assert [h.id for h in index.rank(plan, kind="fact", **args)] == ["b"]  # type: ignore[arg-type]


@given(st.text(alphabet="aZ0b.Q -yXX9", max_size=16))
def test_ascii_camel_split_is_the_camel_rule(s: str) -> None:
    """The class-string split in ``words`` puts a space exactly where the CamelCase rule does."""
    import re

    from memstore.text import _ascii_camel_split

    rule = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
    assert _ascii_camel_split(s) == rule.sub(" ", s)


@given(st.text(alphabet="aZ0b.Q -yXX9:,_\t", max_size=24))
def test_ascii_words_are_the_regex_rule(s: str) -> None:
    """The translate-and-split ASCII path of ``words`` finds the regex rule's words."""
    import re

    from memstore.text import words

    camel = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
    word = re.compile(r"[0-9]+(?:[.:][0-9]+)+|(?:[a-z]|[0-9]++(?![.:][0-9]))+")
    assert words(s) == word.findall(camel.sub(" ", s).lower())


def test_a_known_word_new_to_titles_gets_the_title_bonus() -> None:
    """The cached expansion must see a word's first title use (the vocabulary is unchanged)."""
    new, old = LexicalIndex(), OracleLexicalIndex()
    first = Item(id="a", kind="fact", title="other", content="alpha")
    for index in (new, old):
        index.put(first, False)
    assert_same_ranking(new, old, ["alpha"])  # expands and caches "alpha"
    second = Item(id="b", kind="fact", title="alpha", content="other")  # no new word
    for index in (new, old):
        index.put(second, False)
    assert_same_ranking(new, old, ["alpha"])


def test_a_split_serves_only_the_put_of_the_same_strings() -> None:
    """``split`` words go to the next ``put`` of the very same title and content, no other."""
    new, old = LexicalIndex(), OracleLexicalIndex()
    a = Item(id="a", kind="fact", title="alpha", content="one", event_date="2023-06-27")
    b = Item(id="b", kind="fact", title="beta", content="two")
    new.split(a)
    new.put(b, False)  # not a's strings: split afresh
    new.split(a)
    new.put(a, True)  # a's strings: the split's words, with the date's and the id's
    for item, flag in ((b, False), (a, True)):
        old.put(item, flag)
    assert new.lexicon.doc_words("b") == ("beta", "two")
    assert new.lexicon.doc_words("a") == ("alpha", "one", "june", "2023", "a")
    for tokens in (["alpha"], ["beta"], ["two"], ["june"]):
        assert_same_ranking(new, old, tokens)
