"""A loadable snapshot of the lexical index: its arrays and vocabulary in one ``.npz`` file.

Re-tokenising every item is most of a restore's lexical cost, and rebuilding
the vocabulary-side indexes most of the rest. A snapshot keeps everything
derived: the ids, each document's words (the space-padded text the Lexicon
keeps per slot) and title-word count, the content and title postings as CSR
arrays (the vocabulary, offsets into one int32 slot array), and the
vocabulary's gram, deletion and stem tables (:mod:`memstore._vocabindex`:
keys, offsets and word numbers). Loading decodes the strings, builds the
dictionaries that name words and ids, and takes every array as it is: the
postings are sliced per word on first use, nothing is re-derived.

A snapshot is taken at a *generation* the caller names (say, the journal
sequence number it reflects) and carries a SHA-256 checksum over every array,
and the version of the tokenisation rules its words were made by
(:data:`memstore.text.TOKENS_VERSION`): :func:`load_lexicon` refuses a file
whose checksum, format, tokenisation or generation is not what it expects,
with :class:`LexiconSnapshotError`, and changes nothing (a store then
re-tokenises its items, so a release that splits words differently never
reads an older release's words).

>>> import tempfile, pathlib
>>> from memstore.lexical import Lexicon
>>> lex = Lexicon()
>>> lex.index("a", "Payment API", "timeouts after 30s")
>>> path = pathlib.Path(tempfile.mkdtemp()) / "lex.npz"
>>> save_lexicon(lex, path, generation=7)
>>> sorted(load_lexicon(path, expect_generation=7).candidates("paymnet"))
['a']
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import math
import os
import tokenize
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from memstore._durable import move_into_place
from memstore._postings import Postings
from memstore._vocabindex import Segment, Table, VocabIndex
from memstore.errors import MemstoreError
from memstore.lexical import Lexicon
from memstore.text import TOKENS_VERSION

__all__ = ["FORMAT", "LexiconSnapshotError", "load_lexicon", "read_lexicon", "save_lexicon"]

FORMAT = 2
"""Version of the file layout; a loader refuses any other (1: no vocabulary tables)."""

_SEP = "\0"
_ARRAYS = (
    "ids",
    "doc_text",
    "doc_ntitle",
    "words",
    "offsets",
    "slots",
    "title_words",
    "title_offsets",
    "title_slots",
    *(f"{t}_{part}" for t in ("grams", "dels", "stems") for part in ("keys", "offsets", "vals")),
)
_TABLES = ("grams", "dels", "stems")


class LexiconSnapshotError(MemstoreError, ValueError):
    """A lexical snapshot cannot be written or loaded (corrupt, stale, wrong format)."""


def _pack(strings: list[str]) -> npt.NDArray[np.uint8]:
    return np.frombuffer(_SEP.join(strings).encode("utf-8"), np.uint8)


def _unpack(data: npt.NDArray[np.uint8], n: int) -> list[str]:
    if n == 0:
        return []
    out = str(np.ascontiguousarray(data).data, "utf-8").split(_SEP)  # decoded in place
    if len(out) != n:
        raise LexiconSnapshotError(f"snapshot holds {len(out)} strings where {n} are expected")
    return out


def _csr(postings: Postings) -> tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    words: list[str] = []
    arrays: list[npt.NDArray[np.int32]] = []
    for w, a in postings.items():
        if a.size:
            words.append(w)
            arrays.append(a)
    offsets = np.zeros(len(arrays) + 1, np.int64)
    np.cumsum([a.size for a in arrays], out=offsets[1:])
    slots = np.concatenate(arrays) if arrays else np.zeros(0, np.int32)
    return words, offsets, slots.astype(np.int32, copy=False)


def _checksum(arrays: dict[str, npt.NDArray[Any]], extras: Sequence[str] = ()) -> str:
    """SHA-256 over every array's name, type, size and bytes (hashed in place, not copied)."""
    h = hashlib.sha256()
    for name in (*_ARRAYS, *extras):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{a.dtype.str}:{a.size}:".encode())
        h.update(a.reshape(-1).view(np.uint8).data)
    return h.hexdigest()


def save_lexicon(
    lex: Lexicon,
    path: str | os.PathLike[str],
    *,
    generation: int,
    extras: Callable[[], dict[str, npt.NDArray[Any]]] | None = None,
) -> None:
    """Write ``lex`` to ``path`` (an ``.npz`` file, replaced atomically) at ``generation``.

    Compacts ``lex`` first when it holds dead slots (its renumber hooks run),
    so the snapshot's slots are dense and an index loaded from it keeps them.
    ``extras`` (called after that, under the lexicon's lock) gives more
    arrays to save and checksum with the rest: a caller's per-slot columns
    (names starting ``x_``), handed back by :func:`read_lexicon`.
    """
    with lex._lock:
        if lex._dead:
            lex.compact()
        ids = [i for i in lex._ids if i is not None]
        for s in (*ids, *lex._doc_text):
            if _SEP in s:
                raise LexiconSnapshotError("an id or a document holds a NUL character")
        words, offsets, slots = _csr(lex._postings)
        twords, toffsets, tslots = _csr(lex._title_postings)
        try:  # the vocabulary tables numbered as the content postings' words
            segment = lex._vocab.export(words)
        except ValueError as e:
            raise LexiconSnapshotError(f"the vocabulary is not the postings' words: {e}") from e
        arrays: dict[str, npt.NDArray[Any]] = {
            "ids": _pack(ids),
            "doc_text": _pack(lex._doc_text),
            "doc_ntitle": np.array(lex._doc_ntitle, np.int32),
            "words": _pack(words),
            "offsets": offsets,
            "slots": slots,
            "title_words": _pack(twords),
            "title_offsets": toffsets,
            "title_slots": tslots,
        }
        for t in _TABLES:
            table: Table = getattr(segment, t)
            arrays[f"{t}_keys"] = table.keys
            arrays[f"{t}_offsets"] = table.offsets
            arrays[f"{t}_vals"] = table.vals
        more = extras() if extras is not None else {}
        if any(not k.startswith("x_") for k in more):
            raise ValueError("extra snapshot arrays are named x_...")
        arrays.update(more)
        names = sorted(more)
        meta = {
            "format": FORMAT,
            "tokens": TOKENS_VERSION,
            "generation": generation,
            "docs": len(ids),
            "words": len(words),
            "title_words": len(twords),
            "extras": names,
            "sha256": _checksum(arrays, names),
        }
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)  # type: ignore[arg-type]
        move_into_place(tmp, target)
    except BaseException:
        # A save cut short (a full disk) leaves no partial file taking the space left.
        tmp.unlink(missing_ok=True)
        raise


def _read(
    path: str | os.PathLike[str],
) -> tuple[dict[str, object], dict[str, npt.NDArray[Any]]]:
    try:
        with open(path, "rb") as f:
            members = _npz_members(f)
            meta = json.loads(_member(f, members, "meta", check_crc=True).tobytes().decode())
            extras = meta.get("extras", []) if isinstance(meta, dict) else []
            if not isinstance(extras, list) or not all(isinstance(x, str) for x in extras):
                raise ValueError("the metadata's extras are not a list of names")
            arrays = {name: _member(f, members, name) for name in (*_ARRAYS, *extras)}
    except (
        OSError,
        ValueError,
        KeyError,
        EOFError,
        AttributeError,
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        NotImplementedError,  # a compression method zipfile does not know (a damaged header)
        zlib.error,  # a deflated member whose stream does not decode
        lzma.LZMAError,
        tokenize.TokenError,  # numpy's reading of an array header that is damaged
        SyntaxError,
    ) as e:
        raise LexiconSnapshotError(f"unreadable lexical snapshot {os.fspath(path)!r}: {e}") from e
    if not isinstance(meta, dict):
        raise LexiconSnapshotError("snapshot metadata is not an object")
    return meta, arrays


def _npz_members(f: io.BufferedReader) -> dict[str, zipfile.ZipInfo]:
    """The members of the ``.npz`` (a zip archive) open as ``f``, by array name."""
    with zipfile.ZipFile(f) as z:  # reads the central directory alone
        return {i.filename.removesuffix(".npy"): i for i in z.infolist()}


def _member(
    f: io.BufferedReader, members: dict[str, zipfile.ZipInfo], name: str, *, check_crc: bool = False
) -> npt.NDArray[Any]:
    """The array ``name`` of the ``.npz`` open as ``f``, read straight into a new array.

    :func:`numpy.load` reads a member through :mod:`zipfile` in 256 KiB
    pieces, each checked against the zip's CRC-32 in Python and copied into
    the array: for a 50 MB snapshot, about as long as hashing it. A stored
    (uncompressed) member, which is what :func:`numpy.savez` writes, is
    instead located by its local header and read with one ``readinto`` into
    the array's own memory. Its bytes are checked by the snapshot's SHA-256
    (:func:`_checksum`), so the CRC is verified only where the caller asks
    (the metadata, which the checksum does not cover). A compressed member
    (a file written otherwise) goes through :func:`numpy.load` as before.
    Object arrays are refused, as ``allow_pickle=False`` does.
    """
    info = members[name]  # KeyError: a missing array
    if info.compress_type != zipfile.ZIP_STORED:
        with zipfile.ZipFile(f) as z, z.open(info) as m:
            # The header's claim is checked against what the member holds
            # before numpy allocates for it (a damaged shape: terabytes).
            shape, dtype = _header(m)
            _check_size(name, shape, dtype, info.file_size - m.tell())
        with zipfile.ZipFile(f) as z, z.open(info) as m:
            a: npt.NDArray[Any] = np.lib.format.read_array(m, allow_pickle=False)
            return a
    f.seek(info.header_offset)
    local = f.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise ValueError(f"member {name} has no local header")
    start = info.header_offset + 30 + int.from_bytes(local[26:28], "little")
    start += int.from_bytes(local[28:30], "little")
    f.seek(start)
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    _check_size(name, shape, dtype, start + info.file_size - f.tell())
    out = np.empty(shape, dtype, order="F" if fortran else "C")
    body = out.reshape(-1, order="A").view(np.uint8).data
    got = f.readinto(body) if body.nbytes else 0
    if got != body.nbytes:
        raise EOFError(f"member {name} is truncated")
    if check_crc:
        f.seek(start)
        if zlib.crc32(f.read(info.file_size)) != info.CRC:
            raise ValueError(f"member {name} fails its CRC-32")
    return out


def _header(m: IO[bytes]) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and type an ``.npy`` stream's header names (the stream left at the data)."""
    if np.lib.format.read_magic(m) == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(m)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(m)
    return shape, dtype


def _check_size(name: str, shape: tuple[int, ...], dtype: np.dtype[Any], held: int) -> None:
    """Refuse a member whose header's shape and type do not fill exactly the ``held`` bytes.

    Checked before the array is allocated: a damaged shape must be a refused
    file, not an attempt to allocate terabytes (a ``MemoryError`` out of a restore).
    """
    if dtype.hasobject:
        raise ValueError(f"member {name} holds Python objects")
    if math.prod(shape) * dtype.itemsize != held:
        raise ValueError(f"member {name}: its header does not match its size")


def _count(meta: dict[str, object], key: str) -> int:
    v = meta.get(key)
    if not isinstance(v, int) or v < 0:
        raise LexiconSnapshotError(f"snapshot metadata lacks a count of {key}")
    return v


def _postings_from(
    words: list[str], offsets: npt.NDArray[np.int64], slots: npt.NDArray[np.int32], n_docs: int
) -> Postings:
    if offsets.size != len(words) + 1 or offsets[0] != 0 or offsets[-1] != slots.size:
        raise LexiconSnapshotError("snapshot postings offsets are inconsistent")
    if np.any(np.diff(offsets) <= 0) or (slots.size and (slots.min() < 0 or slots.max() >= n_docs)):
        raise LexiconSnapshotError("snapshot postings hold an empty word or a slot out of range")
    p = Postings.from_csr(words, offsets, slots.astype(np.int32, copy=False))
    if len(p._wid) != len(words):
        raise LexiconSnapshotError("snapshot postings name a word twice")
    return p


def _table_from(arrays: dict[str, npt.NDArray[Any]], name: str, n_words: int) -> Table:
    keys, offsets, vals = (arrays[f"{name}_{part}"] for part in ("keys", "offsets", "vals"))
    if keys.dtype != np.uint64 or offsets.dtype != np.int64 or vals.dtype != np.int32:
        raise LexiconSnapshotError(f"snapshot {name} table has the wrong types")
    if offsets.size != keys.size + 1 or offsets[0] != 0 or offsets[-1] != vals.size:
        raise LexiconSnapshotError(f"snapshot {name} table offsets are inconsistent")
    if keys.size and (np.any(keys[1:] <= keys[:-1]) or np.any(np.diff(offsets) <= 0)):
        raise LexiconSnapshotError(f"snapshot {name} table keys are not sorted and distinct")
    if vals.size and (vals.min() < 0 or vals.max() >= n_words):
        raise LexiconSnapshotError(f"snapshot {name} table names a word out of range")
    return Table(keys, offsets, vals)


def load_lexicon(
    path: str | os.PathLike[str],
    *,
    expect_generation: int | None = None,
    compact_min: int = 4096,
) -> Lexicon:
    """The Lexicon saved at ``path``; ``expect_generation`` (if given) must match.

    Raises :class:`LexiconSnapshotError` for a missing, truncated or corrupt
    file, another format or tokenisation, a checksum or generation mismatch.
    """
    return read_lexicon(path, expect_generation=expect_generation, compact_min=compact_min)[0]


def read_lexicon(
    path: str | os.PathLike[str],
    *,
    expect_generation: int | None = None,
    compact_min: int = 4096,
) -> tuple[Lexicon, dict[str, npt.NDArray[Any]]]:
    """:func:`load_lexicon`, with the extra arrays :func:`save_lexicon` was given (checked)."""
    meta, arrays = _read(path)
    extras = sorted(k for k in arrays if k.startswith("x_"))
    if meta.get("format") != FORMAT:
        raise LexiconSnapshotError(f"snapshot format {meta.get('format')!r}, expected {FORMAT}")
    if meta.get("tokens") != TOKENS_VERSION:
        raise LexiconSnapshotError(
            f"snapshot words were made by tokenisation {meta.get('tokens')!r},"
            f" expected {TOKENS_VERSION}"
        )
    if expect_generation is not None and meta.get("generation") != expect_generation:
        raise LexiconSnapshotError(
            f"snapshot is at generation {meta.get('generation')!r}, expected {expect_generation}"
        )
    if meta.get("sha256") != _checksum(arrays, extras):
        raise LexiconSnapshotError("snapshot checksum mismatch: the file is corrupt")
    n = _count(meta, "docs")
    ids = _unpack(arrays["ids"], n)
    doc_text = _unpack(arrays["doc_text"], n)
    ntitle = arrays["doc_ntitle"]
    slot_of = dict(zip(ids, range(n), strict=True))
    if ntitle.size != n or len(slot_of) != n:
        raise LexiconSnapshotError("snapshot documents are inconsistent")
    words = _unpack(arrays["words"], _count(meta, "words"))
    twords = _unpack(arrays["title_words"], _count(meta, "title_words"))
    post = _postings_from(words, arrays["offsets"], arrays["slots"], n)
    tpost = _postings_from(twords, arrays["title_offsets"], arrays["title_slots"], n)
    lex = Lexicon(compact_min=compact_min)
    lex._ids = ids  # type: ignore[assignment]  # list[str] is a list[str | None] here
    lex._slot_of = slot_of
    lex._doc_text = doc_text
    lex._doc_ntitle = ntitle.astype(int).tolist()
    alive = np.zeros(max(64, 2 * n), np.bool_)
    alive[:n] = True
    lex._alive = alive
    lex._postings = post
    lex._title_postings = tpost
    df: Counter[str] = Counter()
    dict.update(df, zip(words, np.diff(arrays["offsets"]).tolist(), strict=True))
    lex._df = df
    # The vocabulary tables number the words as the content postings do:
    # one list of word objects (and their cached hashes) serves both.
    grams, dels, stems = (_table_from(arrays, t, len(words)) for t in _TABLES)
    segment = Segment(grams, dels, stems, len(words))
    lex._vocab = VocabIndex.restore(list(words), dict(post._wid), segment)
    lex._gen += 1
    return lex, {k: arrays[k] for k in extras}
