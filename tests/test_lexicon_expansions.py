"""Cached token expansions and matches that outlive writes answer as fresh ones do.

The Lexicon keeps a token's vocabulary expansion across a write whose new or
vanished words cannot change it (:mod:`memstore._vocablog`), and its match
across a write whose documents hold none of its words, or that only adds
documents (appended at their levels: :mod:`memstore._writelog`). The oracle
is the computation from scratch: a twin Lexicon fed the same writes, its
caches cleared before every match. Writes and matches interleave at random
over a small vocabulary of near words (shared prefixes, typos, stems,
digits, joined words), so most writes bring words some cached token must
react to.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memstore._vocablog import VocabLog
from memstore._writelog import WriteLog
from memstore.lexical import Lexicon, TokenMatch

BASE = [
    "camp", "camping", "camped", "camps", "cmap", "cam", "ca", "c", "campaign",
    "pay", "payment", "paymnet", "payments", "api", "paymentapi", "ap", "a",
    "12", "123", "1234", "2024", "20x4", "x", "deploy", "deployment", "deplyo",
    "stop", "stopped", "stops", "tokens", "token", "tokenapi", "mentapi",
    "try", "tries", "tried", "deploying", "campaigning",
]  # fmt: skip

word = st.one_of(st.sampled_from(BASE), st.text(alphabet="acmp1x2y", min_size=1, max_size=6))
words = st.lists(word, max_size=4)
doc_id = st.sampled_from(["d0", "d1", "d2", "d3", "d4", "d5"])
op = st.one_of(
    st.tuples(st.just("index"), st.lists(st.tuples(doc_id, words, words), min_size=1, max_size=3)),
    st.tuples(st.just("remove"), doc_id),
    st.tuples(st.just("compact")),
    st.tuples(st.just("match"), st.one_of(st.sampled_from(BASE), word), st.booleans()),
)


def _expansion(lex: Lexicon, tok: str, fuzzy: bool) -> tuple[Any, ...]:
    """The order-free content of ``tok``'s cached expansion (lists come in vocabulary order).

    Its fuzzy words when the match just made used them (computed then, or kept).
    """
    ex = lex._expansions[tok]
    fz = {w: lv for lv, ws in ex.fuzzy for w in ws} if fuzzy and ex.fuzzy is not None else None
    return ex.levels, set(ex.pairs), set(ex.strong), ex.fuzzy_ok, fz


def _same(a: TokenMatch, b: TokenMatch) -> bool:
    return (
        a.slots.tolist() == b.slots.tolist()
        and a.levels.tolist() == b.levels.tolist()
        and a.title_slots.tolist() == b.title_slots.tolist()
        and a.title_levels.tolist() == b.title_levels.tolist()
        and a.fuzzy_ok == b.fuzzy_ok
    )


def _check_match(cached: Lexicon, fresh: Lexicon, tok: str, fuzzy: bool) -> None:
    fresh.clear_caches()
    got, want = cached.match_token(tok, fuzzy=fuzzy), fresh.match_token(tok, fuzzy=fuzzy)
    assert _same(got, want), (tok, fuzzy, got, want)
    assert _expansion(cached, tok, fuzzy) == _expansion(fresh, tok, fuzzy), tok


def _arrives(tok: str, word: str, before: str = "x") -> list[tuple[Any, ...]]:
    """``tok`` matched, then ``word`` enters the vocabulary (an example per relevance channel)."""
    return [
        ("index", [("d0", [], [before])]),
        ("match", tok, True),
        ("index", [("d1", [], [word])]),
    ]


def _write(o: tuple[Any, ...], *lexicons: Lexicon) -> None:
    """Apply one write op (``index``, ``remove`` or ``compact``) to each of ``lexicons``."""
    for lex in lexicons:
        if o[0] == "index":
            lex.index_many([(i, t, c) for i, t, c in o[1]])
        elif o[0] == "remove":
            lex.remove(o[1])
        else:
            lex.compact()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(_arrives("ca", "campaigning"), 256, 1)  # a substring, no other channel
@example(_arrives("try", "tries"), 256, 1)  # the same stem, no other channel
@example(_arrives("cmap", "camp"), 256, 1)  # one edit, no shared trigram
@example(_arrives("paymentap", "ap", "payment"), 256, 1)  # the half of a joined pair
@example(_arrives("camppa", "p", "camp"), 256, 1)  # one character: a joined pair's half
@example(_arrives("camp12", "2", "camp"), 256, 1)  # one digit: a digit word near a half
@example(_arrives("campxy", "xz", "camp"), 256, 1)  # two characters, one new: a half's edit
@example(_arrives("cap", "crap"), 256, 1)  # one character longer, by a character new to it
@example(_arrives("deploying", "deployment"), 256, 1)  # fuzzy: a shared trigram alone
@given(st.lists(op, max_size=40), st.sampled_from([2, 8, 256]), st.integers(1, 3))
def test_cached_expansions_match_a_fresh_lexicon(
    ops: list[tuple[Any, ...]], bound: int, compact_min: int
) -> None:
    """After every write, every token matched so far is matched again, cached and fresh.

    So each cached expansion meets every vocabulary change: one the
    relevance test lets through wrongly shows as a different match.
    """
    cached = Lexicon(compact_min=compact_min, overlay_max=4)
    fresh = Lexicon(compact_min=compact_min, overlay_max=4)
    cached._vlog = VocabLog(bound)  # small bounds reach the forgotten-changes paths
    cached._wlog = WriteLog(bound)
    seen: dict[tuple[str, bool], None] = {}
    for o in ops:
        if o[0] == "match":
            _, tok, fuzzy = o
            seen[tok, fuzzy] = None
            _check_match(cached, fresh, tok, fuzzy)
            continue
        _write(o, cached, fresh)
        for tok, fuzzy in seen:
            _check_match(cached, fresh, tok, fuzzy)
    cached._check()


def test_an_unrelated_word_keeps_the_expansion_and_a_related_one_drops_it() -> None:
    """The reuse is real (the same object survives a date's arrival) and so is the drop."""
    lex = Lexicon()
    lex.index("a", "", "camping trip payment")
    lex.match_token("camp")
    kept = lex._expansions["camp"]
    lex.index("b", "", "on 2024")  # new words "on", "2024": nothing near "camp"
    lex.match_token("camp")
    assert lex._expansions["camp"] is kept
    lex.index("c", "", "camped")  # the same stem
    assert lex.match_token("camp").slots.tolist() == [0, 2]
    assert lex._expansions["camp"] is not kept and "camped" in lex._expansions["camp"].levels
    lex.compact()  # renumbers the postings: nothing survives it
    assert "camp" not in lex._expansions


def test_a_match_survives_a_write_that_touches_none_of_its_words() -> None:
    """The same TokenMatch after an unrelated write; a new one after a write holding its word.

    Document "z" keeps every word in the vocabulary, so the expansions stand
    and only the write log can tell the match changed.
    """
    lex = Lexicon()
    lex.index("z", "", "payment camping deployment api")
    lex.index("a", "Camping", "trip")
    kept = lex.match_token("camp")
    lex.index("b", "", "on 2024")
    assert lex.match_token("camp") is kept
    lex.index("c", "the camping", "trip")  # a word "camp" matches: the match grows
    grown = lex.match_token("camp")
    assert grown.slots.tolist() == [0, 1, 3] and grown.title_slots.tolist() == [1, 3]
    assert grown.levels.tolist() == [0.9] * 3 and not grown.slots.flags.writeable
    lex.remove("c")
    assert lex.match_token("camp").slots.tolist() == [0, 1]
    lex.index("a", "Hiking", "trip")  # re-indexed: its old words count too
    assert lex.match_token("camp").slots.tolist() == [0]


def test_a_write_holding_a_joined_pair_or_a_fuzzy_word_renews_the_match() -> None:
    """Words a match is made of besides its levels: a joined pair's, the fuzzy channel's."""
    lex = Lexicon()
    lex.index("z", "", "payment camping deployment api")
    assert lex.match_token("paymentapi", fuzzy=False).slots.tolist() == []  # not adjacent in "z"
    lex.index("p", "", "payment api")
    assert lex.match_token("paymentapi", fuzzy=False).slots.tolist() == [1]
    # The fuzzy words join the match's words once computed, after the exact ones were.
    lex.match_token("deploying", fuzzy=False)
    lex.index("b", "", "payment")  # no new word: the match is checked (and kept)
    assert lex.match_token("deploying", fuzzy=False).slots.tolist() == []
    assert lex.match_token("deploying").slots.tolist() == [0]
    lex.index("d", "", "deployment")
    assert lex.match_token("deploying").slots.tolist() == [0, 3]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=40), st.integers(1, 3))
def test_small_caches_evict_and_still_match_as_fresh(
    ops: list[tuple[Any, ...]], compact_min: int
) -> None:
    """With room for three tokens, the caches evict all the time: matches stay exact.

    An evicted expansion under a kept match (or the reverse) must be
    recomputed, never paired with a stale one.
    """
    cached = Lexicon(compact_min=compact_min, overlay_max=4, cache_entries=3)
    fresh = Lexicon(compact_min=compact_min, overlay_max=4)
    seen: dict[tuple[str, bool], None] = {}
    for o in ops:
        if o[0] == "match":
            seen[o[1], o[2]] = None
        else:
            _write(o, cached, fresh)
        for tok, fuzzy in seen:
            fresh.clear_caches()
            got, want = cached.match_token(tok, fuzzy=fuzzy), fresh.match_token(tok, fuzzy=fuzzy)
            assert _same(got, want), (tok, fuzzy, got, want)
            assert len(cached._expansions) <= 3 and len(cached._matches) <= 3
    cached._check()


def test_a_full_cache_drops_the_least_recently_used_token() -> None:
    """Not everything at once: a token matched again stays, the one unused longest goes."""
    lex = Lexicon(cache_entries=2)
    lex.index("a", "", "camping trip payment deploy")
    lex.match_token("camp")
    lex.match_token("pay")
    kept = lex._expansions["camp"]
    lex.match_token("camp")  # used again: now the most recent
    lex.match_token("deploy")  # the cache is full: "pay" goes
    assert list(lex._expansions) == ["camp", "deploy"] and lex._expansions["camp"] is kept
    assert list(lex._matches) == [("camp", True), ("deploy", True)]
