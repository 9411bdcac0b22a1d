"""The lexical index as it was before the columnar postings: the oracle.

A verbatim copy of ``memstore.lexical.Lexicon`` (with its ``TokenMatch``) and
``memstore._lexindex.LexicalIndex`` (with ``LexicalHit`` and ``QueryPlan``) at
the commit before postings moved to numpy arrays. Set-based, slow and simple:
tests/test_lexical_differential.py asserts the new implementation returns the
same hits, scores and order. Pure helpers (levels, stems, trigrams, idf) are
copied too, so a later edit of theirs cannot make both sides agree wrongly.
Do not optimise this file.
"""

# ruff: noqa
# mypy: ignore-errors

from __future__ import annotations

import datetime as _dt
import math
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import regex

from memstore.item import Item
from memstore.lexical import (
    FUZZY_MAX,
    FUZZY_MIN_DICE,
    FUZZY_MIN_LEN,
    LEVEL_EDIT,
    LEVEL_EXACT,
    LEVEL_PREFIX,
    LEVEL_STEM,
    LEVEL_SUBSTRING,
    TITLE_WEIGHT,
)
from memstore.tags import SHARED_TAG, partition_from_tags, service_tag_value
from memstore.text import event_date_words, kw_tokens, normalize_query, stem, trigrams, words

__all__ = ["OracleLexicalIndex", "OracleLexicon"]

_KEEP_CHAR = regex.compile(r"[\p{N}\p{Han}\p{Hiragana}\p{Katakana}\p{Extended_Pictographic}]")
_DIGIT_CHARS = "0123456789"
_DIGITS = frozenset(_DIGIT_CHARS)


def within_one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are at most one edit apart (OSA distance <= 1).

    An edit is an insertion, deletion, substitution or adjacent transposition.

    >>> within_one_edit("payment", "paymnet"), within_one_edit("pay", "play")
    (True, True)
    >>> within_one_edit("pay", "yap")
    False
    """
    if a == b:
        return True
    la, lb = len(a), len(b)
    if la > lb:
        a, b, la, lb = b, a, lb, la
    if lb - la > 1:
        return False
    i = 0
    while i < la and a[i] == b[i]:
        i += 1
    if la == lb:
        if a[i + 1 :] == b[i + 1 :]:
            return True
        return i + 1 < la and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2 :] == b[i + 2 :]
    return a[i:] == b[i + 1 :]


def _deletions(s: str) -> set[str]:
    return {s[:i] + s[i + 1 :] for i in range(len(s))}


def _indexed_deletions(w: str) -> set[str]:
    """The deletion-index keys of vocabulary word ``w``.

    None for a word of ASCII digits alone (ids, counts, builds: most of a large
    vocabulary): its one-edit neighbours are generated at query time over the
    ten digits instead (:meth:`Lexicon._digit_words_near`), which finds the
    same words and keeps indexing (and restore) cheaper.
    """
    if w.isascii() and w.isdigit():
        return set()
    return _deletions(w)


def _dice(tg: frozenset[str], w: str) -> float:
    wg = trigrams(w)
    return 2.0 * len(tg & wg) / (len(tg) + len(wg))


def word_level(tok: str, w: str) -> float:
    """The match level of query token ``tok`` against one document word (0 = none)."""
    if tok == w:
        return LEVEL_EXACT
    best = 0.0
    if tok in w:
        best = LEVEL_PREFIX if len(tok) >= 3 and w.startswith(tok) else LEVEL_SUBSTRING
    if best < LEVEL_STEM and len(tok) > 2 and stem(tok) == stem(w):
        best = LEVEL_STEM
    if best < LEVEL_EDIT and len(tok) > 2 and within_one_edit(tok, w):
        best = LEVEL_EDIT
    return best


def token_weight(df: int, n_docs: int) -> float:
    """A token's distinctiveness: BM25's idf of the number of documents it matches."""
    return math.log1p((n_docs - df + 0.5) / (df + 0.5))


def is_confident(covered: int, n_tokens: int) -> bool:
    """Whether a hit covering ``covered`` of ``n_tokens`` tokens is a confident answer.

    Every token, or all but one for three tokens or more.
    """
    if n_tokens == 0:
        return False
    return covered >= (n_tokens if n_tokens < 3 else n_tokens - 1)


@dataclass(frozen=True, slots=True)
class OracleTokenMatch:
    """What one query token matched in a :class:`Lexicon`.

    ``groups`` are disjoint document-slot sets, one per match level, best level
    first (a document is in the group of its best level); ``fuzzy`` tells
    whether a group came from the fuzzy channel. ``title`` is the same for the
    title words alone: disjoint slot sets by the best level a title word
    reaches, best first.
    """

    groups: tuple[tuple[float, frozenset[int], bool], ...]
    title: tuple[tuple[float, frozenset[int]], ...]
    fuzzy_ok: bool = False
    """Whether the fuzzy channel was open to the token: no vocabulary word
    matches it at the one-edit level or better (it looks like a typo)."""

    @property
    def df(self) -> int:
        """How many documents the token matches at any level."""
        return sum(len(g[1]) for g in self.groups)


def score_document(
    tokens: Sequence[str],
    weights: Sequence[float],
    doc_words: Sequence[str],
    title_words: Iterable[str],
    fuzzy_ok: Sequence[bool],
) -> tuple[float, int, bool]:
    """Score one document by brute force: ``(score, tokens_covered, used_fuzzy)``.

    The reference the index-driven scorer must agree with, and the scorer for
    items no index holds (private items). ``fuzzy_ok[i]`` says whether token
    ``i`` may use the fuzzy channel (it is no word of the vocabulary).
    """
    total_w = sum(weights)
    if total_w <= 0.0:
        return 0.0, 0, False
    title_set = set(title_words)
    acc = title_acc = 0.0
    covered = 0
    used_fuzzy = False
    joined = [doc_words[i] + doc_words[i + 1] for i in range(len(doc_words) - 1)]
    for tok, w, fz in zip(tokens, weights, fuzzy_ok, strict=True):
        best = max((word_level(tok, dw) for dw in doc_words), default=0.0)
        if best < LEVEL_EDIT and len(tok) > 2 and any(within_one_edit(tok, j) for j in joined):
            best = LEVEL_EDIT
        if best >= LEVEL_SUBSTRING:
            covered += 1
            title_level = max((word_level(tok, tw) for tw in title_set), default=0.0)
            if title_level >= LEVEL_SUBSTRING:
                title_acc += w * title_level
        elif fz and len(tok) >= FUZZY_MIN_LEN:
            tg = trigrams(tok)
            dice = max((_dice(tg, dw) for dw in doc_words if len(dw) >= 3), default=0.0)
            if dice >= FUZZY_MIN_DICE:
                best = FUZZY_MAX * dice
                used_fuzzy = True
        acc += w * best
    return (acc + TITLE_WEIGHT * title_acc) / ((1.0 + TITLE_WEIGHT) * total_w), covered, used_fuzzy


class OracleLexicon:
    """A corpus-wide inverted index that answers "which documents could match".

    The candidate set is exact, not a heuristic: it holds every document the
    match rule (see the module docstring) admits for at least one query token,
    so scoring it finds everything a scan of all documents would. Probing costs
    grow with a token's length and the size of its matches, not with the
    corpus. Safe for concurrent use.

    Documents are named by string ids; internally each gets an integer *slot*
    (reused after removal) that the store's per-document arrays are keyed by.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._slot_of: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._free: list[int] = []
        # Per slot: the words as one space-padded string (" w1 w2 ... "), which
        # is smaller than a tuple of word objects and lets adjacency be checked
        # by a C substring search, and how many of them are the title's.
        self._doc_text: list[str] = []
        self._doc_ntitle: list[int] = []
        self._postings: dict[str, set[int]] = {}
        self._title_postings: dict[str, set[int]] = {}
        self._grams: dict[str, set[str]] = {}
        self._dels: dict[str, set[str]] = {}
        self._stems: dict[str, set[str]] = {}

    # ----------------------------------------------------------------- writes

    def index(self, id: str, title: str, content: str) -> None:
        """(Re)index document ``id`` from its title and content.

        Text is split into words as the store splits an item's (lower-cased,
        punctuation stripped, CamelCase split). Whatever ``id`` contributed
        before is replaced.
        """
        self.index_words(id, words(title), words(content))

    def index_words(self, id: str, title_words: list[str], content_words: list[str]) -> int:
        """:meth:`index` for pre-split words (:func:`~memstore.text.words`); returns the slot."""
        with self._lock:
            slot = self._slot_of.get(id)
            if slot is not None:
                self._unindex_slot(slot)
            elif self._free:
                slot = self._free.pop()
            else:
                slot = len(self._ids)
                self._ids.append(None)
                self._doc_text.append("")
                self._doc_ntitle.append(0)
            self._slot_of[id] = slot
            self._ids[slot] = id
            all_words = (*title_words, *content_words)
            title = frozenset(title_words)
            self._doc_text[slot] = f" {' '.join(all_words)} " if all_words else ""
            self._doc_ntitle[slot] = len(title_words)
            postings = self._postings
            uniq = set(all_words)
            for w in uniq:
                if w not in postings:  # new to the vocabulary
                    postings[w] = set()
                    self._add_word(w)
            for w in uniq:
                postings[w].add(slot)
            tp = self._title_postings
            for w in title:
                ids = tp.get(w)
                if ids is None:
                    tp[w] = {slot}
                else:
                    ids.add(slot)
            return slot

    def remove(self, id: str) -> None:
        """Drop everything ``id`` contributed. An unknown id is a no-op."""
        with self._lock:
            slot = self._slot_of.pop(id, None)
            if slot is None:
                return
            self._unindex_slot(slot)
            self._ids[slot] = None
            self._doc_text[slot] = ""
            self._doc_ntitle[slot] = 0
            self._free.append(slot)

    def _unindex_slot(self, slot: int) -> None:
        postings = self._postings
        ws = self._doc_text[slot].split()
        for w in set(ws):
            ids = postings[w]
            ids.discard(slot)
            if not ids:
                del postings[w]
                self._remove_word(w)
        tp = self._title_postings
        for w in set(ws[: self._doc_ntitle[slot]]):
            ids = tp[w]
            ids.discard(slot)
            if not ids:
                del tp[w]

    @staticmethod
    def _grams_of(w: str) -> set[str]:
        grams = {w[i : i + 2] for i in range(len(w) - 1)}
        grams.update(w[i : i + 3] for i in range(len(w) - 2))
        if w.isascii():  # the only ASCII characters kept alone are digits
            grams.update(_DIGITS.intersection(w))
        else:
            grams.update(c for c in w if _KEEP_CHAR.match(c))
        return grams

    def _add_word(self, w: str) -> None:
        self._stems.setdefault(stem(w), set()).add(w)
        for table, keys in ((self._grams, self._grams_of(w)), (self._dels, _indexed_deletions(w))):
            for k in keys:
                bucket = table.get(k)
                if bucket is None:
                    table[k] = {w}
                else:
                    bucket.add(w)

    def _remove_word(self, w: str) -> None:
        key = stem(w)
        forms = self._stems[key]
        forms.discard(w)
        if not forms:
            del self._stems[key]
        for table, keys in ((self._grams, self._grams_of(w)), (self._dels, _indexed_deletions(w))):
            for k in keys:
                bucket = table[k]
                bucket.discard(w)
                if not bucket:
                    del table[k]

    # ------------------------------------------------------------------ reads

    def __len__(self) -> int:
        return len(self._slot_of)

    def len(self) -> int:
        """The number of documents indexed."""
        return len(self._slot_of)

    def doc_freq(self, word: str) -> int:
        """How many documents contain ``word`` as a whole word (lower-cased)."""
        return len(self._postings.get(word.lower(), ()))

    def has_word(self, word: str) -> bool:
        """Whether ``word`` is a word of some indexed document."""
        return word in self._postings

    def slot(self, id: str) -> int | None:
        """The slot of ``id``, or ``None`` when it is not indexed."""
        return self._slot_of.get(id)

    def id_at(self, slot: int) -> str | None:
        """The id indexed at ``slot``, or ``None`` for a free slot."""
        return self._ids[slot]

    @property
    def capacity(self) -> int:
        """One more than the highest slot ever used (the size per-slot arrays need)."""
        return len(self._ids)

    def doc_words(self, id: str) -> tuple[str, ...]:
        """The words indexed for ``id`` (title first), ``()`` when unknown."""
        slot = self._slot_of.get(id)
        return () if slot is None else tuple(self._doc_text[slot].split())

    def candidates(self, query: str) -> set[str]:
        """Ids of the documents that can match at least one token of ``query``.

        The query is tokenised as the store tokenises one (punctuation removed,
        filler dropped unless the query is only filler). No tokens: empty set.
        """
        return self.candidates_for_tokens(kw_tokens(normalize_query(query)))

    def candidates_for_tokens(self, tokens: Iterable[str]) -> set[str]:
        """:meth:`candidates` for tokens already produced by :func:`~memstore.text.kw_tokens`."""
        with self._lock:
            slots: set[int] = set()
            for tok in tokens:
                m = self.match_token(tok, fuzzy=False)
                for _, group, _ in m.groups:
                    slots |= group
            ids = self._ids
            return {ids[s] for s in slots}  # type: ignore[misc]

    # -------------------------------------------------------------- matching

    def _substring_words(self, tok: str) -> Iterable[str]:
        n = len(tok)
        if n == 0:
            return ()
        if n <= 3 and (n > 1 or _KEEP_CHAR.match(tok)):
            return self._grams.get(tok, ())  # the gram is the token: exact
        if n == 1:  # a lone letter (a query of only filler): rare, scan the vocabulary
            return [w for w in self._postings if tok in w]
        buckets = [self._grams.get(g) for g in trigrams(tok)]
        if any(b is None for b in buckets):
            return ()
        buckets.sort(key=len)  # type: ignore[arg-type]
        # Intersect smallest first: C-level set algebra, then verify the order.
        found = set.intersection(*buckets)  # type: ignore[arg-type]
        return [w for w in found if tok in w]

    def edit_neighbours(self, s: str) -> set[str]:
        """The vocabulary words within one edit of ``s`` (``s`` itself included)."""
        postings, dels = self._postings, self._dels
        cands: set[str] = set()
        if s in postings:
            cands.add(s)
        bucket = dels.get(s)
        if bucket:
            cands |= bucket  # a word with one extra character
        for d in _deletions(s):
            if d in postings:
                cands.add(d)  # a word missing one character
            bucket = dels.get(d)
            if bucket:
                cands |= bucket  # a substitution or transposition (verified below)
        cands.update(self._digit_words_near(s))
        return {w for w in cands if within_one_edit(s, w)}

    def _digit_words_near(self, s: str) -> list[str]:
        """Words of ASCII digits alone one insertion, substitution or transposition from ``s``.

        Such words have no deletion-index keys (:func:`_indexed_deletions`);
        the edits are generated over the ten digits and probed (a deletion from
        ``s`` is probed by :meth:`edit_neighbours` already). A word of digits
        alone is that far from ``s`` only when ``s`` holds at most one other
        character: then only substituting it can reach one.
        """
        postings = self._postings
        odd = [i for i, c in enumerate(s) if c not in _DIGITS]
        if len(odd) > 1:
            return []
        if odd:
            head, tail = s[: odd[0]], s[odd[0] + 1 :]
            return [w for w in (head + d + tail for d in _DIGIT_CHARS) if w in postings]
        found = [s[:i] + d + s[i:] for i in range(len(s) + 1) for d in _DIGIT_CHARS]
        found += [s[:i] + d + s[i + 1 :] for i in range(len(s)) for d in _DIGIT_CHARS]
        found += [s[: i - 1] + s[i] + s[i - 1] + s[i + 1 :] for i in range(1, len(s))]
        return [w for w in found if w in postings]

    def _joined_pairs(self, tok: str) -> set[tuple[str, str]]:
        # tok is within one edit of w1+w2 iff, split at some k, one half equals
        # its word and the other is within one edit of the other word, or the
        # edit is a transposition straddling the split.
        postings = self._postings
        pairs: set[tuple[str, str]] = set()
        n = len(tok)
        for k in range(n + 1):
            left, right = tok[:k], tok[k:]
            if left in postings:
                pairs.update((left, w2) for w2 in self.edit_neighbours(right))
            if right in postings:
                pairs.update((w1, right) for w1 in self.edit_neighbours(left))
        for k in range(1, n):
            swapped = tok[: k - 1] + tok[k] + tok[k - 1] + tok[k + 1 :]
            left, right = swapped[:k], swapped[k:]
            if left in postings and right in postings:
                pairs.add((left, right))
        return pairs

    def _joined_slots(self, tok: str, exclude: set[int], strong: Collection[str]) -> set[int]:
        postings, text = self._postings, self._doc_text
        found: set[int] = set()
        for w1, w2 in self._joined_pairs(tok):
            if w1 in strong or w2 in strong:
                # Every document holding a strongly matched word is in
                # ``exclude`` already: the pair cannot add one ("a rate" for
                # "rate"). This skips the largest intersections.
                continue
            p1, p2 = postings[w1], postings[w2]
            both = (p1 & p2) - exclude - found
            if both:
                pair = f" {w1} {w2} "
                found.update(slot for slot in both if pair in text[slot])
        return found

    def _fuzzy_words(self, tok: str) -> dict[str, float]:
        tg = trigrams(tok)
        counts: Counter[str] = Counter()
        grams = self._grams
        for g in tg:
            bucket = grams.get(g)
            if bucket:
                counts.update(bucket)
        # dice = 2c/(|a|+|b|) >= 0.5 needs c >= |a|/3, since c <= |b|.
        need = len(tg) / 3.0
        out: dict[str, float] = {}
        for w, c in counts.items():
            if c >= need:
                dice = _dice(tg, w)
                if dice >= FUZZY_MIN_DICE:
                    out[w] = FUZZY_MAX * dice
        return out

    def match_token(self, tok: str, *, fuzzy: bool = True) -> OracleTokenMatch:
        """Everything ``tok`` matches, grouped by level (see :class:`TokenMatch`).

        ``fuzzy=False`` leaves the fuzzy channel out (the exact rule alone).
        """
        with self._lock:
            postings = self._postings
            levels: dict[str, float] = {}
            if tok in postings:
                levels[tok] = LEVEL_EXACT
            long_tok = len(tok) >= 3
            for w in self._substring_words(tok):
                if w != tok:
                    levels[w] = LEVEL_PREFIX if long_tok and w.startswith(tok) else LEVEL_SUBSTRING
            if len(tok) > 2:
                for w in self._stems.get(stem(tok), ()):
                    if levels.get(w, 0.0) < LEVEL_STEM:
                        levels[w] = LEVEL_STEM
                for w in self.edit_neighbours(tok):
                    if levels.get(w, 0.0) < LEVEL_EDIT:
                        levels[w] = LEVEL_EDIT
            by_level: dict[float, list[str]] = {}
            for w, lv in levels.items():
                by_level.setdefault(lv, []).append(w)
            # One disjoint slot set per level, best first: a document lands in
            # the group of its best word (set algebra in C, no per-doc loop).
            seen: set[int] = set()
            raw: list[tuple[float, set[int]]] = []
            for lv in sorted(by_level, reverse=True):
                slots: set[int] = set().union(*(postings[w] for w in by_level[lv]))
                slots -= seen
                if slots:
                    raw.append((lv, slots))
                    seen |= slots
            if len(tok) > 2:
                high: set[int] = set().union(*(g for lv, g in raw if lv >= LEVEL_EDIT))
                strong = {w for w, lv in levels.items() if lv >= LEVEL_EDIT}
                joined = self._joined_slots(tok, high, strong)
                if joined:
                    raw = [(lv, g - joined if lv < LEVEL_EDIT else g) for lv, g in raw]
                    raw.append((LEVEL_EDIT, joined))
                    seen |= joined
            groups = [(lv, frozenset(g), False) for lv, g in raw if g]
            # The fuzzy channel is a typo rescue: closed to a token that some
            # word already matches well (exactly, as a prefix, by stem or edit),
            # so "camped" finding "camping" is not diluted by "swamped".
            fuzzy_ok = not any(lv >= LEVEL_EDIT for lv in levels.values())
            if fuzzy and fuzzy_ok and len(tok) >= FUZZY_MIN_LEN:
                fz: dict[float, list[str]] = {}
                for w, lv in self._fuzzy_words(tok).items():
                    fz.setdefault(lv, []).append(w)
                for lv in sorted(fz, reverse=True):
                    slots = set().union(*(postings[w] for w in fz[lv])) - seen
                    if slots:
                        groups.append((lv, frozenset(slots), True))
                        seen |= slots
            groups.sort(key=lambda g: -g[0])
            # The title bonus scales with the level the title word reaches, so
            # a near-miss in a title never outranks exact words in the text.
            tp = self._title_postings
            title: list[tuple[float, frozenset[int]]] = []
            title_seen: set[int] = set()
            for lv in sorted(by_level, reverse=True):
                hit: set[int] = set()
                for w in by_level[lv]:
                    t = tp.get(w)
                    if t:
                        hit |= t
                hit -= title_seen
                if hit:
                    title.append((lv, frozenset(hit)))
                    title_seen |= hit
            return OracleTokenMatch(tuple(groups), tuple(title), fuzzy_ok)

    # ------------------------------------------------------------- invariant

    def _check(self) -> None:
        """Assert every internal index agrees with the documents (for tests)."""
        with self._lock:
            postings: dict[str, set[int]] = {}
            title_postings: dict[str, set[int]] = {}
            for id, slot in self._slot_of.items():
                assert self._ids[slot] == id, (id, slot)
                ws = self._doc_text[slot].split()
                assert self._doc_text[slot] == (f" {' '.join(ws)} " if ws else "")
                for w in ws:
                    postings.setdefault(w, set()).add(slot)
                for w in ws[: self._doc_ntitle[slot]]:
                    title_postings.setdefault(w, set()).add(slot)
            for slot in self._free:
                assert self._ids[slot] is None and not self._doc_text[slot]
            assert len(self._slot_of) + len(self._free) == len(self._ids)
            assert postings == self._postings, "postings disagree with documents"
            assert title_postings == self._title_postings, "title postings disagree"
            grams: dict[str, set[str]] = {}
            dels: dict[str, set[str]] = {}
            for w in postings:
                for g in self._grams_of(w):
                    grams.setdefault(g, set()).add(w)
                for d in _indexed_deletions(w):
                    dels.setdefault(d, set()).add(w)
            assert grams == self._grams, "gram index disagrees with vocabulary"
            assert dels == self._dels, "deletion index disagrees with vocabulary"
            stems: dict[str, set[str]] = {}
            for w in postings:
                stems.setdefault(stem(w), set()).add(w)
            assert stems == self._stems, "stem index disagrees with vocabulary"


_INF = float("inf")


@dataclass(frozen=True, slots=True)
class OracleLexicalHit:
    """One ranked lexical hit: the id, its score in [0, 1], tokens covered, fuzzy use."""

    id: str
    score: float
    covered: int
    fuzzy: bool


@dataclass(frozen=True, slots=True)
class OracleQueryPlan:
    """A query's tokens with what each matched and its weight, computed once."""

    tokens: tuple[str, ...]
    matches: tuple[OracleTokenMatch, ...]
    weights: tuple[float, ...]
    fuzzy_ok: tuple[bool, ...]

    @property
    def total_weight(self) -> float:
        return sum(self.weights)


class _Codes:
    """Interns strings to small ints ("" is 0) for vectorised equality tests."""

    def __init__(self) -> None:
        self._code: dict[str, int] = {"": 0}

    def code(self, s: str) -> int:
        c = self._code.get(s)
        if c is None:
            c = self._code[s] = len(self._code)
        return c

    def lookup(self, s: str) -> int:
        return self._code.get(s, -1)


def _deadline_ts(dt: _dt.datetime | None) -> float:
    """A deadline as a timestamp; no deadline is +inf (never due)."""
    return dt.timestamp() if dt is not None else _INF


def _updated_ts(dt: _dt.datetime | None) -> float:
    """An update time as a timestamp; none is -inf (the oldest), as the store orders it."""
    return dt.timestamp() if dt is not None else -_INF


class OracleLexicalIndex:
    """Lexicon + per-slot metadata (kind, subject, service, recency, deadline)."""

    def __init__(self) -> None:
        self.lexicon = OracleLexicon()
        self._kinds = _Codes()
        self._subjects = _Codes()  # subjects and service tag values share codes
        self._partitions = _Codes()
        cap = 64
        self._kind = np.zeros(cap, np.int32)
        self._subject = np.zeros(cap, np.int32)
        self._service = np.zeros(cap, np.int32)
        self._updated = np.zeros(cap, np.float64)
        self._stale = np.full(cap, _INF, np.float64)
        self._partition = np.zeros(cap, np.int32)
        self._shared = np.zeros(cap, np.bool_)
        self._text: dict[str, tuple[str, str, str, bool]] = {}

    def __len__(self) -> int:
        return len(self.lexicon)

    def __contains__(self, id: str) -> bool:
        return id in self._text

    def _grow(self, need: int) -> None:
        cap = len(self._kind)
        if need <= cap:
            return
        new = max(need, cap * 2)
        for name in (
            "_kind",
            "_subject",
            "_service",
            "_updated",
            "_stale",
            "_partition",
            "_shared",
        ):
            old = getattr(self, name)
            arr = np.full(new, _INF if name == "_stale" else 0, old.dtype)
            arr[:cap] = old
            setattr(self, name, arr)

    def put(self, item: Item, index_id: bool) -> None:
        """Index (or re-index) ``item``; the text is re-split only when it changed."""
        key = (item.title, item.content, item.event_date, index_id)
        slot = self.lexicon.slot(item.id)
        if slot is None or self._text.get(item.id) != key:
            content = words(item.content)
            if item.event_date:
                content.extend(event_date_words(item.event_date))
            if index_id:
                content.extend(words(item.id))
            slot = self.lexicon.index_words(item.id, words(item.title), content)
            self._text[item.id] = key
        self._grow(slot + 1)
        self._kind[slot] = self._kinds.code(item.kind)
        self._subject[slot] = self._subjects.code(item.subject)
        self._service[slot] = self._subjects.code(service_tag_value(item) or "")
        self._updated[slot] = _updated_ts(item.updated_at)
        self._stale[slot] = _deadline_ts(item.stale_after)
        self._partition[slot] = self._partitions.code(partition_from_tags(item.tags))
        self._shared[slot] = SHARED_TAG in item.tags

    def remove(self, id: str) -> None:
        """Drop ``id``; unknown ids are a no-op."""
        if self._text.pop(id, None) is not None:
            self.lexicon.remove(id)

    def plan(self, tokens: Sequence[str]) -> OracleQueryPlan:
        """Match every token once and weigh it by the documents it matches."""
        lex = self.lexicon
        n = len(lex)
        matches = tuple(lex.match_token(t) for t in tokens)
        weights = tuple(token_weight(m.df, n) for m in matches)
        fuzzy_ok = tuple(m.fuzzy_ok for m in matches)
        return OracleQueryPlan(tuple(tokens), matches, weights, fuzzy_ok)

    def rank(
        self,
        plan: OracleQueryPlan,
        *,
        kind: str,
        subject: str,
        hidden_kinds: Sequence[str],
        now_ts: float,
        limit: int | None,
        partition: str | None = None,
    ) -> list[OracleLexicalHit]:
        """Score the plan's candidates, filter them, and return the best ``limit``.

        Order: score descending, then the most recently updated, then id.
        ``limit=None`` returns every match. ``partition`` keeps the items tagged
        for it, the untagged ones and the ``shared`` ones (``None``: no filter).
        """
        total_w = plan.total_weight
        cap = self.lexicon.capacity
        if total_w <= 0.0 or cap == 0:
            return []
        acc = np.zeros(cap, np.float64)
        title = np.zeros(cap, np.float64)
        covered = np.zeros(cap, np.int32)
        fuzzy = np.zeros(cap, np.bool_)
        for m, w in zip(plan.matches, plan.weights, strict=True):
            for level, slots, fz in m.groups:
                idx = np.fromiter(slots, np.intp, len(slots))
                acc[idx] += w * level
                if fz:
                    fuzzy[idx] = True
                else:
                    covered[idx] += 1
            for level, slots in m.title:
                title[np.fromiter(slots, np.intp, len(slots))] += w * level
        cand: npt.NDArray[np.intp] = np.flatnonzero(acc)
        if kind:
            cand = cand[self._kind[cand] == self._kinds.lookup(kind)]
        elif hidden_kinds:
            hidden = [self._kinds.lookup(k) for k in hidden_kinds]
            cand = cand[~np.isin(self._kind[cand], hidden)]
        if subject:
            code = self._subjects.lookup(subject)
            cand = cand[(self._subject[cand] == code) | (self._service[cand] == code)]
        cand = cand[self._stale[cand] > now_ts]
        if partition is not None:
            code = self._partitions.lookup(partition)
            part = self._partition[cand]
            cand = cand[(part == code) | (part == 0) | self._shared[cand]]
        if cand.size == 0:
            return []
        scores = (acc[cand] + TITLE_WEIGHT * title[cand]) / ((1.0 + TITLE_WEIGHT) * total_w)
        if limit is not None and cand.size > limit:
            # argpartition-style cut: keep everything tied with the limit-th score
            # so the id tie-break below sees the whole tie.
            kth = np.partition(scores, cand.size - limit)[cand.size - limit]
            keep = scores >= kth
            cand, scores = cand[keep], scores[keep]
        id_at = self.lexicon.id_at
        updated = self._updated
        rows = [
            (-float(s), -float(updated[slot]), id_at(int(slot)) or "", int(slot))
            for slot, s in zip(cand.tolist(), scores.tolist(), strict=True)
        ]
        rows.sort()
        if limit is not None:
            rows = rows[:limit]
        return [OracleLexicalHit(r[2], -r[0], int(covered[r[3]]), bool(fuzzy[r[3]])) for r in rows]

    def _check(self, expected: dict[str, Item], index_id: dict[str, bool]) -> None:
        """Assert the index holds exactly ``expected`` with matching metadata."""
        self.lexicon._check()
        assert set(self._text) == set(expected), (
            sorted(set(self._text) ^ set(expected))[:10],
            "indexed ids disagree with indexable items",
        )
        assert len(self.lexicon) == len(expected)
        for id, item in expected.items():
            slot = self.lexicon.slot(id)
            assert slot is not None
            assert self._text[id] == (item.title, item.content, item.event_date, index_id[id])
            assert self._kind[slot] == self._kinds.lookup(item.kind)
            assert self._subject[slot] == self._subjects.lookup(item.subject)
            assert self._updated[slot] == _updated_ts(item.updated_at)
            assert self._stale[slot] == _deadline_ts(item.stale_after)
            assert self._partition[slot] == self._partitions.lookup(partition_from_tags(item.tags))
            assert self._shared[slot] == (SHARED_TAG in item.tags)
