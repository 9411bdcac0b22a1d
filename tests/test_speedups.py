"""The optional compiled write loop (``memstore._speedups``) against the pure one, its oracle.

:func:`memstore._wordbatch.count_docs` counts a batch's words into the
vocabulary and numbers them into the postings logs, in Python or in C. The
same writes (puts, updates that move a document to a new slot, removes,
compactions; text in several scripts, repeated words, empty titles) go
through a lexical index on each path, and the two must hold the same index
(documents, slots, vocabulary, postings, vocabulary tables) and answer every
query with the same hits and scores. The numbering order of words new to a
batch is the one thing allowed to differ (set order against first
occurrence), so postings are compared word by word.

``MEMSTORE_REQUIRE_SPEEDUPS=1`` (set by ``.ci/run``) turns "the extension is
not built" from a skip into a failure, so CI proves it builds; without the
extension the differential tests skip and the pure loop serves alone.
"""

from __future__ import annotations

import datetime as _dt
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Item, Store, _wordbatch
from memstore._lexindex import LexicalIndex
from memstore._postings import Postings
from memstore.text import kw_tokens, normalize_query

T = TypeVar("T")
T0 = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)

try:
    from memstore import _speedups as COMPILED
except ImportError:  # not built: the differential tests skip
    COMPILED = None

needs_speedups = pytest.mark.skipif(COMPILED is None, reason="memstore._speedups is not built")


@pytest.fixture(autouse=True)
def _compiled_outside_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled loop where it is built, even under ``MEMSTORE_PURE_PYTHON=1``."""
    if COMPILED is not None:
        monkeypatch.setattr(_wordbatch, "speedups", COMPILED)


def test_the_extension_is_built_when_required() -> None:
    """With ``MEMSTORE_REQUIRE_SPEEDUPS=1`` the compiled module imports and is in use."""
    if os.environ.get("MEMSTORE_REQUIRE_SPEEDUPS", "") in ("", "0"):
        pytest.skip("MEMSTORE_REQUIRE_SPEEDUPS is not set")
    import memstore._speedups as compiled

    assert callable(compiled.count_docs)
    assert _wordbatch.compiled(), "built, but switched off (MEMSTORE_PURE_PYTHON?)"


@needs_speedups
def test_the_extension_exports_only_its_init() -> None:
    """The module's C files share functions, and no other library sees them.

    A shared object's visible names can be bound to a like-named symbol of a library
    loaded before it; hidden ones cannot. Only the module's init is looked up by name.
    """
    import ctypes

    assert COMPILED is not None and COMPILED.__file__ is not None
    lib = ctypes.CDLL(COMPILED.__file__)
    assert hasattr(lib, "PyInit__speedups")
    for name in ("memstore_count_docs", "memstore_edits", "memstore_lean_top", "ms_hold_1d"):
        assert not hasattr(lib, name), name
    # ...and every function of the table is still there, each with its documented signature.
    for name in ("count_docs", "index_texts", "split_ascii", "lex_rank", "holding", "edits"):
        assert callable(getattr(COMPILED, name)) and f"{name}(" in getattr(COMPILED, name).__doc__


def test_pure_python_switches_the_loop_and_back() -> None:
    """:func:`pure_python` sets the pure loop inside the ``with`` and puts back what was."""
    before = _wordbatch.speedups
    with _wordbatch.pure_python():
        assert not _wordbatch.compiled()
    assert _wordbatch.speedups is before


# Words that share grams, stems and one-edit neighbours, in several scripts,
# with digits and emoji; CamelCase and punctuation for the splitter.
WORDS = [
    "payment", "payments", "paying", "api", "API", "timeout", "Timeouts",
    "café", "Cafe", "naïve", "straße", "STRASSE", "привет", "мир", "東京都",
    "機械学習", "서울에서", "🚀", "v1.2.3", "9:30", "٣٤", "HTTPServer", "fooBar",
    "a", "ab", "abd", "bade", "bading", "0.3s", "x",
]  # fmt: skip
text = st.lists(st.sampled_from(WORDS) | st.text(max_size=5), max_size=8).map(" ".join)
IDS = [f"d{i}" for i in range(8)]


@st.composite
def items(draw: st.DrawFn) -> Item:
    return Item(
        id=draw(st.sampled_from(IDS)),
        kind=draw(st.sampled_from(["note", "fact"])),
        title=draw(text),
        content=draw(text),
        updated_at=T0 + _dt.timedelta(hours=draw(st.sampled_from([1, 2, 3]))),
        event_date=draw(st.sampled_from(["", "2023-06-27"])),
    )


ops = st.lists(
    st.tuples(st.sampled_from(["put", "put", "put", "remove", "read"]), items()),
    min_size=1,
    max_size=40,
)


def pure(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` with the pure loop (every queued write it applies goes that way)."""
    with _wordbatch.pure_python():
        return fn(*args, **kwargs)


def index_state(index: LexicalIndex) -> dict[str, Any]:
    """Everything the lexicon holds, in a form independent of word numbering order."""
    lex = index._lexicon
    lex._check()
    return {
        "slots": dict(lex._slot_of),
        "ids": list(lex._ids),
        "text": list(lex._doc_text),
        "ntitle": list(lex._doc_ntitle),
        "df": dict(lex._df),
        "postings": {w: a.tolist() for w, a in lex._postings.items()},
        "title": {w: a.tolist() for w, a in lex._title_postings.items()},
        "vocab": sorted(lex._vocab.live_words()),
        "generation": lex.generation,
    }


def ranking(index: LexicalIndex, query: str) -> list[tuple[str, float, int, bool]]:
    tokens = kw_tokens(normalize_query(query))
    if not tokens:
        return []
    plan = index.plan(tokens)
    hits = index.rank(plan, kind="", subject="", hidden_kinds=(), now_ts=0.0, limit=None)
    return [(h.id, h.score, h.covered, h.fuzzy) for h in hits]


@needs_speedups
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join))
def test_compiled_and_pure_indexes_agree(ops: list[tuple[str, Item]], query: str) -> None:
    """The same writes on both paths: the same index state and the same rankings."""
    fast = LexicalIndex(compact_min=2, overlay_max=3)  # compactions and vocabulary segments
    slow = LexicalIndex(compact_min=2, overlay_max=3)
    for op, item in ops:
        if op == "put":
            fast.put(item, item.kind == "fact")
            pure(slow.put, item, item.kind == "fact")
        elif op == "remove":
            fast.remove(item.id)
            pure(slow.remove, item.id)
        else:  # a read applies what is queued: batches of every size
            assert ranking(fast, query) == pure(ranking, slow, query)
    fast.flush()
    pure(slow.flush)
    assert index_state(fast) == pure(index_state, slow)
    for q in (query, *WORDS[:12]):
        assert ranking(fast, q) == pure(ranking, slow, q)


@needs_speedups
@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(WORDS[:20]), max_size=6), max_size=20),
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(WORDS), max_size=4),
            st.lists(st.sampled_from(WORDS) | st.text(max_size=3), max_size=12),
        ),
        max_size=30,
    ),
    st.integers(0, 600),
)
def test_count_docs_agrees_word_for_word(
    before: list[list[str]], batch: list[tuple[list[str], list[str]]], common: int
) -> None:
    """The kernel alone, on postings holding words already and counts above the small ints."""

    def setup() -> tuple[Counter[str], Postings, Postings]:
        df: Counter[str] = Counter({w: common + 1 for ws in before for w in ws})
        content, title = Postings(), Postings()
        content.add_docs(0, [set(ws) for ws in before])
        title.add_docs(0, [set(ws[:1]) for ws in before])
        return df, content, title

    docs = [(f"d{i}", t, c) for i, (t, c) in enumerate(batch)]
    start = len(before)
    df_f, content_f, title_f = setup()
    new_f = _wordbatch.count_docs(docs, start, df_f, content_f, title_f)
    df_p, content_p, title_p = setup()
    new_p = pure(_wordbatch.count_docs, docs, start, df_p, content_p, title_p)
    assert sorted(new_f) == sorted(new_p) and len(set(new_f)) == len(new_f)
    assert list(df_f)[len(df_f) - len(new_f) :] == new_f  # the last keys, in order
    assert df_f == df_p
    for fast, slow in ((content_f, content_p), (title_f, title_p)):
        assert fast.pending == slow.pending and fast.numbered == slow.numbered
        got = {w: a.tolist() for w, a in fast.items()}
        assert got == {w: a.tolist() for w, a in slow.items()}


@needs_speedups
def test_a_store_searches_the_same_on_both_paths() -> None:
    """A store written on each path: the same hits, in order, with the same scores."""
    fast, slow = Store(), pure(Store)
    for i in range(300):
        words = [WORDS[(i * 7 + k) % len(WORDS)] for k in range(1 + i % 9)]
        it = Item(id=f"n{i}", kind="note", title=" ".join(words[:2]), content=" ".join(words))
        fast.upsert(it)
        pure(slow.upsert, it)
        if i % 11 == 0:
            fast.delete(f"n{i // 2}")
            pure(slow.delete, f"n{i // 2}")
    for q in ("payment api", "café", "привет мир", "東京", "🚀 timeout", "fooBar 9:30"):
        a = fast.keyword_search_scored(q, limit=50)
        b = pure(slow.keyword_search_scored, q, limit=50)
        assert [x.id for x in a[0]] == [x.id for x in b[0]] and a[1] == b[1]
        assert ranking(fast._lex, q) == pure(ranking, slow._lex, q)


@needs_speedups
@pytest.mark.parametrize(
    "args",
    [
        ("not a list",),
        ([("d", ["a"], "not a list")],),
        ([("d", ["a"], [1])],),
        ([["d", ["a"], ["b"]]],),  # a list, not a tuple
        ([("d", ["a"])],),
        ([("d", ["a"], ["b"])], "not a dict"),
        ([("d", ["a"], ["b"])], {}, {}, "not a list"),
    ],
)
def test_wrong_types_raise_type_error_and_change_nothing(args: tuple[Any, ...]) -> None:
    from memstore import _speedups

    full: list[Any] = [[("d", [], [])], Counter(), {}, [], [], {}, [], []]
    full[: len(args)] = args
    df = Counter({"a": 3})
    if isinstance(full[1], dict):
        full[1] = df
    with pytest.raises(TypeError):
        _speedups.count_docs(*full)
    assert df == Counter({"a": 3}) and all(
        x in ({}, []) for x in full[2:] if not isinstance(x, str)
    )


@needs_speedups
def test_a_word_number_that_is_no_int_is_a_type_error() -> None:
    from memstore import _speedups

    with pytest.raises(TypeError, match="word number"):
        _speedups.count_docs([("d", [], ["a"])], {}, {"a": "zero"}, [], [], {}, [], [])
    with pytest.raises(TypeError):
        _speedups.count_docs([("d", [], ["a"])], {}, {"a": -1}, [], [], {}, [], [])


@needs_speedups
def test_an_error_from_numbering_propagates() -> None:
    """A ``__missing__`` that raises: the error comes through, nothing is leaked or crashed."""
    from memstore import _speedups

    class Refuses(dict[str, int]):
        def __missing__(self, key: str) -> int:
            raise KeyError(key)

    with pytest.raises(KeyError):
        _speedups.count_docs([("d", ["a"], ["b"])], {}, Refuses(), [], [], {}, [], [])


@needs_speedups
def test_a_list_grown_while_counted_is_counted_whole() -> None:
    """A ``__missing__`` that appends to the word list being read: no overrun, every word in."""
    from memstore import _speedups

    words = ["w0"]

    class Grows(dict[str, int]):
        def __missing__(self, key: str) -> int:
            n = self[key] = len(self)
            if len(words) < 100:
                words.append(f"w{len(words)}")
            return n

    df: dict[str, int] = {}
    ids: list[int] = []
    counts: list[int] = []
    _speedups.count_docs([("d", [], words)], df, Grows(), ids, counts, {}, [], [])
    assert len(words) == 100 and df == dict.fromkeys(words, 1)
    assert ids == list(range(100)) and counts == [100]


@needs_speedups
@pytest.mark.parametrize("entry", ["count_docs", "index_texts"])
def test_new_words_are_numbered_in_c_as_missing_would(
    entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Postings' numbers: a new word gets the next number, listed with no array yet, and
    the Python ``__missing__`` does not run (the loop numbers it from ``_numbering``)."""
    from memstore import _postings, _speedups

    def refused(self: object, word: str) -> int:
        raise AssertionError(f"__missing__ ran for {word!r}")

    content, title = Postings(), Postings()
    content.add_doc(0, ["old"])  # numbered before the batch: 0
    monkeypatch.setattr(_postings._WordNumbers, "__missing__", refused)
    df: dict[str, int] = {"old": 1}
    if entry == "count_docs":
        docs: list[Any] = [("a", ["api"], ["old", "x", "api"]), ("b", [], ["x", "y"])]
        new = _speedups.count_docs(docs, df, *content.log_lists(), *title.log_lists())
    else:
        docs = [("a", "api", "old x api", ()), ("b", "", "x y", ())]
        new = _speedups.index_texts(
            docs, lambda s: s.split(), df, *content.log_lists(), *title.log_lists()
        )[0]
    assert sorted(new) == ["api", "x", "y"]
    assert content._words == ["old", "api", "x", "y"] and dict(content._wid) == {
        w: i for i, w in enumerate(content._words)
    }
    assert all(a is _postings.EMPTY for a in content._arrays[1:]) and len(content._arrays) == 4
    assert title._words == ["api"] and title._arrays[0] is _postings.EMPTY
    assert content._log_ids == [0, 1, 0, 2, 2, 3] and title._log_ids == [0]
    content.logged(1, 2)
    title.logged(1, 2)
    assert content.get("x").tolist() == [1, 2] and content.get("api").tolist() == [1]
    assert title.get("api").tolist() == [1] and content.get("old").tolist() == [0, 1]


def test_word_batch_numbers_match_postings_arrays() -> None:
    """Either path (whichever is in use): a flushed batch's arrays are the documents' slots."""
    df: Counter[str] = Counter()
    content, title = Postings(), Postings()
    docs = [("a", ["api", "api"], ["api", "x"]), ("b", [], ["x", "y", "x"]), ("c", [], [])]
    new = _wordbatch.count_docs(docs, 5, df, content, title)
    assert sorted(new) == ["api", "x", "y"] and df == Counter({"x": 2, "api": 1, "y": 1})
    assert content.get("x").tolist() == [5, 6] and content.get("api").tolist() == [5]
    assert title.get("api").tolist() == [5] and title.get("x").tolist() == []
    assert np.array_equal(content.get("y"), [6])


@pytest.mark.parametrize("value", ["1", "0", ""])
def test_memstore_pure_python_at_import_selects_the_loop(value: str) -> None:
    """``MEMSTORE_PURE_PYTHON=1`` in a fresh interpreter: the pure loop; unset or 0: the built."""
    env = {k: v for k, v in os.environ.items() if k != "MEMSTORE_PURE_PYTHON"}
    env["MEMSTORE_PURE_PYTHON"] = value
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    out = subprocess.run(
        [sys.executable, "-c", "import memstore._wordbatch as w; print(w.compiled())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == str(value != "1" and COMPILED is not None)


@needs_speedups
def test_reference_counts_and_memory_are_kept_on_success_and_error() -> None:
    """Repeated calls, some failing midway: no word, number or table is leaked or freed early."""
    import gc
    import tracemalloc

    from memstore import _speedups

    words = ["".join(["w", str(i)]) for i in range(40)]  # fresh objects, not interned
    wid = {w: i + 1000 for i, w in enumerate(words)}  # numbers above the small ints
    twid = {w: i + 2000 for i, w in enumerate(words)}
    df = dict.fromkeys(words, 300)

    class Refuses(dict[str, int]):
        def __missing__(self, key: str) -> int:
            raise KeyError(key)

    def refs() -> list[int]:
        held = [*words, *wid.values(), *twid.values(), *set(df.values())]
        return [sys.getrefcount(x) for x in held]

    docs = [("d", words[:5], words * 3), ("e", [], words[10:20])]
    bad = [("d", words[:5], [*words, "unknown"])]
    for _ in range(3):  # warm up (interpreter caches)
        _speedups.count_docs(docs, dict(df), wid, [], [], twid, [], [])
    before = refs()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(2000):
            counts = dict(df)
            ids: list[int] = []
            _speedups.count_docs(docs, counts, wid, ids, [], twid, [], [])
            try:  # no pytest.raises here: its tracebacks are cycles the collector frees late
                _speedups.count_docs(bad, counts, Refuses(wid), [], [], twid, [], [])
                raised = False
            except KeyError:
                raised = True
            assert raised
            del counts, ids
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert refs() == before
    assert grown < 64 * 1024, grown


# ---------------------------------------------------------------- index_texts

ASCII_CHARS = "abqxyzABQXYZ0129.:.: -_'\0\t\n/#"
ascii_text = st.text(alphabet=st.sampled_from(ASCII_CHARS), max_size=30) | st.sampled_from(
    [
        "v1.2.3",
        "9:30",
        "0.3s",
        "HTTPServer",
        "fooBar",
        "q3Plan",
        "3Am",
        "don't",
        "a.b:c",
        "1..2",
        "",
    ]
)


@needs_speedups
@settings(max_examples=400, deadline=None)
@given(
    st.lists(ascii_text, max_size=6).map(" ".join)
    | st.text(alphabet=st.characters(max_codepoint=127))
)
def test_the_compiled_ascii_split_is_words(text: str) -> None:
    """``split_ascii`` splits any ASCII text as :func:`memstore.text.words` does."""
    from memstore import _speedups
    from memstore.text import words

    assert _speedups.split_ascii(text) == words(text)


LONG = "a" * 300 + "B" + "9" * 200
any_text = st.lists(
    st.sampled_from([*WORDS, LONG, "don't", "ǅemal", "🇯🇵", "x" * 70, "1.2.3.4.5"]) | ascii_text,
    max_size=8,
).map(" ".join) | st.text(max_size=12)
part = any_text | st.lists(st.sampled_from(WORDS[:10]).map(str.lower), max_size=5)
extra = st.sampled_from([(), ("june", "2023"), ["d3", "café"], ["🚀"]])


def counted(docs: list[Any], before: list[list[str]], *, want: bool) -> dict[str, Any]:
    """:func:`count_texts` of ``docs`` over postings holding ``before``, in a comparable form."""
    df: Counter[str] = Counter({w: 3 for ws in before for w in ws})
    content, title = Postings(), Postings()
    content.add_docs(0, [set(ws) for ws in before])
    title.add_docs(0, [set(ws[:1]) for ws in before])
    new, texts, ntitles, batch = _wordbatch.count_texts(
        docs, len(before), df, content, title, want_words=want
    )
    assert len(set(new)) == len(new) and set(list(df)[len(df) - len(new) :]) == set(new)
    return {
        "new": sorted(new),
        "texts": texts,
        "ntitles": ntitles,
        "batch": sorted(batch) if want else None,
        "df": dict(df),
        "pending": (content.pending, title.pending, content.numbered, title.numbered),
        "content": {w: a.tolist() for w, a in content.items()},
        "title": {w: a.tolist() for w, a in title.items()},
    }


@needs_speedups
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.lists(st.sampled_from(["api", "payment", "café", "2023", "🚀"]), max_size=4), max_size=5
    ),
    st.lists(st.tuples(part, part, extra), max_size=25),
    st.booleans(),
)
def test_index_texts_agrees_with_the_pure_split_and_count(
    before: list[list[str]], batch: list[tuple[Any, Any, Any]], want: bool
) -> None:
    """Texts (ASCII or not), pre-split words and extra words: the same counts, logs and texts."""
    docs = [(f"d{i}", t, c, e) for i, (t, c, e) in enumerate(batch)]
    fast = counted(docs, before, want=want)
    assert fast == pure(counted, docs, before, want=want)


@needs_speedups
def test_index_texts_builds_the_padded_texts() -> None:
    """Title first, one space around every word, ``""`` for a document with none."""
    from memstore import _speedups

    df: dict[str, int] = {}
    content, title = Postings(), Postings()
    docs = [
        ("a", "Payment-API", "timeout at 9:30, v1.2", ("june", "2023")),
        ("b", "", "", ()),
        ("c", "Café", ["api", "api"], ["x"]),
        ("d", [], "HTTPServer", []),
    ]
    _, texts, ntitles, words = _speedups.index_texts(
        docs, lambda s: [s.lower()], df, *content.log_lists(), *title.log_lists()
    )
    assert texts == [
        " payment api timeout at 9:30 v 1.2 june 2023 ",
        "",
        " café api api x ",
        " http server ",
    ]
    assert ntitles == [2, 0, 1, 0]
    assert df["api"] == 2 and df["payment"] == 1 and sorted(words) == sorted(df)


@needs_speedups
@pytest.mark.parametrize(
    "args",
    [
        ("not a list",),
        ([("d", "a", "b")],),  # three parts, not four
        ([["d", "a", "b", ()]],),  # a list, not a tuple
        ([("d", 1, "b", ())],),
        ([("d", "a", ["b", 2], ())],),
        ([("d", "a", "b", "not words")],),
        ([("d", "a", "b", (3,))],),
        ([("d", "a", "b", ()), ("e", "a", None, ())],),  # the second document: nothing of the first
        ([("d", "a", "b", ())], "not callable"),
        ([("d", "a", "café", ())], lambda s: "not a list"),
        ([("d", "a", "café", ())], lambda s: [1]),
        ([("d", "a", "b", ())], None.__class__, "not a dict"),
    ],
)
def test_index_texts_wrong_types_raise_type_error_and_change_nothing(
    args: tuple[Any, ...],
) -> None:
    from memstore import _speedups
    from memstore.text import words

    full: list[Any] = [[("d", "a", "b", ())], words, Counter(), {}, [], [], {}, [], []]
    full[: len(args)] = args
    if full[1] is type(None):
        full[1] = words
    df = Counter({"a": 3})
    if isinstance(full[2], dict):
        full[2] = df
    with pytest.raises(TypeError):
        _speedups.index_texts(*full)
    assert df == Counter({"a": 3})
    assert all(x in ({}, []) for x in full[3:] if not isinstance(x, str))


@needs_speedups
def test_index_texts_reference_counts_and_memory_are_kept() -> None:
    """Many calls, some failing midway: no word, number, text or table leaked or freed early."""
    import gc
    import tracemalloc

    from memstore import _speedups
    from memstore.text import words as split

    vocab = ["".join(["w", str(i)]) for i in range(40)]  # fresh objects, not interned
    wid = {
        w: i + 1000 for i, w in enumerate([*vocab, "cafe", "привет"])
    }  # numbers above the small ints
    twid = {w: i + 2000 for i, w in enumerate(vocab)}
    df = dict.fromkeys([*vocab, "cafe", "привет"], 300)
    title = " ".join(vocab[:5])
    content = " ".join(vocab * 3)
    extra = ("w1", "w2")
    listed = vocab[10:20]

    class Refuses(dict[str, int]):
        def __missing__(self, key: str) -> int:
            raise KeyError(key)

    def refs() -> list[int]:
        held = [*vocab, *wid.values(), *twid.values(), *set(df.values())]
        return [sys.getrefcount(x) for x in [*held, title, content, extra, listed, split]]

    docs = [
        ("d", title, content, extra),
        ("e", listed, "Café привет w3 w4", ["w5"]),  # not ASCII: joined
        ("f", "", "", ()),
    ]
    bad = [("d", title, f"{content} unknown", ())]

    def once() -> None:
        counts = dict(df)
        _speedups.index_texts(docs, split, counts, wid, [], [], twid, [], [])
        try:  # no pytest.raises here: its tracebacks are cycles the collector frees late
            _speedups.index_texts(bad, split, counts, Refuses(wid), [], [], twid, [], [])
            raised = False
        except KeyError:
            raised = True
        assert raised
        try:  # refused before anything changes
            _speedups.index_texts(
                [*docs, ("g", 1, "", ())], split, counts, wid, [], [], twid, [], []
            )
            refused = False
        except TypeError:
            refused = True
        assert refused

    for _ in range(3):  # warm up (interpreter caches)
        once()
    before = refs()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(2000):
            once()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert refs() == before
    assert grown < 64 * 1024, grown


@needs_speedups
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(alphabet="ab é", max_size=12), min_size=1, max_size=12),
    st.data(),
    st.text(alphabet="ab é", max_size=4),
)
def test_holding_is_the_substring_test(texts: list[str], data: st.DataObject, pair: str) -> None:
    """The compiled joined-word test finds the slots whose text holds the pair, in order, as
    ``pair in text`` does (ASCII; NotImplemented as soon as the pair or a text tested is not),
    and ``_holding`` answers the same whichever path it takes."""
    from memstore.lexical import _holding

    slots = data.draw(st.lists(st.integers(0, len(texts) - 1), max_size=20))
    want = [s for s in slots if pair in texts[s]]
    got = COMPILED.holding(texts, slots, pair)
    if pair.isascii() and all(texts[s].isascii() for s in slots):
        assert got == want
    else:
        assert got is NotImplemented
    assert _holding(texts, slots, pair) == want
    with _wordbatch.pure_python():
        assert _holding(texts, slots, pair) == want


@needs_speedups
def test_holding_refuses_bad_input() -> None:
    with pytest.raises(IndexError):
        COMPILED.holding(["a"], [1], "a")
    with pytest.raises(TypeError):
        COMPILED.holding([b"a"], [0], "a")
    with pytest.raises(TypeError):
        COMPILED.holding(("a",), [0], "a")
