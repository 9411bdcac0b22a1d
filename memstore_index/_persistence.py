"""The durable side of a CellStore: the vector file, the graph cache, the save backlog.

Vectors reach the file (:mod:`memstore_index._vectorfile`) after the index in
memory has them, one transaction per write; the HNSW graph is saved beside
it at close, stamped with the file's generation and its random write mark
(renewed by every write, so two histories of one origin never match), and
rebuilt whenever the stamp does not match. A damaged file is set aside at open and started
afresh; a file that refuses a write (a full disk) leaves the rows in the
*unsaved backlog*, retried by the next write (see ``CellStore.pending``).
Compaction (renumbering labels densely) also lives here: it rewrites the
file's labels first, and rebuilds the graph.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import warnings
from pathlib import Path
from typing import Self

import hnswlib  # type: ignore[import-untyped]
import numpy as np
import numpy.typing as npt

from memstore.errors import MemstoreError
from memstore_index import _calibrate as cal
from memstore_index import _tuning as tune
from memstore_index._centring import Sums, normalise
from memstore_index._state import CellState, EmbedderMismatchError
from memstore_index._twins import Twins
from memstore_index._vectorfile import (
    VECTOR_FILE,
    GraphFile,
    StoredVector,
    VectorFile,
    VectorFileCorruptError,
    VectorFileError,
    VectorFileWarning,
    set_aside,
)
from memstore_index.embedder import Embedder

__all__ = ["Persistence"]

_log = logging.getLogger("memstore")


class Persistence(CellState):
    """Opening, saving, closing, compacting; the unsaved backlog."""

    @property
    def max_bytes(self) -> int | None:
        """The vector file's size cap (``None``: no cap, or no file); settable."""
        return self._file.max_bytes if self._file is not None else None

    @max_bytes.setter
    def max_bytes(self, value: int | None) -> None:
        with self._lock:
            if self._file is None:
                raise MemstoreError("max_bytes caps the vector file: this CellStore has no path")
            self._file.max_bytes = value

    def _open(self, directory: Path, max_bytes: int | None) -> None:
        """Open (or create) the vector file; a damaged one is set aside and started afresh."""
        self._graph = GraphFile(directory)
        try:
            file = VectorFile(directory, max_bytes=max_bytes)
        except VectorFileCorruptError as e:
            file = self._start_afresh(directory, e, max_bytes)
        try:
            rows = self._read(file, directory)
        except VectorFileCorruptError as e:
            file.close()
            file = self._start_afresh(directory, e, max_bytes)
            rows = self._read(file, directory)
        except BaseException:
            file.close()  # a failed open leaves no connection (nor lock) behind
            raise
        self._file = file
        for row in rows:
            self._place(row.entry, row.label, row.vector, row.text_hash)
        live = len(self._label_of)
        self._deleted = len(self._entries) - live  # labels freed before the last close
        if live > tune.EXACT_THRESHOLD:
            self._load_or_build_graph(live)

    def _read(self, file: VectorFile, directory: Path) -> list[StoredVector]:
        """Check the file's model and read its rows (and generation)."""
        meta = file.meta()
        if "model_id" in meta:
            if meta["model_id"] != self._model_id or meta.get("dim") != str(self._dim):
                raise EmbedderMismatchError(
                    f"the vectors under {str(directory)!r} were made by {meta['model_id']!r} "
                    f"(dim {meta.get('dim')}), not {self._model_id!r} (dim {self._dim}); "
                    f"open it with that embedder, or re-embed every stored text with "
                    f"CellStore.reembed({str(directory)!r}, new_embedder)"
                )
        else:
            file.set_meta(model_id=self._model_id, dim=str(self._dim), generation="0")
        try:
            self._generation = int(meta.get("generation", "0"))
            self._stamp = meta.get("stamp", "")
        except ValueError:
            raise VectorFileCorruptError(
                f"{str(file.path)!r}: the generation is not a number"
            ) from None
        return file.rows(self._dim)

    def _start_afresh(
        self, directory: Path, damage: VectorFileCorruptError, max_bytes: int | None
    ) -> VectorFile:
        """Set a damaged vector file aside, warn naming both paths, and open an empty one.

        The vectors are a cache of the store: a CellStore attached to a store
        (``Memory`` does it) embeds every item again as it attaches.
        """
        path = directory / VECTOR_FILE
        moved = set_aside(path)
        if self._graph is not None:
            with contextlib.suppress(OSError):
                self._graph.invalidate()  # the old graph's labels mean nothing now
        self.set_aside_as = moved
        warnings.warn(
            f"memstore: the vector file {str(path)!r} is damaged ({damage}); it was set "
            f"aside as {str(moved)!r} (kept, not deleted) and a new one is being rebuilt "
            "from the store's items",
            VectorFileWarning,
            stacklevel=4,
        )
        return VectorFile(directory, max_bytes=max_bytes)

    def _load_or_build_graph(self, live: int) -> None:
        graph = self._graph
        if graph is not None and graph.valid_for(self._generation, live, self._stamp):
            index = hnswlib.Index(space="ip", dim=self._dim)
            try:
                index.load_index(str(graph.graph), max_elements=len(self._alive))
                index.set_ef(self._ef)
            except (RuntimeError, ValueError, OSError):
                _log.warning("memstore: the saved HNSW graph did not load; rebuilding it")
            else:
                ids = set(index.get_ids_list())
                if self._holds_one_of_each(ids):
                    self._hnsw = index
                    self._in_graph[self._graph_labels()] = True
                    self._skip_past(ids)
                    self._restore_calibration(graph)
                    return
        self._rebuild_graph()

    def _skip_past(self, ids: set[int]) -> None:
        """Never give a new vector a label the loaded graph holds (deleted).

        Labels freed at the top of the range before the close are in no row,
        so the labels would restart below them; the graph still holds them,
        and would take a new vector at one for the old one's update.
        """
        top = max(ids, default=-1) + 1
        if top > len(self._entries):
            self._deleted += top - len(self._entries)
            self._entries.extend([None] * (top - len(self._entries)))
            self._grow(top)

    def _holds_one_of_each(self, ids: set[int]) -> bool:
        """Whether a loaded graph's labels hold exactly one label of each distinct vector.

        Each group of twins names the one the graph holds its representative
        (:meth:`Twins.adopt`: which twin a removal promoted is not recorded).
        A graph holding two labels of one vector was saved before twins were
        kept out of it: rebuilt, once, at the cost of the distinct vectors.
        """
        singles = set(np.flatnonzero(self._alive).tolist())
        for group in self._twins.groups():
            held = [lab for lab in (group.rep, *group.twins) if lab in ids]
            if len(held) != 1:
                return False
            self._twins.adopt(held[0])
            singles.discard(group.rep)
            singles.difference_update(group.twins)
        return singles <= ids

    def _restore_calibration(self, graph: GraphFile) -> None:
        """Take the beam measured for this very graph, if it was measured for this target.

        Only called once :meth:`GraphFile.valid_for` has matched the sidecar's
        generation, count and checksum to this vector file and graph: the
        calibration lives in that same sidecar, so a stale graph's beam is
        never trusted (the rebuild calibrates afresh).
        """
        side = graph.sidecar_data()
        ef, n, last = side.get("ef"), side.get("calibrated_n"), side.get("calibration")
        if (
            self._target is not None
            and side.get("target_recall") == self._target
            and isinstance(ef, int)
            and isinstance(n, int)
        ):
            self._ef_plain, self._calibrated_n = min(ef, self._ef), n
            if (
                isinstance(last, list)
                and len(last) == 2
                and isinstance(last[0], int)
                and isinstance(last[1], float)
            ):
                self.calibration = (last[0], last[1])

    def save(self) -> None:
        """Save the HNSW graph beside the vectors, so the next open skips the rebuild."""
        with self._lock:
            if self._graph is None or self._hnsw is None:
                return
            self._hnsw.save_index(str(self._graph.graph))
            self._graph.record(
                self._generation,
                len(self._label_of),
                self._stamp,
                ef=self._ef_plain,
                calibrated_n=self._calibrated_n,
                target_recall=self._target,
                calibration=list(self.calibration) if self.calibration else None,
            )

    def close(self) -> None:
        """Save the backlog and the graph (if any) and close the vector file.

        Rows that still cannot be saved are logged as lost from the file: the
        next open of a CellStore attached to the store embeds them again.
        """
        with self._lock:
            if self._file is not None and self._unsaved:
                try:
                    self._save_backlog()
                except VectorFileError as e:
                    _log.warning(
                        "memstore: closing with %d vector(s) not saved (%s); they are "
                        "embedded again when the store is next attached",
                        len(self._unsaved),
                        e,
                    )
            with contextlib.suppress(OSError, RuntimeError):
                self.save()  # a cache: a graph that cannot be saved is rebuilt at open
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def reembed(cls, path: str | Path, embedder: Embedder, *, batch_size: int = 64) -> int:
        """Re-embed every text stored under ``path`` with ``embedder``; returns the count.

        The way out of :class:`EmbedderMismatchError` after changing models: the
        stored texts are read back, embedded anew, and written with the new
        model's identity in one transaction; the old graph is discarded.
        ``batch_size`` (texts per embedding call) must be a whole number >= 1:
        a negative one embedded nothing yet stamped the new model's identity
        on the old vectors.
        """
        if type(batch_size) is not int or batch_size < 1:
            raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}")
        directory = Path(path)
        old = VectorFile(directory)
        try:
            meta = old.meta()
            dim = int(meta.get("dim", "0"))
            rows = list(old.rows(dim)) if dim else []
            generation = int(meta.get("generation", "0")) + 1
            puts: list[StoredVector] = []
            for start in range(0, len(rows), batch_size):
                chunk = rows[start : start + batch_size]
                vecs = normalise(
                    embedder.embed([r.text for r in chunk]), int(embedder.dim), len(chunk)
                )
                puts.extend(
                    StoredVector(r.entry, r.label, r.text_hash, r.text, v)
                    for r, v in zip(chunk, vecs, strict=True)
                )
            # The vectors and the model they belong to, in one transaction: never
            # one model's vectors under another's name.
            identity = {"model_id": str(embedder.model_id), "dim": str(int(embedder.dim))}
            old.write(puts, [], generation, {**identity, "stamp": secrets.token_hex(8)})
        finally:
            old.close()
        GraphFile(directory).invalidate()
        return len(rows)

    def _persist(self, puts: list[StoredVector], deletes: list[str]) -> None:
        """Write rows to the vector file, or add them to the backlog (lock held).

        The index in memory already holds them: a failure here is a degraded
        state, not a failed write. The first failure is logged once; until the
        backlog is saved (:meth:`flush`, the next write group, or the next
        direct write) rows join it without another attempt, so a batch of
        thousands logs one warning, not thousands of tracebacks.
        """
        if not puts and not deletes:
            return
        self._generation += 1
        self._stamp = secrets.token_hex(8)
        if self._file is None:
            return
        if not self._unsaved:
            try:
                self._file.write(puts, deletes, self._generation, {"stamp": self._stamp})
                return
            except VectorFileError as e:
                _log.warning(
                    "memstore: %d vector(s) could not be saved (%s); they stay in memory, "
                    "search is unaffected, and they are saved by the next write or flush()",
                    len(puts) + len(deletes),
                    e,
                )
        for p in puts:
            self._unsaved[p.entry.id] = p
        for id in deletes:
            self._unsaved[id] = None

    def _save_backlog(self) -> None:
        """Write every unsaved row, as the index holds it now, in one transaction (lock held)."""
        if self._file is None or not self._unsaved:
            return
        puts: list[StoredVector] = []
        deletes: list[str] = []
        for id, row in self._unsaved.items():
            label = self._label_of.get(id)
            if label is None or row is None:
                deletes.append(id)
                continue
            entry = self._entries[label]
            assert entry is not None and self._hash[id] == row.text_hash
            puts.append(StoredVector(entry, label, row.text_hash, row.text, self._vecs[label]))
        self._file.write(puts, deletes, self._generation, {"stamp": self._stamp})
        self._unsaved.clear()

    def _maybe_graph(self) -> None:
        if self._hnsw is None and len(self._label_of) > tune.EXACT_THRESHOLD:
            self._rebuild_graph()
        else:
            self._maybe_compact()

    def _maybe_compact(self) -> None:
        live = len(self._label_of)
        if self._unsaved:
            return  # the file's labels lag behind: relabelling it would not fit them
        if self._deleted >= tune.COMPACT_MIN_DELETED and self._deleted > tune.COMPACT_RATIO * live:
            try:
                self.compact()
            except VectorFileError as e:
                _log.warning("memstore: compaction skipped, the vector file refused it (%s)", e)

    def compact(self) -> None:
        """Renumber the live labels densely and rebuild the graph (drops deleted slots).

        The vector file is relabelled first: if it refuses (:class:`VectorFileError`),
        nothing changed. Refused while vectors wait to be saved (:attr:`pending`).
        """
        with self._lock:
            if self._unsaved:
                raise VectorFileError(
                    f"{len(self._unsaved)} vector(s) wait to be saved: flush() first, then compact"
                )
            order = sorted(self._label_of.items(), key=lambda p: p[1])
            stamp = secrets.token_hex(8)
            if self._file is not None:
                mapping = {id: n for n, (id, _) in enumerate(order)}
                self._file.relabel(mapping, self._generation + 1, stamp)
            vecs = np.stack([self._vecs[lab] for _, lab in order]) if order else None
            entries = [self._entries[lab] for _, lab in order]
            hashes = dict(self._hash)
            self._vecs = np.zeros((max(1024, len(order) * 2), self._dim), np.float32)
            self._alive = np.zeros(len(self._vecs), np.bool_)
            self._in_graph = np.zeros(len(self._vecs), np.bool_)
            self._vid = np.zeros(len(self._vecs), np.int64)
            self._twins, self._promoted = Twins(), []
            self._entries, self._label_of, self._hash = [], {}, {}
            self._by_partition, self._by_subject, self._shared = {}, {}, set()
            self._sums = Sums(self._dim)
            self._deleted = 0
            self._hnsw = None
            for new, ((id, _), entry) in enumerate(zip(order, entries, strict=True)):
                assert entry is not None and vecs is not None
                self._place(entry, new, vecs[new], hashes[id])
            self._generation, self._stamp = self._generation + 1, stamp
            if len(self._label_of) > tune.EXACT_THRESHOLD:
                self._rebuild_graph()

    def _rebuild_graph(self) -> None:
        index = hnswlib.Index(space="ip", dim=self._dim)
        index.init_index(
            max_elements=len(self._alive), ef_construction=self._efc, M=self._m, random_seed=100
        )
        index.set_ef(self._ef)
        self._hnsw = index
        self._in_graph[:] = False
        self._promoted = []
        self._ef_plain, self._calibrated_n, self._probe = self._ef, 0, None
        labels = self._graph_labels()  # one label per distinct vector
        if labels.size:
            self._graph_add(labels)

    def _graph_add(self, labels: npt.NDArray[np.intp]) -> None:
        """Insert ``labels`` (placed, alive) into the graph, recalibrating ``ef`` when due.

        A calibration holds a sample of these very rows out: the others go in
        first, the sample is searched as fresh queries, then it goes in too.
        A batch too small for that feeds the :class:`~memstore_index._calibrate.FreshProbe`
        instead (searched before it goes in), which calibrates once it holds
        :data:`~memstore_index._calibrate.CALIBRATION_SAMPLE` rows: the cost
        is spread over that many writes, once per growth step.
        """
        index = self._hnsw
        assert index is not None
        live = self._graph_live
        due = self._target is not None and live >= cal.RECALIBRATE_GROWTH * self._calibrated_n
        if not due or labels.size < cal.CALIBRATION_MIN:
            if due:
                self._probe_small_batch(index, labels)
            else:
                index.add_items(self._vecs[labels], labels)
                self._in_graph[labels] = True
            return
        self._probe = None  # this batch holds a whole sample out
        sample = cal.held_out(labels, cal.CALIBRATION_SAMPLE, seed=live)
        rest = np.setdiff1d(labels, sample)
        if rest.size:
            index.add_items(self._vecs[rest], rest)
            self._in_graph[rest] = True
        in_graph = np.flatnonzero(self._in_graph)
        if in_graph.size >= cal.CALIBRATION_K:
            assert self._target is not None
            queries = np.ascontiguousarray(self._vecs[sample])
            truth = cal.exact_top_k(self._vecs, in_graph, queries, cal.CALIBRATION_K)
            ef, recall = cal.calibrate_ef(
                index,
                queries,
                truth,
                floor=cal.CALIBRATION_K,
                ceiling=self._ef,
                target=self._target,
                hint=self.calibration[0] if self.calibration else None,
            )
            index.set_ef(self._ef)
            self._ef_plain, self._calibrated_n = ef, live
            self.calibration = (ef, recall)
        index.add_items(self._vecs[sample], sample)
        self._in_graph[sample] = True

    def _probe_small_batch(self, index: hnswlib.Index, labels: npt.NDArray[np.intp]) -> None:
        """Insert a small batch while a calibration is due: probed first, as fresh queries."""
        assert self._target is not None
        probe = self._probe
        if probe is None:
            hint = self.calibration[0] if self.calibration else None
            probe = self._probe = cal.FreshProbe(cal.ladder(cal.CALIBRATION_K, self._ef, hint))
        need = cal.CALIBRATION_SAMPLE - len(probe)
        if need > 0 and self._graph_live - labels.size > tune.EXACT_THRESHOLD:
            # Labels are appended: the graph holds the live labels below the batch's
            # first (less the twins; a promoted twin below it is missed: conservative).
            probe.probe(index, self._vecs[labels[:need]], int(labels.min()))
        index.add_items(self._vecs[labels], labels)
        self._in_graph[labels] = True
        index.set_ef(self._ef)
        live = self._graph_live
        if len(probe) >= cal.CALIBRATION_SAMPLE:
            ef, recall = probe.finish(self._vecs, self._in_graph, self._target)
            self._ef_plain, self._calibrated_n, self._probe = ef, live, None
            self.calibration = (ef, recall)
        elif live >= 2 * self._calibrated_n:
            self._ef_plain = self._ef  # grown well past its measure: the safe beam again
