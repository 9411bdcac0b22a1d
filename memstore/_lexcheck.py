"""The Lexicon's invariant checker: every internal index against a rebuild from the documents.

Tests call :meth:`memstore.lexical.Lexicon._check` after their steps (the
project's rule: an invariant checker on every index); it runs this under
the Lexicon's lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from memstore._matchrule import indexed_deletions
from memstore._vocabindex import gram_code, string_hashes
from memstore.text import stem

if TYPE_CHECKING:
    from memstore.lexical import Lexicon

__all__ = ["check_lexicon"]


def check_lexicon(lex: Lexicon) -> None:
    """Assert every internal index of ``lex`` agrees with its documents (under its lock)."""
    postings: dict[str, set[int]] = {}
    title_postings: dict[str, set[int]] = {}
    assert len(lex._ids) == len(lex._doc_text) == len(lex._doc_ntitle)
    for id, slot in lex._slot_of.items():
        assert lex._ids[slot] == id, (id, slot)
        assert lex._alive[slot]
        ws = lex._doc_text[slot].split()
        assert lex._doc_text[slot] == (f" {' '.join(ws)} " if ws else "")
        for w in ws:
            postings.setdefault(w, set()).add(slot)
        for w in ws[: lex._doc_ntitle[slot]]:
            title_postings.setdefault(w, set()).add(slot)
    dead = [s for s, id in enumerate(lex._ids) if id is None]
    assert len(dead) == lex._dead
    for slot in dead:
        assert not lex._alive[slot] and not lex._doc_text[slot]
    assert len(lex._slot_of) + lex._dead == len(lex._ids)
    for table, want in (
        (lex._postings, postings),
        (lex._title_postings, title_postings),
    ):
        table.flush()
        got: dict[str, set[int]] = {}
        for w, a in table.items():
            assert np.all(a[1:] > a[:-1]), f"postings of {w!r} not sorted"
            live = set(a[lex._alive[a]].tolist())
            if live:
                got[w] = live
        assert got == want, "postings disagree with documents"
    assert dict(lex._df) == {w: len(s) for w, s in postings.items()}, "df disagrees"
    # The vocabulary tables against a rebuild from the words, key by key
    # (hash keys merge strings that share a hash: so do the rebuilt ones).
    assert sorted(lex._vocab.live_words()) == sorted(postings), "vocabulary disagrees"
    grams: dict[int, set[str]] = {}
    dels: dict[int, set[str]] = {}
    stems: dict[int, set[str]] = {}
    for w in postings:
        for g in lex._grams_of(w):
            grams.setdefault(gram_code(g), set()).add(w)
        ds = sorted(indexed_deletions(w))
        for h in string_hashes(ds).tolist():
            dels.setdefault(h, set()).add(w)
        (h,) = string_hashes([stem(w)]).tolist()
        stems.setdefault(h, set()).add(w)
    assert grams == lex._vocab.table_view("grams"), "gram index disagrees with vocabulary"
    assert dels == lex._vocab.table_view("dels"), "deletion index disagrees"
    assert stems == lex._vocab.table_view("stems"), "stem index disagrees"
