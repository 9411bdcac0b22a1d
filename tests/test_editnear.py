"""The compiled vocabulary search of a cold token (``memstore/_editnear.c``) against its oracle.

:func:`memstore._editnear.edits` (a token's one-edit neighbours and joined
pairs) and :func:`~memstore._editnear.neighbour_sets` (the neighbours of each
span of a token) run in C where :mod:`memstore._speedups` is built. Random
vocabularies go through adds and removals (so the deletion table has
segments, an overlay and dead words) and every token, of letters, digits,
accented, CJK and emoji characters, short and long, must get the same sets
from both paths, and the neighbours a scan of every word finds. So must the
words :meth:`~memstore.lexical.Lexicon._substring_words` finds (in C, the
rarest trigram's words tested; in Python, the trigrams' words intersected),
the fuzzy channel's words and levels, and the words a stem's key finds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import _editnear, _wordbatch
from memstore._matchrule import LEVEL_EDIT, LEVEL_EXACT, LEVEL_STEM, within_one_edit
from memstore._vocabindex import VocabIndex
from memstore.lexical import Lexicon
from memstore.text import stem

COMPILED: ModuleType | None
try:
    from memstore import _speedups as COMPILED
except ImportError:  # not built: these tests skip
    COMPILED = None

pytestmark = pytest.mark.skipif(COMPILED is None, reason="memstore._speedups is not built")

# Few characters, so that neighbours, joins and digit words are common; one of
# each string kind (ASCII, Latin-1, two-byte, four-byte) so the C reads all.
ALPHABET = "ab1é日😀"
word = st.one_of(
    st.text(alphabet=ALPHABET, min_size=1, max_size=6),
    st.text(alphabet="0123456789", min_size=1, max_size=5),  # digit words: no deletion keys
    st.text(alphabet="ab", min_size=20, max_size=40),  # long words
)
# Word forms that share a light stem (memstore.text.stem).
STEMMED = ["camp", "camping", "camped", "camps", "bake", "baked", "baking", "tries", "try"]
token = st.one_of(
    st.text(alphabet=ALPHABET, max_size=9),
    st.text(alphabet="0123456789x", max_size=6),
    st.text(alphabet="ab", min_size=30, max_size=64),
)


def _build(
    ops: list[tuple[bool, str]], sizes: tuple[int, int]
) -> tuple[dict[str, int], VocabIndex]:
    """A vocabulary (word -> count, as the Lexicon keeps it) and its index, through churn."""
    index = VocabIndex(compact_min=sizes[0], overlay_max=sizes[1])
    vocab: dict[str, int] = {}
    for n, (remove, w) in enumerate(ops):
        if remove and w in vocab:
            del vocab[w]
            index.remove(w)
        else:
            vocab[w] = vocab.get(w, 0) + 1
            index.add(w)
        if n % 3 == 0:
            index.flush()  # some words keyed in the overlay or a segment, some still pending
    return vocab, index


@contextmanager
def compiled() -> Iterator[None]:
    """The compiled module in use inside the ``with`` (also under ``MEMSTORE_PURE_PYTHON=1``)."""
    saved, _wordbatch.speedups = _wordbatch.speedups, COMPILED
    try:
        yield
    finally:
        _wordbatch.speedups = saved


vocabulary_and_tokens = given(
    st.lists(st.tuples(st.booleans(), word), min_size=1, max_size=40),
    st.lists(token, min_size=1, max_size=5),
    st.sampled_from([(1, 1), (3, 4), (4096, 4096)]),
    st.data(),
)
"""A vocabulary built by adds and removes, tokens to look up in it, the index's sizes."""


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@vocabulary_and_tokens
def test_neighbour_sets_agree_with_pure_and_brute_force(
    ops: list[tuple[bool, str]],
    toks: list[str],
    sizes: tuple[int, int],
    data: st.DataObject,
) -> None:
    vocab, index = _build(ops, sizes)
    for tok in toks:
        n = len(tok)
        spans = data.draw(
            st.lists(
                st.tuples(st.integers(0, n), st.integers(0, n)).map(lambda t: (min(t), max(t))),
                max_size=4,
            )
        )
        spans = [(0, n), *spans]
        with compiled():
            got = _editnear.neighbour_sets(tok, spans, vocab, index)
        want = _editnear.pure_neighbour_sets(tok, spans, vocab, index)
        assert got == want, (tok, spans)
        for (a, b), near in zip(spans, got, strict=True):
            assert near == {w for w in vocab if within_one_edit(tok[a:b], w)}, (tok, a, b)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@vocabulary_and_tokens
def test_edits_agree_with_pure(
    ops: list[tuple[bool, str]],
    toks: list[str],
    sizes: tuple[int, int],
    data: st.DataObject,
) -> None:
    vocab, index = _build(ops, sizes)
    for tok in toks:
        # Levels as the Lexicon gives them: some words exact, by stem, below the edit level.
        chosen = data.draw(st.lists(st.sampled_from(sorted(vocab)), max_size=4)) if vocab else []
        levels = {
            w: data.draw(st.sampled_from([LEVEL_EXACT, LEVEL_STEM, LEVEL_EDIT, 0.6]))
            for w in chosen
        }
        with compiled():
            near, pairs = _editnear.edits(tok, levels, vocab, index)
        want_near, want_pairs = _editnear.pure_edits(tok, levels, vocab, index)
        assert near == want_near, tok
        assert sorted(pairs) == sorted(want_pairs), tok
        assert len(pairs) == len(set(pairs))


TOKENS = ("cafe", "caf", "cafx", "1x34", "1243", "123")


def test_a_word_of_another_kind_is_one_edit_away() -> None:
    """Strings of different widths (ASCII token, two- and four-byte words) compare by code point."""
    vocab = {"caf日": 1, "cafe": 1, "ca😀fe": 1, "1234": 1, "12345": 1}
    index = VocabIndex()
    index.add_many(vocab)
    with compiled():
        got = {t: _editnear.neighbour_sets(t, [(0, len(t))], vocab, index)[0] for t in TOKENS}
    assert got == {
        t: _editnear.pure_neighbour_sets(t, [(0, len(t))], vocab, index)[0] for t in TOKENS
    }
    assert got["cafe"] == {"caf日", "cafe", "ca😀fe"}
    assert got["1243"] == {"1234"}  # a digit word: generated, not indexed


def test_bad_arguments_raise_and_name_the_culprit() -> None:
    assert COMPILED is not None
    vocab = {"pay": 1}
    index = VocabIndex()
    index.add_many(vocab)
    tables, overlay, live, words = index.probe_view("dels")
    with pytest.raises(ValueError, match="outside the token"):
        COMPILED.neighbour_sets("pay", [(2, 9)], vocab, words, live, tables, overlay)
    short = ((np.zeros(2, np.uint64), np.zeros(2, np.int64), np.zeros(2, np.int32)),)
    with pytest.raises(ValueError, match="one longer than keys"):
        COMPILED.neighbour_sets("pay", [(0, 3)], vocab, words, live, short, overlay)
    with pytest.raises(TypeError, match="keys"):
        COMPILED.neighbour_sets("pay", [(0, 3)], vocab, words, live, ((b"x", b"", b""),), overlay)
    with pytest.raises(TypeError, match="spans"):
        COMPILED.neighbour_sets("pay", [[0, 3]], vocab, words, live, tables, overlay)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.booleans(), st.lists(word, min_size=1, max_size=3)), max_size=25),
    st.lists(token, min_size=1, max_size=6),
    st.sampled_from([(1, 1), (3, 4), (4096, 4096)]),
)
def test_substring_and_fuzzy_words_agree_with_pure(
    ops: list[tuple[bool, list[str]]], toks: list[str], sizes: tuple[int, int]
) -> None:
    """The compiled substring and fuzzy searches find the words the pure ones do, in order."""
    lex = Lexicon(compact_min=sizes[0], overlay_max=sizes[1])
    for n, (remove, ws) in enumerate(ops):
        if remove and n:
            lex.remove(f"d{n // 2}")
        lex.index(f"d{n}", "", " ".join(ws))
    vocab = set(lex._df)
    for tok in [*toks, *(w[1:4] for w in vocab), *(w[:2] for w in vocab)]:
        with compiled():
            got = list(lex._substring_words(tok))
        with _wordbatch.pure_python():
            want = list(lex._substring_words(tok))
        assert got == want, tok
        assert set(got) == {w for w in vocab if tok and tok in w}, tok
    # The fuzzy channel: words sharing trigrams with a token, a near miss of each word too.
    for tok in [*toks, *(w + "x" for w in vocab), *(w[:-1] + "é" for w in vocab)]:
        if len(tok) < 3:
            continue
        with compiled():
            fuzzy = list(lex._fuzzy_words(tok).items())
        with _wordbatch.pure_python():
            assert fuzzy == list(lex._fuzzy_words(tok).items()), tok


def _match(lex: Lexicon, tok: str) -> tuple[list[int], list[float], list[int], list[float], bool]:
    lex.clear_caches()
    m = lex.match_token(tok)
    return (
        m.slots.tolist(),
        m.levels.tolist(),
        m.title_slots.tolist(),
        m.title_levels.tolist(),
        m.fuzzy_ok,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.booleans(), st.lists(word, min_size=1, max_size=4)), max_size=20),
    st.lists(token, max_size=4),
    st.data(),
)
def test_cold_matches_agree_with_pure(
    ops: list[tuple[bool, list[str]]], toks: list[str], data: st.DataObject
) -> None:
    """A cold token's whole match (edits, substrings, joined pairs in C) equals the pure one's."""
    lex = Lexicon(compact_min=2)
    docs: list[list[str]] = []
    for n, (remove, ws) in enumerate(ops):
        if remove and n:
            lex.remove(f"d{n // 2}")
        lex.index(f"d{n}", ws[0], " ".join(ws[1:]))
        docs.append(ws)
    # Two adjacent words of a document joined, an edit or none inside: joined-pair matches.
    for ws in docs:
        if len(ws) > 1:
            j = ws[0] + ws[1]
            i = data.draw(st.integers(0, len(j)))
            toks.append(data.draw(st.sampled_from([j, j[:i] + j[i + 1 :], j[:i] + "a" + j[i:]])))
    for tok in toks:
        with compiled():
            got = _match(lex, tok)
        with _wordbatch.pure_python():
            want = _match(lex, tok)
        assert got == want, tok


def test_joined_pairs_in_long_texts_agree_with_pure() -> None:
    """Texts long enough that the compiled pair test runs without the GIL find the same slots."""
    lex = Lexicon()
    filler = " ".join(f"w{i}" for i in range(6000))  # about 40,000 characters a text
    for n in range(12):
        tail = "pay ment" if n % 3 else "ment pay"
        lex.index(f"d{n}", "", f"{filler} {tail} x{n}")
    lex.index("short", "", "pay ment")
    for tok in ("payment", "paymnt", "paymentx"):
        with compiled():
            got = _match(lex, tok)
        with _wordbatch.pure_python():
            want = _match(lex, tok)
        assert got == want, tok
    joined = [lv for lv in _match(lex, "payment")[1] if lv == LEVEL_EDIT]
    assert len(joined) == 9  # the eight long texts with "pay ment" and the short one


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.booleans(), word | st.sampled_from(STEMMED)), min_size=1, max_size=40),
    st.lists(token | st.sampled_from(STEMMED), min_size=1, max_size=5),
    st.sampled_from([(1, 1), (3, 4), (4096, 4096)]),
)
def test_stem_words_agree_with_pure(
    ops: list[tuple[bool, str]], toks: list[str], sizes: tuple[int, int]
) -> None:
    """The compiled stem-table lookup finds the words the numpy one does, in the same order."""
    vocab, index = _build(ops, sizes)
    for key in {stem(t) for t in [*toks, *vocab]}:
        with compiled():
            got = index.stem_words(key)
        with _wordbatch.pure_python():
            want = index.stem_words(key)
        assert got == want, key
        assert set(got) == {w for w in vocab if stem(w) == key}, key
