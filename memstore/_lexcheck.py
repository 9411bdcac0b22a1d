"""The lexical invariant checkers: every internal index against a rebuild from the documents.

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
    from memstore._lexindex import LexicalIndex
    from memstore.item import Item
    from memstore.lexical import Lexicon

__all__ = ["check_index", "check_lexicon"]


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


def check_index(index: LexicalIndex, expected: dict[str, Item], index_id: dict[str, bool]) -> None:
    """Assert ``index`` holds exactly ``expected`` (with their ``index_id`` flags) and that
    its per-slot filter columns match each item's fields."""
    from memstore._lexindex import _deadline_ts, _updated_ts  # that module imports this one
    from memstore._lexqueue import same_text
    from memstore.tags import SHARED_TAG, partition_from_tags

    index.lexicon._check()
    assert set(index._text) == set(expected), (
        sorted(set(index._text) ^ set(expected))[:10],
        "indexed ids disagree with indexable items",
    )
    assert len(index._lexicon) == len(expected)
    for id, item in expected.items():
        slot = index._lexicon.slot(id)
        assert slot is not None
        held = index._text[id]
        assert same_text(held, item) and (id in index._with_id) == index_id[id]
        assert index._kind[slot] == index._kinds.lookup(item.kind)
        assert index._subject[slot] == index._subjects.lookup(item.subject)
        assert index._updated[slot] == _updated_ts(item.updated_at)
        assert index._stale[slot] == _deadline_ts(item.stale_after)
        assert index._partition[slot] == index._partitions.lookup(partition_from_tags(item.tags))
        assert index._shared[slot] == (SHARED_TAG in item.tags)
