"""A lexical snapshot loads back into an index that answers exactly as the original.

And a file that is corrupt, truncated, of another generation or for other
items is refused with LexiconSnapshotError.
"""

from __future__ import annotations

import datetime as _dt
import json
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore._lexindex import LexicalIndex
from memstore._lexsnapshot import LexiconSnapshotError, load_lexicon, save_lexicon
from memstore.errors import MemstoreError
from memstore.item import Item
from memstore.lexical import Lexicon
from memstore.text import kw_tokens, normalize_query

T0 = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)
KINDS = ["fact", "event"]

word = st.text(alphabet="abde1", min_size=1, max_size=5)
text = st.lists(word, max_size=5).map(" ".join)


def _items(draw_texts: list[tuple[str, str]]) -> list[Item]:
    return [
        Item(
            id=f"d{i}",
            kind=KINDS[i % 2],
            title=t,
            content=c,
            subject="s" if i % 3 else "",
            updated_at=T0 + _dt.timedelta(minutes=i % 4),
            stale_after=T0 + _dt.timedelta(days=1) if i % 4 == 1 else None,
            tags=[f"tenant/t{i % 2}", *(["shared"] if i % 5 == 0 else ["service/api"])],
        )
        for i, (t, c) in enumerate(draw_texts)
    ]


def _ranking(
    index: LexicalIndex,
    query: str,
    kind: str = "",
    partition: str | None = None,
    subject: str = "",
) -> list[tuple[str, float, int, bool]]:
    plan = index.plan(kw_tokens(normalize_query(query)))
    now = (T0 + _dt.timedelta(days=2)).timestamp()  # past the deadlines some items carry
    hits = index.rank(
        plan,
        kind=kind,
        subject=subject,
        hidden_kinds=(),
        now_ts=now,
        limit=None,
        partition=partition,
    )
    return [(h.id, h.score, h.covered, h.fuzzy) for h in hits]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(text, text), min_size=1, max_size=15),
    st.lists(st.integers(0, 14), max_size=6),
    st.lists(word, min_size=1, max_size=4),
)
def test_round_trip_answers_as_the_original(
    docs: list[tuple[str, str]], removed: list[int], queries: list[str]
) -> None:
    tmp = Path(tempfile.mkdtemp())
    items = _items(docs)
    index = LexicalIndex(compact_min=10_000)  # dead slots stay until the save compacts
    current: dict[str, Item] = {}
    for it in items:
        index.put(it, False)
        current[it.id] = it
    for i in removed:
        index.remove(f"d{i}")
        current.pop(f"d{i}", None)
        again = items[(i * 7) % len(items)].clone(content="reworded aa")
        index.put(again, False)
        current[again.id] = again
    live = [(it, False) for it in current.values()]
    index.save_snapshot(tmp / "lex.npz", generation=3)
    loaded = LexicalIndex.from_snapshot(tmp / "lex.npz", live, expect_generation=3)
    loaded.lexicon._check()
    # The filter columns came from the file, not from the items: they agree.
    loaded._check({it.id: it for it, _ in live}, {it.id: False for it, _ in live})
    assert loaded.lexicon.capacity == len(loaded)  # dense slots
    for q in [*queries, " ".join(queries)]:
        for kind in ("", "event"):
            assert _ranking(loaded, q, kind) == _ranking(index, q, kind)
        for part in ("t0", "t1"):
            want = _ranking(index, q, partition=part, subject="s")
            assert _ranking(loaded, q, partition=part, subject="s") == want
    # The loaded index keeps working: writes after the load.
    loaded.put(Item(id="new", kind="fact", content="aa bb"), False)
    loaded.remove(live[0][0].id)
    loaded.lexicon._check()


def _saved(tmp_path: Path) -> Path:
    lex = Lexicon()
    lex.index("a", "Payment API", "timeouts after 30s under load")
    lex.index("b", "Auth service", "tokens expire after one hour")
    path = tmp_path / "lex.npz"
    save_lexicon(lex, path, generation=5)
    return path


def test_generation_and_format_are_checked(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    assert load_lexicon(path, expect_generation=5).candidates("after") == {"a", "b"}
    with pytest.raises(LexiconSnapshotError, match="generation 5, expected 6"):
        load_lexicon(path, expect_generation=6)
    with zipfile.ZipFile(path) as z:
        assert "meta.npy" in z.namelist()
    with np.load(path) as z:
        meta_bytes = z["meta"]
        arrays = {k: z[k] for k in z.files if k != "meta"}
    meta = json.loads(meta_bytes.tobytes())
    meta["format"] = 99
    other = tmp_path / "other.npz"
    np.savez(other, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)
    with pytest.raises(LexiconSnapshotError, match="format 99"):
        load_lexicon(other)
    # A well-formed file whose arrays no longer match the recorded checksum.
    arrays["doc_ntitle"] = arrays["doc_ntitle"] + 1
    tampered = tmp_path / "tampered.npz"
    np.savez(tampered, meta=meta_bytes, **arrays)
    with pytest.raises(LexiconSnapshotError, match="checksum mismatch"):
        load_lexicon(tampered)


def test_corrupt_and_truncated_files_are_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    # Flip a byte inside the postings' slot array (stored uncompressed).
    with np.load(path) as z:
        needle = z["doc_text"].tobytes()[:12]
    at = bytes(data).find(needle)
    assert at > 0
    data[at + 2] ^= 0x01
    bad = tmp_path / "bad.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(LexiconSnapshotError, match=r"checksum|unreadable"):
        load_lexicon(bad)
    short = tmp_path / "short.npz"
    short.write_bytes(path.read_bytes()[:100])
    with pytest.raises(LexiconSnapshotError, match="unreadable"):
        load_lexicon(short)
    with pytest.raises(LexiconSnapshotError, match="unreadable"):
        load_lexicon(tmp_path / "missing.npz")
    assert issubclass(LexiconSnapshotError, MemstoreError)


def test_items_must_be_the_snapshot_documents(tmp_path: Path) -> None:
    index = LexicalIndex()
    items = _items([("alpha", "beta"), ("gamma", "delta")])
    for it in items:
        index.put(it, False)
    index.save_snapshot(tmp_path / "lex.npz", generation=1)
    with pytest.raises(LexiconSnapshotError, match="not the items"):
        LexicalIndex.from_snapshot(tmp_path / "lex.npz", [(items[0], False)])
    other = Item(id="zz", kind="fact", content="beta")
    with pytest.raises(LexiconSnapshotError, match="not the items"):
        LexicalIndex.from_snapshot(tmp_path / "lex.npz", [(items[0], False), (other, False)])


def test_nul_in_an_id_cannot_be_saved(tmp_path: Path) -> None:
    lex = Lexicon()
    lex.index("a\0b", "", "word")
    with pytest.raises(LexiconSnapshotError, match="NUL"):
        save_lexicon(lex, tmp_path / "x.npz", generation=0)
    assert not (tmp_path / "x.npz").exists()


def test_flush_empties_the_postings_log() -> None:
    lex = Lexicon()
    lex.index("a", "Title words", "content words")
    assert lex._postings.pending and lex._title_postings.pending
    lex.flush()
    assert not lex._postings.pending and not lex._title_postings.pending
    assert lex.candidates("title") == {"a"}


def _resaved(path: Path, tmp_path: Path, **change: np.ndarray) -> Path:
    """``path`` with some arrays replaced and the checksum recomputed (well-formed, wrong)."""
    from memstore._lexsnapshot import _checksum

    with np.load(path) as z:
        meta = json.loads(z["meta"].tobytes())
        arrays = {k: z[k] for k in z.files if k != "meta"}
    arrays.update(change)
    meta["sha256"] = _checksum(arrays, meta.get("extras", []))
    out = tmp_path / "resaved.npz"
    np.savez(out, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)
    return out


def test_vocabulary_tables_are_loaded_and_checked(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    with np.load(path) as z:
        assert z["grams_keys"].dtype == np.uint64 and z["grams_vals"].size > 0
        vals, keys = z["grams_vals"], z["dels_keys"]
    lex = load_lexicon(path)
    assert len(lex._vocab._segments) == 1 and not lex._vocab._pending  # loaded, not rebuilt
    lex._check()
    bad = _resaved(path, tmp_path, grams_vals=vals + 1000)
    with pytest.raises(LexiconSnapshotError, match="grams table names a word out of range"):
        load_lexicon(bad)
    bad = _resaved(path, tmp_path, dels_keys=keys[::-1].copy())
    with pytest.raises(LexiconSnapshotError, match="dels table keys are not sorted"):
        load_lexicon(bad)
    with np.load(path) as z:
        words = z["words"].tobytes().split(b"\0")
    twice = b"\0".join([words[0], *words[:-1]])  # the first word twice, the last gone
    bad = _resaved(path, tmp_path, words=np.frombuffer(twice, np.uint8))
    with pytest.raises(LexiconSnapshotError, match="a word twice"):
        load_lexicon(bad)


def test_filter_columns_are_checked(tmp_path: Path) -> None:
    index = LexicalIndex()
    items = _items([("alpha", "beta"), ("gamma", "delta")])
    for it in items:
        index.put(it, False)
    index.save_snapshot(tmp_path / "lex.npz", generation=1)
    pairs = [(it, False) for it in items]
    with np.load(tmp_path / "lex.npz") as z:
        kinds = z["x_kind"]
    bad = _resaved(tmp_path / "lex.npz", tmp_path, x_kind=kinds + 99)
    with pytest.raises(LexiconSnapshotError, match="_kind holds an unknown code"):
        LexicalIndex.from_snapshot(bad, pairs)
    bad = _resaved(tmp_path / "lex.npz", tmp_path, x_stale=np.zeros(5))
    with pytest.raises(LexiconSnapshotError, match="_stale has the wrong type or size"):
        LexicalIndex.from_snapshot(bad, pairs)
    good = LexicalIndex.from_snapshot(tmp_path / "lex.npz", pairs)
    good._check({it.id: it for it in items}, {it.id: False for it in items})


def test_compressed_members_load_as_stored_ones(tmp_path: Path) -> None:
    """The direct reader takes stored members; a compressed file still loads, the same."""
    path = _saved(tmp_path)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    packed = tmp_path / "packed.npz"
    np.savez_compressed(packed, **arrays)
    with zipfile.ZipFile(packed) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}
    for p in (path, packed):
        lex = load_lexicon(p, expect_generation=5)
        assert lex.candidates("after") == {"a", "b"}
        assert lex.candidates("paymnet") == {"a"}


def test_damaged_metadata_and_object_arrays_are_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    at = bytes(data).find(b'"generation": 5')
    assert at > 0
    data[at + len('"generation": ')] = ord("7")  # well-formed JSON, wrong: only the CRC sees it
    bad = tmp_path / "meta.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(LexiconSnapshotError, match="CRC-32"):
        load_lexicon(bad, expect_generation=7)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["doc_ntitle"] = np.array([1, "x"], dtype=object)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, **arrays)
    with pytest.raises(LexiconSnapshotError, match="Python objects"):
        load_lexicon(pickled)
    # A member whose array header claims more than the member holds.
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        start = z.getinfo("doc_ntitle.npy").header_offset
    at = bytes(data).find(b"'shape': (2,)", start)
    assert at > 0
    data[at + len("'shape': (")] = ord("3")
    lied = tmp_path / "lied.npz"
    lied.write_bytes(bytes(data))
    with pytest.raises(LexiconSnapshotError, match="does not match its size"):
        load_lexicon(lied)


_SAVE_UNDER_A_SIZE_LIMIT = """
import resource, signal, sys
from memstore._lexsnapshot import save_lexicon
from memstore.lexical import Lexicon

lex = Lexicon()
for i in range(3000):
    lex.index(f"d{i}", f"payment api {i}", f"timeouts after {i} seconds on the orders table")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))  # as a disk that fills
try:
    save_lexicon(lex, sys.argv[1], generation=1)
except OSError as e:
    print("refused:", e.strerror)
"""


def test_a_save_that_fails_half_way_leaves_no_partial_file(tmp_path: Path) -> None:
    # A save that failed half-way (a full disk) left its partial temporary file
    # beside the journal, holding the space the disk had left.
    import subprocess
    import sys

    target = tmp_path / "journal.db.lexicon.npz"
    run = subprocess.run(
        [sys.executable, "-c", _SAVE_UNDER_A_SIZE_LIMIT, str(target)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.startswith("refused: File too large"), run.stdout + run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_member_header_claiming_a_huge_array_is_refused_before_any_allocation(
    tmp_path: Path, compression: int
) -> None:
    # A damaged header (a shape of 10**14 where a few hundred stood) made the
    # load allocate for it first: a bare MemoryError out of attach, and a
    # journal that no longer opened, for a cache meant to be ignored when damaged.
    import re

    with zipfile.ZipFile(_saved(tmp_path)) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    body = members["doc_text.npy"]
    found = re.search(rb"'shape': \((\d+),\), \}( +)\n", body)
    assert found is not None
    huge = b"'shape': (99999999999999,), }"
    patched = huge + b" " * (len(found[0]) - len(huge) - 1) + b"\n"
    members["doc_text.npy"] = body[: found.start()] + patched + body[found.end() :]
    bad = tmp_path / "bad.npz"
    with zipfile.ZipFile(bad, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    with pytest.raises(LexiconSnapshotError, match="unreadable"):
        load_lexicon(bad)


def _deflated(path: Path, out: Path) -> bytes:
    """``path``'s archive written again with every member deflated; its bytes."""
    with zipfile.ZipFile(path) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.read_bytes()


@pytest.mark.parametrize("damage", ["unknown compression method", "damaged deflate stream"])
def test_a_damaged_zip_structure_is_refused_not_raised(tmp_path: Path, damage: str) -> None:
    # Damage the zip layer reports with exceptions of its own
    # (NotImplementedError for a compression method it does not know,
    # zlib.error for a deflate stream that does not decode) escaped the load:
    # attach failed, and the journal beside the cache no longer opened.
    import struct

    path = _saved(tmp_path)
    if damage == "unknown compression method":
        data = bytearray(path.read_bytes())
        entry = data.find(b"PK\x01\x02")  # the first member's central directory entry
        data[entry + 10 : entry + 12] = struct.pack("<H", 99)
    else:
        data = bytearray(_deflated(path, tmp_path / "deflated.npz"))
        with zipfile.ZipFile(tmp_path / "deflated.npz") as z:
            info = z.getinfo("doc_text.npy")
        name_len, extra_len = struct.unpack(
            "<HH", data[info.header_offset + 26 : info.header_offset + 30]
        )
        start = info.header_offset + 30 + name_len + extra_len
        data[start : start + 4] = b"\xff\xff\xff\xff"  # the stream's first bytes
    bad = tmp_path / "bad.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(LexiconSnapshotError, match="unreadable"):
        load_lexicon(bad)


def test_an_array_header_cut_short_is_refused_not_raised(tmp_path: Path) -> None:
    # numpy reads a header whose dict does not close with the tokenizer of an
    # older format, whose TokenError escaped the load (and so the attach).
    import warnings

    path = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    at = data.find(b"'shape': (")
    end = data.find(b"}", at)
    data[end : end + 1] = b" "  # the header's dict never closes
    bad = tmp_path / "bad.npz"
    bad.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy says it tried the older format
        with pytest.raises(LexiconSnapshotError, match="unreadable"):
            load_lexicon(bad)


def test_a_search_after_a_save_finds_the_same_items(tmp_path: Path) -> None:
    """Saving compacts the lexicon (its slots move) without a write: a query searched
    just before it, whose plan the store keeps, still finds its own items after it."""
    from memstore import Store

    store = Store()
    for i in range(4):
        store.upsert(Item(id=f"x{i}", kind="note", content=f"filler {i}"))
    store.upsert(Item(id="a", kind="note", content="ledger pool"))
    store.upsert(Item(id="z", kind="note", content="kitten bowl"))
    store.keyword_search("filler")
    store.delete("x0")
    store.delete("x1")  # two dead slots before the others: a compaction moves them all
    before = [it.id for it in store.keyword_search("filler")]
    kitten = [it.id for it in store.keyword_search("kitten")]
    store.save_lexicon(tmp_path / "lex.npz", generation=1)
    assert [it.id for it in store.keyword_search("filler")] == before == ["x3", "x2"]
    assert [it.id for it in store.keyword_search("kitten")] == kitten == ["z"]
