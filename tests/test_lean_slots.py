"""The lean fusion finds each channel hit's snapshot slot as the snapshot's own dictionary does.

:func:`memstore.search._lean.slots_of` turns a ranking's ids (the lexical
channel's, the BM25 channel's, the feedback round's) into the slots of the
search snapshot, in one compiled loop where ``memstore._speedups`` is built,
else by :func:`~memstore.search._lean._slots_of`, its oracle. Hypothesis
holds the two to the same arrays over drawn dictionaries (ids missing, values
past a snapshot's length, equal ids that are other string objects), and then
drives a store through puts, re-puts, removes and lexicon compactions: after
each step, every lexical and BM25 hit must land on ``snapshot.slot_of(id)``,
for the store's current snapshot and for one held from before the writes
(whose dictionary a derived snapshot extends past its length). The channels'
scores, best first, are normalised by their first and last entries: the same
floats as a pass over the whole array.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Item, Store, _wordbatch
from memstore._search_snapshot import SearchSnapshot
from memstore.search._lean import _minmax, _slots_of, slots_of

try:
    from memstore import _speedups as COMPILED
except ImportError:  # not built: the differential tests skip
    COMPILED = None

needs_speedups = pytest.mark.skipif(COMPILED is None, reason="memstore._speedups is not built")

IDS = [f"id-{i:02d}" for i in range(12)]
WORDS = ["ledger", "pool", "deploy", "friday", "tax", "kitten", "pottery", "bowl", "api"]


@pytest.fixture(autouse=True)
def _compiled_outside_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled loop where it is built, even under ``MEMSTORE_PURE_PYTHON=1``."""
    if COMPILED is not None:
        monkeypatch.setattr(_wordbatch, "speedups", COMPILED)


@st.composite
def lookups(draw: st.DrawFn) -> tuple[list[str], dict[str, int], int]:
    """Ids to look up (some not held, repeats, equal copies), a dictionary, a snapshot length."""
    held = draw(st.lists(st.sampled_from(IDS), unique=True, max_size=len(IDS)))
    values = draw(st.permutations(range(len(held))))
    slot = dict(zip(held, values, strict=True))
    size = draw(st.integers(0, len(held) + 1))
    ids = draw(st.lists(st.sampled_from([*IDS, "other"]), max_size=30))
    copies = draw(st.booleans())  # equal strings that are not the dictionary's objects
    if copies:
        ids = ["".join(list(i)) for i in ids]
    return ids, slot, size


@needs_speedups
@settings(max_examples=300, deadline=None)
@given(lookups(), st.sampled_from([list, tuple]))
def test_compiled_slots_are_the_oracles(
    case: tuple[list[str], dict[str, int], int], shape: type
) -> None:
    """The same slots (and the same "all held") in C as in Python, for lists and tuples."""
    ids, slot, size = case
    got, every = slots_of(shape(ids), slot, size)
    want, want_every = _slots_of(shape(ids), slot, size)
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()
    assert every == want_every
    assert got.tolist() == [s if 0 <= (s := slot.get(i, -1)) < size else -1 for i in ids]


@needs_speedups
def test_compiled_slots_refuse_bad_input() -> None:
    """A mapping that is not a dict, ids that are not a sequence, or a slot that is
    not an integer raise ``TypeError`` (and the dictionary is left as it was)."""
    assert COMPILED is not None
    slot = {"a": 0, "b": 1}
    with pytest.raises(TypeError, match="dict"):
        COMPILED.slots_of(["a"], list(slot.items()), 2)
    with pytest.raises(TypeError, match="sequence"):
        COMPILED.slots_of(5, slot, 2)
    with pytest.raises(TypeError):
        COMPILED.slots_of(["a"], {"a": "zero"}, 2)
    with pytest.raises(TypeError):
        COMPILED.slots_of([["unhashable"]], slot, 2)
    assert slot == {"a": 0, "b": 1}


@given(st.lists(st.floats(0.0, 4.0, allow_nan=False), max_size=40))
def test_best_first_minmax_is_minmax(scores: list[float]) -> None:
    """Normalising a best-first ranking by its ends gives the whole pass's floats, bit for bit."""
    ranked = np.array(sorted(scores, reverse=True), np.float64)
    assert _minmax(ranked, True).tobytes() == _minmax(ranked).tobytes()


def _item(id: str, words: list[str]) -> Item:
    return Item(id=id, kind="note", title=" ".join(words[:2]), content=" ".join(words))


_op = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(IDS), st.lists(st.sampled_from(WORDS), min_size=1)),
    st.tuples(st.just("remove"), st.sampled_from(IDS), st.just([])),
    st.tuples(st.just("compact"), st.just(""), st.just([])),
    st.tuples(st.just("hold"), st.just(""), st.just([])),
)


def _check_hits(store: Store, snap: SearchSnapshot) -> None:
    """Every lexical and BM25 hit's slot, through :func:`slots_of`, is ``snap.slot_of(id)``."""
    for query in WORDS[:5]:
        hits, _ = store.keyword_ranked(query, limit=50)
        bm25 = store.keyword_bm25(query, limit=50)
        for ids in (hits.ids, bm25.ids):  # type: ignore[attr-defined]
            got, every = slots_of(ids, snap.slot, len(snap))
            want = [snap.slot_of(id) for id in ids]
            assert got.tolist() == want
            assert every == (-1 not in want)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_op, min_size=1, max_size=25))
def test_lexical_hits_land_on_their_snapshot_slots(ops: list[tuple[str, str, list[str]]]) -> None:
    """After any writes, each hit of either lexical ranking lands on its id's snapshot slot."""
    store = Store()
    held: SearchSnapshot | None = None
    for op, id, words in ops:
        if op == "put":
            store.upsert(_item(id, words))
        elif op == "remove":
            store.delete(id)
        elif op == "compact":
            store._lex.lexicon.compact()
        else:
            held = store.search_snapshot()
        snap = store.search_snapshot()
        if snap is not None:
            _check_hits(store, snap)
        if held is not None:  # an older snapshot: ids written since are not its own
            _check_hits(store, held)
