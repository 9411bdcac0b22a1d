"""One-edit neighbours, joined-word pairs and level merges equal brute force.

The Lexicon finds a token's one-edit neighbours, and the neighbours of every
half of it that can make a joined pair, with one batched probe of the
deletion index (keys computed from prefix sums of the token). Here each is
checked against a scan of every vocabulary word (and every pair of words),
through adds, removals, segment merges and compactions.
"""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memstore.lexical
from memstore._vocabindex import VocabIndex, hash_string, span_edit_hashes
from memstore.lexical import (
    LEVEL_EDIT,
    LEVEL_EXACT,
    LEVEL_PREFIX,
    LEVEL_STEM,
    LEVEL_SUBSTRING,
    MAX_EDIT_CHARS,
    Lexicon,
    best_levels,
    within_one_edit,
    word_level,
)
from memstore.text import stem

# Few letters (and a digit, an ideograph) so neighbours and joins are common.
small_word = st.text(alphabet="ab1日", min_size=1, max_size=5)
token = st.text(alphabet="ab1日", min_size=0, max_size=8)


@given(st.text(alphabet="ab1日😀é", max_size=10), st.data())
def test_span_edit_hashes_are_the_hashes_of_the_strings(s: str, data: st.DataObject) -> None:
    spans = data.draw(
        st.lists(
            st.tuples(st.integers(0, len(s)), st.integers(0, len(s))).map(
                lambda t: (min(t), max(t))
            ),
            max_size=5,
        )
    )
    got = span_edit_hashes(s, spans)
    want = [
        [hash_string(s[a:b])] + [hash_string(s[a:i] + s[i + 1 : b]) for i in range(a, b)]
        for a, b in spans
    ]
    assert got == want


def _brute_neighbours(vocab: set[str], s: str) -> set[str]:
    return {w for w in vocab if within_one_edit(s, w)}


def _brute_pairs(vocab: set[str], tok: str) -> set[tuple[str, str]]:
    """Word pairs whose join is one edit from ``tok``, neither word matched at EDIT or better."""
    if len(tok) <= 2:
        return set()
    strong = {w for w in vocab if word_level(tok, w) >= LEVEL_EDIT}
    weak = vocab - strong
    return {(a, b) for a in weak for b in weak if within_one_edit(tok, a + b)}


def _vocab(lex: Lexicon) -> set[str]:
    return {w for w, n in lex._df.items() if n}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.booleans(), st.lists(small_word, min_size=1, max_size=4)), max_size=25),
    st.lists(token, min_size=1, max_size=6),
    st.sampled_from([(1, 1), (2, 3), (4096, 4096)]),
)
def test_neighbours_and_pairs_equal_brute_force_through_churn(
    ops: list[tuple[bool, list[str]]], toks: list[str], sizes: tuple[int, int]
) -> None:
    compact_min, overlay_max = sizes
    lex = Lexicon(compact_min=compact_min, overlay_max=overlay_max)
    for n, (remove, ws) in enumerate(ops):
        if remove and n:
            lex.remove(f"d{n // 2}")  # some ids were never indexed: a no-op
        lex.index(f"d{n}", "", " ".join(ws))
        vocab = _vocab(lex)
        for tok in toks:
            assert lex.edit_neighbours(tok) == _brute_neighbours(vocab, tok), tok
            ex = lex._expand(tok)
            assert set(ex.pairs) == _brute_pairs(vocab, tok), tok
            assert len(ex.pairs) == len(set(ex.pairs))
            edits = {w for w, lv in ex.levels.items() if lv == LEVEL_EDIT}
            assert edits == {w for w in vocab if word_level(tok, w) == LEVEL_EDIT}, tok


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.booleans(), small_word), min_size=1, max_size=40),
    st.lists(token, min_size=1, max_size=4),
    st.sampled_from([(1, 1), (4, 5), (1000, 4096)]),
)
def test_edit_candidates_are_the_deletion_words_of_each_span(
    ops: list[tuple[bool, str]], toks: list[str], sizes: tuple[int, int]
) -> None:
    """One batched probe finds, per span, what a probe of its strings alone finds."""
    v = VocabIndex(compact_min=sizes[0], overlay_max=sizes[1])
    live: set[str] = set()
    for remove, w in ops:
        if remove and w in live:
            v.remove(w)
            live.discard(w)
        else:
            v.add(w)
            live.add(w)
        for tok in toks:
            spans = [(a, b) for a in range(len(tok) + 1) for b in range(a, len(tok) + 1)]
            got = v.edit_candidates(tok, spans)
            for (a, b), words in zip(spans, got, strict=True):
                s = tok[a:b]
                probes = [s, *(s[:i] + s[i + 1 :] for i in range(len(s)))]
                assert words == v.deletion_words(probes), (tok, a, b)
                # Every word one insertion, substitution or transposition away is found
                # (a hash only adds candidates): none of ASCII digits alone is indexed.
                near = {
                    w
                    for w in live
                    if within_one_edit(s, w)
                    and len(w) >= len(s)
                    and not (w.isascii() and w.isdigit())
                }
                assert near <= set(words), (tok, a, b)


def test_a_transposition_across_the_join_finds_the_pair() -> None:
    """ "aabb" is "ab"+"ab" with the two middle letters swapped: no split has a word as a half."""
    lex = Lexicon()
    lex.index("d", "", "ab ab")
    lex.index("e", "", "ab ba")
    assert lex._expand("aabb").pairs == [("ab", "ab")]
    assert lex.candidates("aabb") == {"d"}


@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.3, 0.6, 0.8, 0.85, 1.0]),
            st.lists(st.lists(st.integers(0, 299), max_size=90), max_size=3),
        ),
        max_size=4,
    ),
    st.sampled_from([300, 5000]),
    st.one_of(st.none(), st.lists(st.booleans(), min_size=300, max_size=300)),
)
def test_best_levels_is_each_live_slots_best_level(
    groups: list[tuple[float, list[list[int]]]], capacity: int, alive: list[bool] | None
) -> None:
    """Every merge path (one increasing array, a dictionary, a sort, a dense array)."""
    arrays = [(lv, [np.array(sorted(set(a)), np.int32) for a in arrs]) for lv, arrs in groups]
    live = None if alive is None else np.array(alive + [True] * (capacity - 300))
    slots, levels = best_levels(arrays, capacity, live)
    want: dict[int, float] = {}
    for lv, arrs in groups:
        for a in arrs:
            for s in a:
                if alive is None or alive[s]:
                    want[s] = max(want.get(s, 0.0), lv)
    assert slots.dtype == np.intp and levels.dtype == np.float64
    assert slots.tolist() == sorted(want)
    assert levels.tolist() == [want[s] for s in sorted(want)]


def _brute_level(tok: str, ws: list[str]) -> float:
    best = max((word_level(tok, w) for w in ws), default=0.0)
    joins = (ws[i] + ws[i + 1] for i in range(len(ws) - 1))
    if best < LEVEL_EDIT and len(tok) > 2 and any(within_one_edit(tok, j) for j in joins):
        best = LEVEL_EDIT
    return best


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.lists(st.sampled_from(["ab", "cd", "abc", "b", "dc", "x", "abcd"]), max_size=5),
        min_size=40,
        max_size=120,
    ),
    st.sampled_from(["abcd", "abdc", "cdab", "abcdx", "bcd", "abxcd", "acbd", "bab"]),
    st.lists(st.integers(0, 119), max_size=30),
)
def test_joined_documents_equal_brute_force_with_many_documents(
    docs: list[list[str]], tok: str, removed: list[int]
) -> None:
    """Pairs whose words are in many documents (postings intersected) and in few (scanned)."""
    lex = Lexicon()
    for i, ws in enumerate(docs):
        lex.index(f"d{i}", "", " ".join(ws))
    for i in removed:
        lex.remove(f"d{i}")
    got = {lex.id_at(s): lv for lv, g, _ in lex.match_token(tok, fuzzy=False).groups for s in g}
    want = {}
    for i, ws in enumerate(docs):
        if i not in removed and (lv := _brute_level(tok, ws)) > 0.0:
            want[f"d{i}"] = lv
    assert got == want


def _level_without_edits(tok: str, w: str) -> float:
    """word_level(tok, w) with the one-edit level left out: exact, substring, stem."""
    if tok == w:
        return LEVEL_EXACT
    best = 0.0
    if tok in w:
        best = LEVEL_PREFIX if len(tok) >= 3 and w.startswith(tok) else LEVEL_SUBSTRING
    if best < LEVEL_STEM and len(tok) > 2 and stem(tok) == stem(w):
        best = LEVEL_STEM
    return best


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(small_word, min_size=1, max_size=4), min_size=1, max_size=12),
    st.lists(token, min_size=1, max_size=6),
)
def test_tokens_longer_than_the_edit_cap_match_without_edits(
    docs: list[list[str]], toks: list[str]
) -> None:
    # MAX_EDIT_CHARS is read at each expansion: a cap of 4 puts half the tokens above it.
    with patch.object(memstore.lexical, "MAX_EDIT_CHARS", 4):
        lex = Lexicon()
        for n, ws in enumerate(docs):
            lex.index(f"d{n}", "", " ".join(ws))
        vocab = _vocab(lex)
        for tok in filter(None, toks):  # an empty token matches nothing
            ex = lex._expand(tok)
            if len(tok) <= 4:
                want = {w: word_level(tok, w) for w in vocab}
                assert set(ex.pairs) == _brute_pairs(vocab, tok), tok
            else:
                want = {w: _level_without_edits(tok, w) for w in vocab}
                assert ex.pairs == [], tok
            assert ex.levels == {w: lv for w, lv in want.items() if lv}, tok


def test_a_long_digit_run_matches_exactly_and_by_prefix_only() -> None:
    # The shape that took minutes: a query of 10,000 "1"s and a vocabulary of
    # "1", "11", ..., each a prefix and suffix of it (a split to probe).
    tok = "1" * 10_000
    lex = Lexicon()
    lex.index("runs", "", " ".join("1" * j for j in range(1, 11)))
    lex.index("longer", "", tok + "2")  # the token is a prefix of it
    lex.index("same", "", "x " + tok)
    lex.index("one-edit", "", "1" * 9_999)  # one deletion away: above the cap, no match
    assert lex.candidates(tok) == {"longer", "same"}
    assert lex._expand(tok).levels == {tok + "2": LEVEL_PREFIX, tok: LEVEL_EXACT}
    # At the cap the one-edit rule holds as before.
    at_cap = "1" * MAX_EDIT_CHARS
    lex.index("near", "", at_cap[:-1] + "2 " + "a" * (MAX_EDIT_CHARS + 1))
    assert lex.candidates(at_cap) == {"longer", "same", "one-edit", "near"}
    assert "near" not in lex.candidates("a" * (MAX_EDIT_CHARS + 2))


def test_the_brute_force_rule_caps_edits_as_the_index_does() -> None:
    """Private items are scored by score_document: a long token gets no edit match there either."""
    from memstore._matchrule import LEVEL_EDIT, MAX_EDIT_CHARS, word_level

    long_word = "a" * (MAX_EDIT_CHARS + 1)
    assert word_level(long_word, long_word[:-1] + "b") == 0.0  # one substitution away
    at_cap = "a" * MAX_EDIT_CHARS
    assert word_level(at_cap, at_cap[:-1] + "b") == LEVEL_EDIT
