"""A deterministic, dependency-free embedder by feature hashing (not semantic).

:class:`HashEmbedder` maps each word of a text, and the character trigrams of
each word, to a signed bucket of a fixed-length vector. Texts that share words
or spellings ("deploy" and "deployment") get close vectors; texts that mean
the same thing in different words ("car" and "automobile") do not. Use it for
tests and for zero-configuration installs; use a real model for semantic search.

>>> emb = HashEmbedder(dim=64, seed=0)
>>> emb.model_id
'hash-v1-64-0'
>>> v = emb.embed(["deploy failed", "deployment failed", "apple pie recipe"])
>>> bool(v[0] @ v[1] > v[0] @ v[2])
True
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from memstore.text import words
from memstore_index.embedder import MAX_DIM, EmbedderConfigError, check_texts, normalize_rows

__all__ = ["DEFAULT_DIM", "GRAM_WEIGHT", "NGRAM", "HashEmbedder"]

DEFAULT_DIM = 256
"""Vector length. 256 keeps collisions rare for short memory notes."""
NGRAM = 3
"""Character n-gram length, taken over each word padded as ``<word>``."""
GRAM_WEIGHT = 0.9
"""L2 weight of a word's n-grams together, against 1.0 for the word itself.

Shared spelling (plural, suffix, typo: "deploy", "deployment") counts nearly
as much as an exact word. Not 1.0, so a one-letter word's only gram cannot
cancel the word's own signed feature.
"""
_CACHE_MAX = 200_000
"""Words whose features are memoised per instance before the memo is reset."""
_EMPTY = "\x00empty"
"""The feature of a text with no words: every such text gets this one unit vector."""

_Features = tuple[list[int], list[float]]


class HashEmbedder:
    """Feature-hashing embedder: words and character trigrams, blake2b-hashed.

    Deterministic across processes and platforms (blake2b, not Python's salted
    ``hash``): the same ``(dim, seed)`` always gives the same vectors, which
    ``model_id`` (``"hash-v1-{dim}-{seed}"``) records. Different seeds give
    unrelated vector spaces.

    Tokens come from :func:`memstore.text.words` (lower-cased, accents folded,
    CamelCase split). A text with no words at all (``""``, ``"!!"``) embeds to
    one fixed unit vector, so it is never a zero vector.

    Cost: one blake2b per distinct feature, memoised per word; a batch is then
    one ``numpy.bincount``. It is **not semantic**: synonyms and paraphrases
    in different words score as unrelated.

    :raises EmbedderConfigError: ``dim`` outside ``[2, MAX_DIM]`` (65,536) or ``seed``
        outside ``[0, 2**64)``.
    """

    holds_gil: ClassVar[bool] = True
    """``embed`` is Python and numpy on the calling thread, start to end, never waiting
    (no I/O, no threads of its own): a caller gains nothing by handing it a thread, and a
    server's query batcher calls it on its worker (:func:`memstore.web.batching.attach_batcher`)."""

    def __init__(self, dim: int = DEFAULT_DIM, seed: int = 0) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 2 <= dim <= MAX_DIM:
            raise EmbedderConfigError(
                f"HashEmbedder dim must be an int in [2, {MAX_DIM}], got {dim!r}"
            )
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise EmbedderConfigError(
                f"HashEmbedder seed must be an int in [0, 2**64), got {seed!r}"
            )
        self.dim = dim
        self.seed = seed
        self.model_id = f"hash-v1-{dim}-{seed}"
        self._salt = seed.to_bytes(8, "little")
        self._memo: dict[str, _Features] = {}
        self._empty = self._hash_features([_EMPTY], [1.0])

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim}, seed={self.seed})"

    def _hash_features(self, feats: list[str], weights: list[float]) -> _Features:
        dim, salt = self.dim, self._salt
        blake = hashlib.blake2b
        idx: list[int] = []
        signed: list[float] = []
        for f, w in zip(feats, weights, strict=True):
            h = int.from_bytes(
                blake(f.encode("utf-8", "surrogatepass"), digest_size=8, salt=salt).digest(),
                "little",
            )
            idx.append(h % dim)
            # The top bit picks the sign; the bucket comes from the low bits.
            signed.append(w if h >> 63 else -w)
        return idx, signed

    def _word(self, w: str) -> _Features:
        hit = self._memo.get(w)
        if hit is not None:
            return hit
        padded = f"<{w}>"
        grams = [padded[i : i + NGRAM] for i in range(max(1, len(padded) - NGRAM + 1))]
        gw = GRAM_WEIGHT / math.sqrt(len(grams))
        feats = self._hash_features(
            ["w\x1f" + w, *("g\x1f" + g for g in grams)], [1.0] + [gw] * len(grams)
        )
        if len(self._memo) >= _CACHE_MAX:
            self._memo.clear()
        self._memo[w] = feats
        return feats

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit-length float32 row per text, shape ``(len(texts), dim)``.

        >>> HashEmbedder(dim=8).embed([]).shape
        (0, 8)

        :raises EmbedderInputError: ``texts`` is a bare string or holds a non-string.
        """
        batch = check_texts(texts)
        n, dim = len(batch), self.dim
        idx: list[int] = []
        wts: list[float] = []
        counts: list[int] = []
        for text in batch:
            start = len(idx)
            ws = words(text)
            if not ws:
                idx += self._empty[0]
                wts += self._empty[1]
            for w in ws:
                fi, fw = self._word(w)
                idx += fi
                wts += fw
            counts.append(len(idx) - start)
        # One bincount over (row, bucket) pairs scatters the whole batch at once.
        rows = np.repeat(np.arange(n, dtype=np.int64), counts)
        flat = rows * dim + np.asarray(idx, dtype=np.int64)
        out = np.bincount(flat, weights=np.asarray(wts), minlength=n * dim).reshape(n, dim)
        zero = ~out.any(axis=1)
        if zero.any():
            # Signed features cancelled exactly (needs two exact collisions): never a zero row.
            out[zero] = np.bincount(self._empty[0], weights=self._empty[1], minlength=dim)
        return normalize_rows(out, "HashEmbedder")
