"""The vocabulary tables answer as the dict-of-sets indexes they replace, through churn."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore._vocabindex import (
    VocabIndex,
    deletion_hashes,
    gram_code,
    hash_string,
    string_hashes,
)
from memstore.lexical import Lexicon
from memstore.text import stem

# Letters, digits, an ideograph and an emoji: every gram rule is exercised.
word = st.text(alphabet="abeg19日😀", min_size=1, max_size=7)


def _deletions(w: str) -> list[str]:
    return [w[:i] + w[i + 1 :] for i in range(len(w))]


def _reference(vocab: set[str]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    grams: dict[str, set[str]] = {}
    dels: dict[str, set[str]] = {}
    for w in vocab:
        for g in Lexicon._grams_of(w):
            grams.setdefault(g, set()).add(w)
        if not (w.isascii() and w.isdigit()):
            for d in _deletions(w):
                dels.setdefault(d, set()).add(w)
    return grams, dels


@given(st.lists(word, min_size=1, max_size=30))
def test_deletion_hashes_are_the_hashes_of_the_deletions(ws: list[str]) -> None:
    assert string_hashes(ws).tolist() == [hash_string(w) for w in ws]
    keys, owners = deletion_hashes(ws, 5)
    want = [(h, i + 5) for i, w in enumerate(ws) for h in string_hashes(_deletions(w)).tolist()]
    assert sorted(zip(keys.tolist(), owners.tolist(), strict=True)) == sorted(want)


def test_gram_codes_tell_lengths_apart() -> None:
    codes = {gram_code(g) for g in ("a", "b", "ab", "ba", "aab", "日", "日本", "😀😀😀")}
    assert len(codes) == 8


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.booleans(), word), min_size=1, max_size=60),
    st.sampled_from([1, 4, 1000]),
    st.sampled_from([1, 5, 4096]),
)
def test_lookups_equal_the_reference_through_adds_and_removes(
    ops: list[tuple[bool, str]], compact_min: int, overlay_max: int
) -> None:
    v = VocabIndex(compact_min=compact_min, overlay_max=overlay_max)
    vocab: set[str] = set()
    for i, (add, w) in enumerate(ops):
        if add or w not in vocab:
            v.add(w)
            vocab.add(w)
        else:
            v.remove(w)
            vocab.discard(w)
        if i % 7 == 3:
            v.flush()  # overlay, and segments of several sizes merged by the policy
    assert sorted(v.live_words()) == sorted(vocab)
    assert len(v) == len(vocab)
    grams, dels = _reference(vocab)
    probes = {g for w in ops for g in Lexicon._grams_of(w[1])}
    for g in probes:
        assert set(v.gram_words(g)) == grams.get(g, set()), g
    for _, w in ops:
        for s in (w, *_deletions(w)):
            # A hash finds a superset: exactly the reference here (no collisions).
            assert set(v.deletion_words([s])) == dels.get(s, set()), s
        want_stem = {x for x in vocab if stem(x) == stem(w)}
        assert set(v.stem_words(stem(w))) == want_stem
    words = sorted(vocab)
    seg = v.export(words)  # compacted: one segment over the live words, numbered as given
    again = VocabIndex.restore(words, {w: i for i, w in enumerate(words)}, seg)
    for g in probes:
        assert set(again.gram_words(g)) == grams.get(g, set())


def test_dead_words_are_renumbered_away() -> None:
    v = VocabIndex(compact_min=2, overlay_max=1)
    v.add_many(["alpha", "beta", "gamma", "delta"])
    v.flush()
    for w in ("alpha", "beta", "gamma"):
        v.remove(w)
    v.flush()  # three dead, one live: renumbered
    assert v.live_words() == ["delta"] and len(v._words) == 1
    assert v.gram_words("el") == ["delta"] and v.gram_words("ph") == []
    v.add("alpha")  # back, with a new number
    assert sorted(v.gram_words("a")) == [] and sorted(v.gram_words("lt")) == ["delta"]
    assert v.gram_words("ph") == ["alpha"]


@settings(max_examples=60, deadline=None)
@given(st.lists(word, min_size=1, max_size=40), st.lists(word, min_size=1, max_size=12))
def test_many_probes_at_once_equal_one_at_a_time(ws: list[str], probes: list[str]) -> None:
    """``gram_ids`` and ``deletion_words`` over several keys (one binary search for all,
    answers read back in Python) agree with each key asked alone and with the reference,
    across segments, the overlay and dead words."""
    v = VocabIndex(compact_min=1000, overlay_max=8)
    for n, w in enumerate(ws):
        v.add(w)
        if n % 5 == 4:
            v.flush()
    for w in ws[::3]:
        if w in v.live_words():
            v.remove(w)
    vocab = set(v.live_words())
    grams, dels = _reference(vocab)
    keys = sorted({g for p in probes for g in Lexicon._grams_of(p)})
    together = v.gram_ids(keys)
    assert [sorted(v.words_of(ids)) for ids in together] == [
        sorted(grams.get(g, set())) for g in keys
    ]
    assert [a.tolist() for a in together] == [v.gram_ids([g])[0].tolist() for g in keys]
    for p, found in zip(probes, v.edit_candidates("".join(probes), _spans(probes)), strict=True):
        want = set().union(*(dels.get(s, set()) for s in (p, *_deletions(p))))
        assert set(found) == want, p


def _spans(parts: list[str]) -> list[tuple[int, int]]:
    """The spans of ``parts`` in their concatenation."""
    out, at = [], 0
    for p in parts:
        out.append((at, at + len(p)))
        at += len(p)
    return out
