"""Lexical search: the Lexicon (an exact candidate index) and lexical scoring.

A query token *matches* a document when it is a substring of one of the
document's words, or, for tokens longer than two characters, when it shares a
word's light stem (:func:`~memstore.text.stem`: "camping" and "camped"), or is
within one edit (insertion, deletion, substitution or adjacent transposition)
of a word or of two adjacent words joined without a space (this for tokens of at
most :data:`MAX_EDIT_CHARS` characters: the edits of a longer one are not
listed, it would cost its length squared). The :class:`Lexicon`
answers "which documents could match this token" from indexes over its
*vocabulary*, never by scanning documents:

* postings: word -> documents containing it;
* grams: every 2- and 3-character substring (and digit/ideograph/emoji
  characters) of every word -> the words containing it, for substring matches;
* stems: the light stem of every word -> the words (word forms meet);
* deletions: every one-character deletion of every word -> the words, so the
  one-edit neighbours of a token are found by a handful of dictionary probes
  (the token's length band, in effect) and then verified;
* joined words are found by splitting the token at each position and probing
  both halves, then checking adjacency in the (few) documents holding both.

On top of the exact rule, tokens of four or more characters that are no word
of the vocabulary get a *fuzzy* (trigram Dice) channel, so "deploying" still
finds "deployment". Scoring is per token: the best match level in a document
(exact 1.0, prefix 0.9, same stem 0.85, one edit 0.8, inner substring 0.6,
fuzzy at most 0.5),
weighted by the token's distinctiveness (BM25's idf over matched documents),
with a bonus (a quarter of the token's weight, times the level the title word
reaches) when the match is in the title.

>>> lex = Lexicon()
>>> lex.index("a", "Payment API", "timeouts after 30s under load")
>>> lex.index("b", "Auth service", "tokens expire after one hour")
>>> sorted(lex.candidates("paymnet"))     # one transposition
['a']
>>> sorted(lex.candidates("paymentapi"))  # two words joined
['a']
>>> sorted(lex.candidates("after"))
['a', 'b']
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, compress, repeat
from operator import contains

import numpy as np
import numpy.typing as npt
import regex

from memstore import _wordbatch
from memstore._bm25 import DocLengths
from memstore._editnear import edits, neighbour_sets
from memstore._lexcheck import check_lexicon
from memstore._matchrule import (
    FUZZY_MAX,
    FUZZY_MIN_DICE,
    FUZZY_MIN_LEN,
    LEVEL_EDIT,
    LEVEL_EXACT,
    LEVEL_PREFIX,
    LEVEL_STEM,
    LEVEL_SUBSTRING,
    MAX_EDIT_CHARS,
    TITLE_WEIGHT,
    is_confident,
    score_document,
    token_weight,
    within_one_edit,
    word_level,
)
from memstore._matchrule import trigram_dice as _dice
from memstore._postings import Postings, intersect_sorted
from memstore._tokenmatch import Expansion as _Expansion
from memstore._tokenmatch import TokenMatch, best_levels
from memstore._vocabindex import VocabIndex, unique_counts
from memstore._vocablog import VocabLog
from memstore._wordbatch import TextDoc, count_texts
from memstore._writelog import WriteLog, extend_match
from memstore.text import kw_tokens, normalize_query, stem, trigrams, words

__all__ = [
    "FUZZY_MAX",
    "FUZZY_MIN_DICE",
    "FUZZY_MIN_LEN",
    "LEVEL_EDIT",
    "LEVEL_EXACT",
    "LEVEL_PREFIX",
    "LEVEL_STEM",
    "LEVEL_SUBSTRING",
    "MAX_EDIT_CHARS",
    "TITLE_WEIGHT",
    "Lexicon",
    "TokenMatch",
    "is_confident",
    "score_document",
    "token_weight",
    "within_one_edit",
    "word_level",
]

_KEEP_CHAR = regex.compile(r"[\p{N}\p{Han}\p{Hiragana}\p{Katakana}\p{Extended_Pictographic}]")
_DIGITS = frozenset("0123456789")


_VERIFY_MAX = 32
"""Candidates (words, documents) few enough to check by a substring test instead of intersecting."""


def _holding(texts: list[str], slots: list[int], pair: str) -> list[int]:
    """Those of ``slots`` whose text holds ``pair``: ``[s for s in slots if pair in texts[s]]``.

    Compiled where :mod:`memstore._speedups` is built: the substring tests run
    without the GIL (ASCII texts, a few dozen kilobytes of them or more; texts
    that are not ASCII are tested here). Here, by C-level iterators (``compress``
    over ``map``), no bytecode per slot: a joined-word check tests a few dozen to
    a few thousand texts.
    """
    native = _wordbatch.speedups
    if native is not None and len(slots) > 1:
        got: list[int] | object = native.holding(texts, slots, pair)
        if got is not NotImplemented:
            return got  # type: ignore[return-value]
    return list(compress(slots, map(contains, map(texts.__getitem__, slots), repeat(pair))))


class Lexicon:
    """A corpus-wide inverted index that answers "which documents could match".

    The candidate set is exact, not a heuristic: it holds every document the
    match rule (see the module docstring) admits for at least one query token,
    so scoring it finds everything a scan of all documents would. Probing costs
    grow with a token's length and the size of its matches, not with the
    corpus. Safe for concurrent use.

    Documents are named by string ids; internally each gets an integer *slot*
    that the store's per-document arrays are keyed by. Slots only grow: a
    re-indexed document gets a new one and the old one is dead until a
    *compaction* renumbers the live slots densely (when dead slots outnumber
    both the live ones and ``compact_min``); callers keeping per-slot data
    register with :meth:`on_renumber`. Postings are sorted int32 arrays
    (:mod:`memstore._postings`). What a query token matches is cached: its
    documents until the next write, its vocabulary expansion until a word
    that can change it enters or leaves the vocabulary (a cheap test,
    :mod:`memstore._vocablog`) or a compaction renumbers the postings. The
    vocabulary's own indexes are numpy tables (:mod:`memstore._vocabindex`):
    ``overlay_max`` words written between reads are keyed in dictionaries
    before they are built into arrays.
    """

    def __init__(
        self, *, compact_min: int = 4096, cache_entries: int = 4096, overlay_max: int = 4096
    ) -> None:
        self._lock = threading.RLock()
        self._slot_of: dict[str, int] = {}
        self._ids: list[str | None] = []
        # Per slot: the words as one space-padded string (" w1 w2 ... "), which
        # is smaller than a tuple of word objects and lets adjacency be checked
        # by a C substring search, and how many of them are the title's.
        self._doc_text: list[str] = []
        self._doc_ntitle: list[int] = []
        self._alive = np.zeros(64, np.bool_)
        self._dead = 0
        self._df: Counter[str] = Counter()  # the vocabulary: word -> live documents
        self._postings = Postings()
        self._title_postings = Postings()
        # Grams, deletions and stems of the words in _df.
        self._vocab = VocabIndex(compact_min=compact_min, overlay_max=overlay_max)
        self._compact_min = compact_min
        self._renumber_hooks: list[Callable[[npt.NDArray[np.intp]], None]] = []
        self._gen = 0  # bumped by every write
        # The words that entered or left the vocabulary lately: which expansions they touch.
        self._vlog = VocabLog()
        self._cache_entries = cache_entries
        # Both caches least recently used out: many distinct queries keep the common tokens.
        self._expansions: OrderedDict[str, _Expansion] = OrderedDict()
        # A match with the generation it is known exact at, and the expansion it was made of.
        self._matches: OrderedDict[tuple[str, bool], tuple[TokenMatch, int, _Expansion]] = (
            OrderedDict()
        )
        self._wlog = WriteLog()  # the words of the documents the last writes touched
        self._lengths = DocLengths()  # BM25's document lengths, counted when first asked for

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
            self.index_many([(id, title_words, content_words)])
            return self._slot_of[id]

    def index_many(self, docs: Sequence[tuple[str, list[str], list[str]]]) -> None:
        """Index each ``(id, title_words, content_words)`` as :meth:`index_words` would."""
        self.index_texts([(id, title, content, ()) for id, title, content in docs])

    def index_texts(self, docs: Sequence[TextDoc]) -> None:
        """Index each ``(id, title, content, extra)`` in order, as :meth:`index_words` would
        with the title's words and the content's followed by ``extra``.

        A title or content is a text or its words (:func:`~memstore.text.words`).
        The same index as calls one by one, built in a few passes over the
        batch: the documents replaced are taken out first, the new ones take
        consecutive slots, and their texts are split and their words counted
        into the vocabulary and numbered into the postings logs in one loop
        (:func:`~memstore._wordbatch.count_texts`, compiled where the optional
        extension is built). Ids repeated within ``docs`` are indexed one by one.
        """
        with self._lock:
            ids = [d[0] for d in docs]
            if len(set(ids)) != len(ids):
                for doc in docs:
                    self.index_texts([doc])
                return
            replaced = [slot for slot in map(self._slot_of.get, ids) if slot is not None]
            touched: set[str] = set()
            for slot in replaced:
                touched |= self._unindex_slot(slot)
            if replaced:
                self._maybe_compact()
            start = len(self._ids)
            end = start + len(docs)
            small = len(docs) <= self._wlog.bound
            new, texts, ntitles, batch = count_texts(
                docs if isinstance(docs, list) else list(docs),
                start,
                self._df,
                self._postings,
                self._title_postings,
                want_words=small,
            )
            if end > self._alive.size:
                grown = np.zeros(max(2 * self._alive.size, end), np.bool_)
                grown[:start] = self._alive[:start]
                self._alive = grown
            self._alive[start:end] = True
            self._ids.extend(ids)
            # After a compaction: it made a new map.
            self._slot_of.update(zip(ids, range(start, end), strict=True))
            self._doc_text.extend(texts)
            self._doc_ntitle.extend(ntitles)
            if new:
                self._vocab.add_many(new)
                self._vlog.record(new)
            self._gen += len(docs)
            if not small:  # a bulk load: no cached match is worth checking
                self._wlog.forget(self._gen)
            else:
                added = None if replaced else range(start, end)
                self._wlog.record(self._gen, touched.union(batch), added)

    def remove(self, id: str) -> None:
        """Drop everything ``id`` contributed. An unknown id is a no-op."""
        with self._lock:
            slot = self._slot_of.pop(id, None)
            if slot is None:
                return
            words = self._unindex_slot(slot)
            self._gen += 1
            self._wlog.record(self._gen, words, None)
            self._maybe_compact()

    def _unindex_slot(self, slot: int) -> set[str]:
        """Take the document at ``slot`` out; returns its words."""
        df = self._df
        words = set(self._doc_text[slot].split())
        for w in words:
            n = df[w] - 1
            if n:
                df[w] = n
            else:
                del df[w]
                self._remove_word(w)
        self._ids[slot] = None
        self._doc_text[slot] = ""
        self._doc_ntitle[slot] = 0
        self._alive[slot] = False
        self._dead += 1
        return words

    def on_renumber(self, hook: Callable[[npt.NDArray[np.intp]], None]) -> None:
        """Call ``hook(kept)`` after a compaction: new slot ``i`` was slot ``kept[i]``."""
        self._renumber_hooks.append(hook)

    def _maybe_compact(self) -> None:
        if self._dead >= self._compact_min and self._dead >= len(self._slot_of):
            self.compact()

    def compact(self) -> None:
        """Renumber the live slots densely, dropping the dead ones from every array."""
        with self._lock:
            cap = len(self._ids)
            kept = np.flatnonzero(self._alive[:cap])
            new_slot = np.full(cap, -1, np.int32)
            new_slot[kept] = np.arange(kept.size, dtype=np.int32)
            self._postings.renumber(new_slot)
            self._title_postings.renumber(new_slot)
            keep = kept.tolist()
            self._ids = [self._ids[s] for s in keep]
            self._doc_text = [self._doc_text[s] for s in keep]
            self._doc_ntitle = [self._doc_ntitle[s] for s in keep]
            self._slot_of = {id: i for i, id in enumerate(self._ids)}  # type: ignore[misc]
            alive = np.zeros(max(64, 2 * kept.size), np.bool_)
            alive[: kept.size] = True
            self._alive = alive
            self._dead = 0
            self._gen += 1
            self._lengths.reset()
            # The postings' word numbers changed: every expansion holds some.
            self._expansions.clear()
            self._vlog.forget()
            self._matches.clear()  # and the slots: every match holds some
            self._wlog.forget(self._gen)
            for hook in self._renumber_hooks:
                hook(kept)

    @staticmethod
    def _grams_of(w: str) -> set[str]:
        """The gram keys of word ``w`` (the rule :mod:`memstore._vocabindex` vectorises)."""
        grams = {w[i : i + 2] for i in range(len(w) - 1)}
        grams.update(w[i : i + 3] for i in range(len(w) - 2))
        if w.isascii():  # the only ASCII characters kept alone are digits
            grams.update(_DIGITS.intersection(w))
        else:
            grams.update(c for c in w if _KEEP_CHAR.match(c))
        return grams

    def _remove_word(self, w: str) -> None:
        self._vlog.record((w,))
        self._vocab.remove(w)

    # ------------------------------------------------------------------ reads

    def __len__(self) -> int:
        return len(self._slot_of)

    def len(self) -> int:
        """The number of documents indexed."""
        return len(self._slot_of)

    def doc_freq(self, word: str) -> int:
        """How many documents contain ``word`` as a whole word (lower-cased)."""
        return self._df.get(word.lower(), 0)

    def has_word(self, word: str) -> bool:
        """Whether ``word`` is a word of some indexed document."""
        return word in self._df

    def slot(self, id: str) -> int | None:
        """The slot of ``id``, or ``None`` when it is not indexed."""
        return self._slot_of.get(id)

    def slots_of(self, ids: Iterable[str]) -> list[int]:
        """The slots of ``ids``, every one of them indexed (a ``KeyError`` otherwise)."""
        return list(map(self._slot_of.__getitem__, ids))

    def alive_slots(self) -> npt.NDArray[np.bool_]:
        """Per slot below :attr:`capacity`, whether a document is indexed there (a view)."""
        return self._alive[: len(self._ids)]

    def id_at(self, slot: int) -> str | None:
        """The id indexed at ``slot``, or ``None`` for a dead slot."""
        return self._ids[slot]

    @property
    def capacity(self) -> int:
        """One more than the highest slot in use (the size per-slot arrays need)."""
        return len(self._ids)

    @property
    def generation(self) -> int:
        """A number that changes whenever the index does (every write)."""
        return self._gen

    def doc_lengths(self) -> tuple[npt.NDArray[np.int32], float]:
        """Each slot's word count (title, content and extra words; read-only, dead slots
        included) and the mean over the live documents: BM25's ``|d|`` and ``avgdl``
        (:mod:`memstore._bm25`)."""
        with self._lock:
            return self._lengths.of(self._doc_text, self._alive, self._gen)

    def length_factors(self) -> npt.NDArray[np.float64]:
        """Each slot's BM25 length factor (:meth:`memstore._bm25.DocLengths.factors`)."""
        with self._lock:
            return self._lengths.factors(self._doc_text, self._alive, self._gen)

    def word_postings(self, words: Sequence[str]) -> list[npt.NDArray[np.int32]]:
        """Each word's documents as a whole word: sorted slots, dead ones included."""
        with self._lock:
            self._postings.flush()
            return [self._postings.get(w) for w in words]

    def doc_words(self, id: str) -> tuple[str, ...]:
        """The words indexed for ``id`` (title first), ``()`` when unknown."""
        slot = self._slot_of.get(id)
        return () if slot is None else tuple(self._doc_text[slot].split())

    def ids_with_word(self, word: str) -> list[str]:
        """The ids of the documents containing ``word`` as a whole word."""
        with self._lock:
            self._postings.flush()
            slots = self._postings.get(word)
            ids = self._ids
            return [ids[s] or "" for s in slots[self._alive[slots]].tolist()]

    def mask_with_words(self, words: Iterable[str]) -> npt.NDArray[np.bool_]:
        """A mask over the slots: the live documents holding any of ``words`` as a whole word."""
        with self._lock:
            self._postings.flush()
            mask = np.zeros(self._alive.size, np.bool_)
            for w in words:
                mask[self._postings.get(w)] = True
            mask &= self._alive
            return mask

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
                slots.update(self.match_token(tok, fuzzy=False).slots.tolist())
            ids = self._ids
            return {ids[s] for s in slots}  # type: ignore[misc]

    def flush(self) -> None:
        """Turn the batched postings log into arrays now (the next read would).

        A bulk load can call it last, so its first query does not pay for it.
        """
        with self._lock:
            self._postings.flush()
            self._title_postings.flush()

    def clear_caches(self) -> None:
        """Forget every cached token match (benchmarks time the uncached path with it)."""
        with self._lock:
            self._expansions.clear()
            self._matches.clear()

    # -------------------------------------------------------------- matching

    def _substring_words(self, tok: str) -> Iterable[str]:
        """The vocabulary words holding ``tok``, in word-number order.

        A token of one to three characters is a gram: its words. A longer
        one is in a word only if each of its trigrams is: here the trigrams'
        words are intersected, rarest first, and the few left tested for
        ``tok``; compiled (``substring_words`` in ``memstore/_editnear.c``),
        the rarest trigram's words are tested at once: the same words.
        """
        n = len(tok)
        if n == 0:
            return ()
        vocab = self._vocab
        gram = n > 1 or _KEEP_CHAR.match(tok)
        native = _wordbatch.speedups
        if gram and native is not None:  # the same words, found in C: rarest trigram, then `in`
            tables, overlay, live, words = vocab.probe_view("grams")
            held: list[str] = native.substring_words(tok, words, live, tables, overlay)
            return held
        if n <= 3 and gram:
            return vocab.gram_words(tok)  # the gram is the token: exact
        if n == 1:  # a lone letter (a query of only filler): rare, scan the vocabulary
            return [w for w in self._df if tok in w]
        buckets = vocab.gram_ids(sorted(trigrams(tok)))
        if any(b.size == 0 for b in buckets):
            return ()
        buckets.sort(key=len)
        # Intersect smallest first (sorted distinct word numbers) while that
        # is cheaper than the check that settles it anyway: ``tok in w``.
        found = buckets[0]
        for b in buckets[1:]:
            if found.size <= _VERIFY_MAX:
                break
            found = intersect_sorted(found, b)
            if not found.size:
                return ()
        return [w for w in vocab.words_of(found) if tok in w]

    def edit_neighbours(self, s: str) -> set[str]:
        """The vocabulary words within one edit of ``s`` (``s`` itself included).

        Cost: O(len(s) ** 2) (each deletion of ``s``, each digit edit); a query
        only asks it of tokens of at most :data:`MAX_EDIT_CHARS` characters.
        """
        with self._lock:  # a probe may key the vocabulary's pending words
            return neighbour_sets(s, [(0, len(s))], self._df, self._vocab)[0]

    def _fuzzy_words(self, tok: str) -> dict[str, float]:
        """The words of the fuzzy channel and their levels, in word-number order.

        A word sharing at least a third of ``tok``'s trigrams may reach the
        Dice threshold; those are scored. Compiled where the extension is
        built (``fuzzy_words`` in ``memstore/_editnear.c``: trigram codes
        merged instead of a set of strings a word), the same words and levels.
        """
        native = _wordbatch.speedups
        if native is not None and len(tok) >= 3:
            tables, overlay, live, words = self._vocab.probe_view("grams")
            got: dict[str, float] = native.fuzzy_words(
                tok, words, live, tables, overlay, FUZZY_MIN_DICE, FUZZY_MAX
            )
            return got
        tg = trigrams(tok)
        buckets = [b for b in self._vocab.gram_ids(sorted(tg)) if b.size]
        if not buckets:
            return {}
        # dice = 2c/(|a|+|b|) >= 0.5 needs c >= |a|/3, since c <= |b|.
        need = len(tg) / 3.0
        ids, counts = unique_counts(np.concatenate(buckets))
        out: dict[str, float] = {}
        for w in self._vocab.words_of(ids[counts >= need]):
            dice = _dice(tg, w)
            if dice >= FUZZY_MIN_DICE:
                out[w] = FUZZY_MAX * dice
        return out

    def _expand(self, tok: str) -> _Expansion:
        """The vocabulary words ``tok`` matches, cached while no word relevant to it comes or goes.

        A cached expansion is checked against the words logged since it was
        last known exact (:meth:`VocabLog.unaffected`); its word numbers in
        the postings stay valid until a compaction, which drops it.
        """
        log = self._vlog
        now = log.stamp
        ex = self._expansions.get(tok)
        if ex is not None:
            if ex.stamp == now or log.unaffected(tok, ex.stamp):
                ex.stamp = now
                self._expansions.move_to_end(tok)
                return ex
            del self._expansions[tok]
        vocab = self._df
        levels: dict[str, float] = {}
        pairs: list[tuple[str, str]] = []
        if tok in vocab:
            levels[tok] = LEVEL_EXACT
        long_tok = len(tok) >= 3
        for w in self._substring_words(tok):
            if w != tok:
                levels[w] = LEVEL_PREFIX if long_tok and w.startswith(tok) else LEVEL_SUBSTRING
        if len(tok) > 2:
            for w in self._vocab.stem_words(stem(tok)):
                if levels.get(w, 0.0) < LEVEL_STEM:
                    levels[w] = LEVEL_STEM
            if len(tok) <= MAX_EDIT_CHARS:  # the edits cost O(len(tok) ** 2): bounded
                near, pairs = edits(tok, levels, self._df, self._vocab)
                for w in near:
                    if levels.get(w, 0.0) < LEVEL_EDIT:
                        levels[w] = LEVEL_EDIT
        grouped: dict[float, list[str]] = {}
        for w, lv in levels.items():
            grouped.setdefault(lv, []).append(w)
        strong = [w for w, lv in levels.items() if lv >= LEVEL_EDIT]
        # The fuzzy channel is a typo rescue: closed to a token that some
        # word already matches well (exactly, as a prefix, by stem or edit),
        # so "camped" finding "camping" is not diluted by "swamped".
        ex = _Expansion(
            levels=levels,
            by_level=sorted(grouped.items()),
            strong=strong,
            pairs=pairs,
            fuzzy_ok=not strong,
            stamp=now,
        )
        if self._expansions and len(self._expansions) >= self._cache_entries:
            self._expansions.popitem(last=False)
        self._expansions[tok] = ex
        return ex

    def _joined_slots(
        self, ex: _Expansion, strong: Sequence[npt.NDArray[np.int32]]
    ) -> npt.NDArray[np.int32]:
        """The documents holding a pair of ``ex.pairs`` adjacently, not matched strongly.

        ``strong`` holds the slots of the words of ``ex.strong`` (the
        postings :meth:`_resolve` has concatenated already, by level): those
        documents match at :data:`LEVEL_EDIT` or better anyway. The adjacency
        test (the pair in a document's text) settles it, so when one word of
        a pair is in few documents those are tested as they are; otherwise
        the pair's postings are intersected first. Each distinct word's
        postings are looked up once (the pairs of a short token share a few
        words: "sha" gives ("sh", "a"), ("sa", "are"), ("zh", "are")...).
        """
        post, text = self._postings, self._doc_text
        words = {w for pair in ex.pairs for w in pair}
        postings = dict(zip(words, map(post.get, words), strict=True))
        native = _wordbatch.speedups
        if native is not None:  # the same slots, one C loop (memstore/_joined.c)
            todo = [(postings[a], postings[b], f" {a} {b} ") for a, b in ex.pairs]
            todo = [t for t in todo if t[0].size and t[1].size]
            got: list[int] = native.joined_slots(todo, text, list(strong), len(self._ids))
            return np.array(got, np.int32)
        exclude: npt.NDArray[np.bool_] | None = None
        found: list[int] = []
        for w1, w2 in ex.pairs:
            a, b = postings[w1], postings[w2]
            if not a.size or not b.size:
                continue
            pair = f" {w1} {w2} "
            few = a if a.size <= b.size else b
            tested = few.size <= _VERIFY_MAX
            if tested:
                hit = _holding(text, few.tolist(), pair)
                if not hit:
                    continue
                both = np.array(hit, np.int32)
            else:
                both = intersect_sorted(a, b)
                if not both.size:
                    continue
            if exclude is None:
                exclude = np.zeros(len(self._ids), np.bool_)
                for arr in strong:
                    exclude[arr] = True
            both = both[~exclude[both]]
            if both.size:
                hit = both.tolist() if tested else _holding(text, both.tolist(), pair)
                if hit:
                    exclude[hit] = True
                    found.extend(hit)
        return np.array(found, np.int32)

    def match_token(self, tok: str, *, fuzzy: bool = True) -> TokenMatch:
        """Everything ``tok`` matches, with the best level per document (see :class:`TokenMatch`).

        ``fuzzy=False`` leaves the fuzzy channel out (the exact rule alone).
        A repeated token costs a dictionary lookup until the next write, and
        a few set tests after writes that touch none of its words, or only
        add documents holding some (while its expansion stands:
        :mod:`memstore._writelog`).
        """
        with self._lock:
            key = (tok, fuzzy)
            hit = self._matches.get(key)
            if hit is not None:
                m, gen, ex = hit
                if gen == self._gen:
                    self._matches.move_to_end(key)
                    if tok in self._expansions:  # used too: the two stay (or go) together
                        self._expansions.move_to_end(tok)
                    return m
                if self._expand(tok) is ex:
                    added = self._wlog.changed_since(gen, ex.levels.keys(), self._others(ex))
                    if added is not None:  # no document with its words moved: only new ones
                        if added:
                            fz = {}
                            if fuzzy and ex.fuzzy_ok and len(tok) >= FUZZY_MIN_LEN:
                                fz = {w: lv for lv, ws in ex.fuzzy or () for w in ws}
                            texts, ntitles = self._doc_text, self._doc_ntitle
                            m = extend_match(
                                m, added, texts, ntitles, ex.levels, fz, ex.pairs, LEVEL_EDIT
                            )
                        self._matches[key] = (m, self._gen, ex)
                        self._matches.move_to_end(key)
                        return m
            m, ex = self._resolve(tok, fuzzy)
            if hit is None and self._matches and len(self._matches) >= self._cache_entries:
                self._matches.popitem(last=False)
            self._matches[key] = (m, self._gen, ex)
            self._matches.move_to_end(key)
            return m

    @staticmethod
    def _others(ex: _Expansion) -> frozenset[str]:
        """``ex.others``, computed once (again after the fuzzy words are)."""
        if ex.others is None:
            fuzzy = chain.from_iterable(ws for _, ws in ex.fuzzy or ())
            ex.others = frozenset(chain(chain.from_iterable(ex.pairs), fuzzy))
        return ex.others

    def _resolve(self, tok: str, fuzzy: bool) -> tuple[TokenMatch, _Expansion]:
        post, tp = self._postings, self._title_postings
        post.flush()
        tp.flush()
        ex = self._expand(tok)
        groups: list[tuple[float, list[npt.NDArray[np.int32]]]] = []
        if fuzzy and ex.fuzzy_ok and len(tok) >= FUZZY_MIN_LEN:
            if ex.fuzzy is None:
                fz: dict[float, list[str]] = {}
                for w, lv in self._fuzzy_words(tok).items():
                    fz.setdefault(lv, []).append(w)
                ex.fuzzy = sorted(fz.items())
                ex.others = None  # now with the fuzzy words
                ex.fuzzy_ids = [(lv, post.ids(ws)) for lv, ws in ex.fuzzy]
            # Fuzzy levels lie below every exact-rule level: a document the
            # exact rule admits keeps its exact level (the best one wins).
            groups += [(lv, [post.concat(ids)]) for lv, ids in ex.fuzzy_ids or ()]
        if ex.content_ids is None:  # every vocabulary word is in the content postings
            ex.content_ids = [(lv, post.ids(ws)) for lv, ws in ex.by_level]
        if ex.title_numbered != tp.numbered:
            ex.title_ids = [(lv, tp.ids(ws)) for lv, ws in ex.by_level]
            ex.title_numbered = tp.numbered
        content = [(lv, post.concat(ids)) for lv, ids in ex.content_ids]
        groups += [(lv, [arr]) for lv, arr in content]
        if ex.pairs:
            joined = self._joined_slots(ex, [arr for lv, arr in content if lv >= LEVEL_EDIT])
            if joined.size:
                groups.append((LEVEL_EDIT, [joined]))
        cap, alive = len(self._ids), (self._alive if self._dead else None)
        slots, levels = best_levels(groups, cap, alive)
        # The title bonus scales with the level the title word reaches, so
        # a near-miss in a title never outranks exact words in the text.
        title = [(lv, [tp.concat(ids)]) for lv, ids in ex.title_ids or ()]
        tslots, tlevels = best_levels(title, cap, alive)
        for a in (slots, levels, tslots, tlevels):
            a.setflags(write=False)  # cached and shared: nobody may write into it
        return TokenMatch(slots, levels, tslots, tlevels, ex.fuzzy_ok), ex

    # ------------------------------------------------------------- invariant

    def _check(self) -> None:
        """Assert every internal index agrees with the documents (for tests)."""
        with self._lock:
            check_lexicon(self)
