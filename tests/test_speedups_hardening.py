"""The compiled module (``memstore._speedups``) given what its callers never send it.

Each compiled function is held to its oracle by a differential test of its own;
here each is called straight, with input the wrappers never build: a limit far
past the data, callbacks (``__float__``, ``__index__``, ``__hash__``, a
``split``) that change the very lists the call is reading, another thread
changing a list while the GIL is released, and plain bad input (wrong types,
lengths, dtypes; negative and huge numbers; NaN; lone surrogates and astral
characters). Each must give the oracle's answer or raise a clear exception:
never crash, never read or write out of bounds, never leak a reference.

A call that could crash the interpreter runs in a child process (``_child``), so
that a regression fails its own test instead of the run. Run under
AddressSanitizer, a silent out-of-bounds read or write fails the child too::

    CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -O1 -g" \
    LDFLAGS="-fsanitize=address,undefined" python setup.py build_ext --inplace --force
    LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
    ASAN_OPTIONS=detect_leaks=0 PYTHONMALLOC=malloc \
    python -m pytest tests/test_speedups_hardening.py

(then ``python setup.py build_ext --inplace --force`` again for the normal build).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from memstore.search._lean import _top_slots

COMPILED: ModuleType | None
try:
    from memstore import _speedups as COMPILED
except ImportError:  # not built: nothing to harden
    COMPILED = None

pytestmark = pytest.mark.skipif(COMPILED is None, reason="memstore._speedups is not built")

ROOT = Path(__file__).resolve().parents[1]


def _child(code: str) -> str:
    """Run ``code`` in a fresh interpreter (the worktree's memstore) and return its output.

    Fails the test on a crash (a signal, or a sanitizer's report) with what the child said.
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"the child exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done.stdout.strip()


def _lean(n: int) -> list[np.ndarray]:
    """lean_top's columns for n slots, every one a candidate (two lent to)."""
    rng = np.random.default_rng(n)
    return [
        rng.random(n),
        np.ones(n, np.bool_),
        np.ones(n, np.bool_),
        np.array([1, n - 1], np.intp),
        np.array([0.25, 0.5]),
        rng.permutation(n).astype(np.intp),
    ]


def test_lean_top_need_past_the_slots_ranks_every_candidate() -> None:
    """A need far past the slots (a caller's huge limit) ranks them all, as the oracle does.

    The heap of the best was sized by need: a MemoryError for 10**12, and for 2**62 a
    size that wraps around to nothing, the candidates then written past it.
    """
    assert COMPILED is not None
    cols = _lean(300)
    want = _top_slots(*cols, 300)  # type: ignore[arg-type]
    for need in (300, 301, 10**12, sys.maxsize):
        assert COMPILED.lean_top(*cols, need) == want
    out = _child(
        """
        import numpy as np
        from memstore import _speedups
        n = 2000
        cols = [np.linspace(0, 1, n), np.ones(n, bool), np.ones(n, bool),
                np.zeros(0, np.intp), np.zeros(0), np.arange(n, dtype=np.intp)]
        for need in (2**62, 2**62 + 1, 2**64 // 24 + 1):  # need * 24 wraps to 0, 24, 8
            slots, scores = _speedups.lean_top(*cols, need)
            assert slots == list(range(n - 1, -1, -1)), need
        print("ok")
        """
    )
    assert out == "ok"


def test_best_levels_reads_every_level_before_a_slot() -> None:
    """A level's ``__float__`` runs before any slot is read: what it changes is seen.

    The levels were read part by part, between the scans of the slots: a ``__float__``
    that wrote a slot already scanned (past the range the table was sized for) made the
    merge write far outside it, and one that emptied the list of parts freed the parts
    still to read.
    """
    out = _child(
        """
        import gc
        import numpy as np
        from memstore import _speedups
        from memstore._tokenmatch import _merge

        first = np.array([1, 2, 3], np.int32)
        class Writes:
            def __float__(self):
                first[0] = 2**31 - 1  # past capacity: the numpy path's (NotImplemented)
                return 0.5
        parts = [(1.0, first), (Writes(), np.array([5], np.int32))]
        print(_speedups.best_levels(parts, 10, None) is NotImplemented)

        parts = [(1.0, np.array([1, 2, 3], np.int32))]
        class Empties:
            def __float__(self):
                parts.clear()
                gc.collect()
                return 0.5
        parts += [(Empties(), np.array([3, 5], np.int32)), (2.0, np.array([6], np.int32))]
        plain = [(1.0, np.array([1, 2, 3], np.int32)), (0.5, np.array([3, 5], np.int32)),
                 (2.0, np.array([6], np.int32))]
        raw_slots, raw_levels = _speedups.best_levels(parts, 10, None)
        slots, levels = _merge(plain, 10, None)
        print(np.frombuffer(raw_slots, np.intp).tolist() == slots.tolist(),
              np.frombuffer(raw_levels).tolist() == levels.tolist())
        """
    )
    assert out.split() == ["True", "True", "True"]


def test_slots_of_an_id_that_changes_the_list_of_ids() -> None:
    """An id whose ``__hash__`` changes the list being read: a RuntimeError, no stale read.

    The ids were read through a pointer to the list's items taken once: a hash that
    grew the list (moving its items) or emptied it (freeing the id being looked up)
    made the loop read freed memory.
    """
    out = _child(
        """
        import gc
        from memstore import _speedups

        for grow in (True, False):
            ids = []
            class Id:
                def __init__(self, s):
                    self.s = s
                def __hash__(self):
                    ids.clear()
                    if grow:
                        ids.extend(["x"] * 1000)
                    gc.collect()
                    return hash(self.s)
                def __eq__(self, other):
                    return self.s == other
            ids += [Id("a"), Id("b"), "c"]
            try:
                raw, every = _speedups.slots_of(ids, {"a": 0, "b": 1}, 5)
                print(list(memoryview(raw).cast("q")), every)
            except RuntimeError as e:
                print(type(e).__name__)
        """
    )
    # Grown: the id being looked up is held, the rest read anew; emptied: nothing to read.
    assert out.splitlines() == ["[0, -1, -1] False", "RuntimeError"]


_RACE = """
import gc, sys, threading
import numpy as np
from memstore import _speedups

sys.setswitchinterval(100)  # the GIL goes to the other thread only where the call drops it
big = 1 << 24  # long texts: the substring tests run without the GIL, for milliseconds
go = threading.Event()
def change():
    go.wait()  # wakes while the call holds the GIL, runs as soon as the call drops it
    CHANGE
    gc.collect()
    junk = [" QQQ " * 2 for _ in range(10000)]  # reuses what was freed
thread = threading.Thread(target=change)
thread.start()
go.set()
CALL
thread.join()
"""


def test_holding_while_another_thread_empties_the_slots() -> None:
    """The slots are held for the call: another thread emptying the list changes nothing.

    The substring tests run without the GIL; the answer was then built from the list
    itself, which another thread could have emptied (freeing its items) meanwhile.
    """
    code = _RACE.replace("CHANGE", "slots.clear()").replace(
        "CALL",
        "slots = [0, 1, 0, 1]\n"
        'print(_speedups.holding(["x" * big + " a b ", "y" * big], slots, " a b "))',
    )
    assert _child(code) == "[0, 0]"


def test_joined_slots_while_another_thread_drops_the_pairs() -> None:
    """A pair is held while its texts are searched: another thread dropping it changes nothing.

    Its pattern was read from the caller's list, which another thread could empty (freeing
    the pattern) while the texts were searched without the GIL.
    """
    code = _RACE.replace("CHANGE", "pairs.clear()").replace(
        "CALL",
        "a = np.array([0, 1], np.int32)\n"
        'pairs = [(a, a, "".join([" a", " b "]))]\n'
        'texts = [" " + "q" * big + " a b ", " a b " + "z" * big]\n'
        "print(_speedups.joined_slots(pairs, texts, [], 2))",
    )
    assert _child(code) == "[0, 1]"


def test_index_texts_split_that_empties_the_documents() -> None:
    """``split`` (Python code) emptying the list of documents: the batch is the one passed.

    The documents were read from the caller's list while ``split`` ran for them, so a
    ``split`` that emptied it freed the document being read and left the loop reading
    past the list's end.
    """
    out = _child(
        """
        import gc
        from memstore import _speedups
        from memstore.text import words

        class Numbers(dict):
            def __missing__(self, word):
                self[word] = len(self)
                return self[word]

        def run(docs, split):
            return _speedups.index_texts(
                docs, split, {}, Numbers(), [], [], Numbers(), [], []
            )

        batch = [("i", "Café au lait", "b", ()), ("j", "x", "y", ["z"]), ("k", "é", "w", ())]
        want = run(list(batch), words)
        docs = list(batch)
        def empties(text):
            docs.clear()
            gc.collect()
            return words(text)
        print(run(docs, empties) == want)
        """
    )
    assert out == "True"


def test_vocabulary_search_callbacks_that_change_what_is_read() -> None:
    """A span bound's ``__index__``, an overlay number's ``__index__``, a level's
    ``__float__`` or a word's ``__hash__`` changing the very container being read.

    Each was read from the caller's list or dict after the callback ran: a span freed
    while its bounds were parsed, an overlay list or a level's key freed while in use,
    a word list emptied between a word number's check and its read (a NULL read).
    """
    out = _child(
        """
        import gc
        from memstore import _speedups
        from memstore._vocabindex import hash_string

        words = ["ab", "abc", "b"]
        vocab = dict.fromkeys(words, 1)
        def call(f, *args):
            try:
                return f(*args)
            except IndexError as e:
                return type(e).__name__

        spans = []
        class Bound:
            def __index__(self):
                spans.clear()
                gc.collect()
                return 2
        spans += [(0, Bound()), (0, 3), (1, 3)]
        plain = [(0, 2), (0, 3), (1, 3)]
        print(call(_speedups.neighbour_sets, "abc", spans, vocab, words, None, (), {})
              == _speedups.neighbour_sets("abc", plain, vocab, words, None, (), {}))

        overlay = {}
        class Number:
            def __index__(self):
                overlay.clear()
                gc.collect()
                return 1
        overlay[0] = [Number(), 0, 1]
        print(call(_speedups.key_words, 0, words, None, (), overlay))

        levels = {}
        class Level:
            def __float__(self):
                levels.clear()
                gc.collect()
                return 0.9
        levels["".join(["ab", "x"])] = Level()
        plain = {"abx": 0.9}
        print(call(_speedups.edits, "abb", levels, 0.5, vocab, words, None, (), {})
              == _speedups.edits("abb", plain, 0.5, vocab, words, None, (), {}))

        held = []
        class Word(str):
            def __hash__(self):
                held.clear()
                gc.collect()
                return str.__hash__(self)
        trigram = (ord("a") << 42) | (ord("b") << 21) | ord("c")
        held += [Word("abc"), Word("abcd"), "b"]
        print(call(_speedups.fuzzy_words, "abc", held, None, (), {trigram: [0, 1]}, 0.0, 1.0))
        held += [Word("ab"), Word("abd"), "b"]
        key = hash_string("abd")  # the token's own key: the overlay lists two candidates
        print(call(_speedups.neighbour_sets, "abd", [(0, 3)], {}, held, None, (), {key: [0, 1]}))
        """
    )
    assert out.splitlines() == ["True", "['ab', 'abc']", "True", "IndexError", "IndexError"]


def test_an_overlay_word_number_past_int32_is_no_word() -> None:
    """An overlay word number past int32 is an IndexError, as ``words[number]`` is.

    It was cut to its low 32 bits, naming another word: 2**32 + 1 found word 1.
    """
    assert COMPILED is not None
    for number in (2**32 + 1, 2**31, -1, -(2**32) + 1):
        with pytest.raises(IndexError):
            COMPILED.key_words(7, ["ab", "abc"], None, (), {7: [number]})


def test_best_levels_of_arrays_with_steps_is_the_numpy_paths() -> None:
    """Slots or ``alive`` with steps (a strided view) are left to numpy, whose answer stands.

    The compiled merge reads only contiguous arrays; it asked for one, so the buffer
    request raised ValueError where its contract (and the oracle) answers.
    """
    assert COMPILED is not None
    from memstore import _wordbatch
    from memstore._tokenmatch import _best_levels, best_levels

    slots = np.array([9, 1, 7, 3, 5, 3], np.int32)
    alive = np.ones(40, np.bool_)
    alive[14] = False
    cases = [
        ([(1.0, [slots[::2]]), (0.5, [slots[1::2]])], None),
        ([(1.0, [slots])], alive[::2]),
    ]
    saved, _wordbatch.speedups = _wordbatch.speedups, COMPILED
    try:
        for groups, live in cases:
            parts = [(lv, a) for lv, arrays in groups for a in arrays]
            assert COMPILED.best_levels(parts, 20, live) is NotImplemented
            got, want = best_levels(groups, 20, live), _best_levels(groups, 20, live)
            assert got[0].tolist() == want[0].tolist()
            assert got[1].tolist() == want[1].tolist()
    finally:
        _wordbatch.speedups = saved


def _bad_calls() -> list[tuple[str, object, object]]:
    """(name, call, what it must give): an exception type, NotImplemented, or a checker."""
    assert COMPILED is not None
    S = COMPILED
    i32 = np.array([0, 1, 2], np.int32)
    words = ["ab", "abc", "b"]
    vocab = dict.fromkeys(words, 1)
    n = 6
    cols = (
        np.full(n, np.inf),
        np.zeros(n),
        *(np.zeros(n, np.int32) for _ in range(4)),
        np.zeros(n, np.uint8),
    )
    ids = [f"id{i}" for i in range(n)]

    def tok(slots: list[int], levels: int | None = None) -> tuple[object, ...]:
        s = np.array(slots, np.int64)
        lv = np.ones(len(slots) if levels is None else levels)
        return (s, lv, np.zeros(0, np.int64), np.zeros(0), 1.0)

    def rank(tokens: tuple[object, ...], *, ids: list[str] = ids, how: int = 0) -> object:
        return S.lex_rank(tokens, 1.0, 0.5, 1.0, cols, None, None, None, (), 0.0, 3, ids, None, how)

    lean = _lean(8)

    def lean_with(k: int, value: object) -> object:
        args = list(lean)
        args[k] = value
        return S.lean_top(*args, 3)

    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

    class HashRaises:
        def __hash__(self) -> int:
            raise ArithmeticError("hash")

    tables = ((np.array([5], np.uint64), np.array([0, 2], np.int64), np.array([0, 1], np.int32)),)
    return [
        # lean_top
        ("lean: a loan past the slots", lambda: lean_with(3, np.array([8, 0])), IndexError),
        ("lean: a loan before the slots", lambda: lean_with(3, np.array([-9, 0])), IndexError),
        ("lean: columns of other lengths", lambda: lean_with(1, np.ones(7, np.bool_)), ValueError),
        ("lean: loans of other lengths", lambda: lean_with(4, np.ones(3)), ValueError),
        ("lean: 4-byte scores", lambda: lean_with(0, np.ones(8, np.float32)), TypeError),
        ("lean: 2-d scores", lambda: lean_with(0, np.ones((2, 4))), TypeError),
        (
            "lean: scores with steps",
            lambda: lean_with(0, np.ones(16)[::2]),
            (ValueError, BufferError),
        ),
        ("lean: a NaN score (numpy's)", lambda: lean_with(0, np.full(8, np.nan)), type(None)),
        ("lean: need < 0", lambda: S.lean_top(*lean, -1), ValueError),
        ("lean: need not an int", lambda: S.lean_top(*lean, 2.5), TypeError),
        ("lean: need past ssize_t", lambda: S.lean_top(*lean, 2**64), OverflowError),
        # best_levels
        ("levels: no parts", lambda: S.best_levels([], 9, None), NotImplemented),
        ("levels: a negative slot", lambda: S.best_levels([(1.0, -i32)], 9, None), NotImplemented),
        (
            "levels: a slot past capacity",
            lambda: S.best_levels([(1.0, i32)], 2, None),
            NotImplemented,
        ),
        (
            "levels: alive too short",
            lambda: S.best_levels([(1.0, i32)], 9, np.ones(2, np.bool_)),
            NotImplemented,
        ),
        ("levels: a NaN level", lambda: S.best_levels([(np.nan, i32)], 9, None), NotImplemented),
        (
            "levels: 8-byte slots",
            lambda: S.best_levels([(1.0, i32.astype(np.int64))], 9, None),
            NotImplemented,
        ),
        (
            "levels: big-endian slots",
            lambda: S.best_levels([(1.0, i32.astype(">i4"))], 9, None),
            NotImplemented,
        ),
        (
            "levels: 256 levels",
            lambda: S.best_levels([(float(k), i32) for k in range(256)], 9, None),
            NotImplemented,
        ),
        ("levels: a part of one item", lambda: S.best_levels([(1.0,)], 9, None), TypeError),
        ("levels: a str level", lambda: S.best_levels([("1", i32)], 9, None), TypeError),
        ("levels: 8-byte alive", lambda: S.best_levels([(1.0, i32)], 9, np.ones(9)), TypeError),
        ("levels: parts not a list", lambda: S.best_levels(((1.0, i32),), 9, None), TypeError),
        # slots_of, slot_map
        ("slots_of: a slot not an int", lambda: S.slots_of(["a"], {"a": "0"}, 5), TypeError),
        (
            "slots_of: a slot past ssize_t",
            lambda: S.slots_of(["a"], {"a": 2**70}, 5),
            OverflowError,
        ),
        ("slots_of: an unhashable id", lambda: S.slots_of([Unhashable()], {}, 5), TypeError),
        (
            "slots_of: a hash that raises",
            lambda: S.slots_of([HashRaises()], {}, 5),
            ArithmeticError,
        ),
        ("slots_of: ids not a sequence", lambda: S.slots_of(5, {}, 5), TypeError),
        (
            "slot_map: known read-only",
            lambda: S.slot_map(
                np.frombuffer(bytes(24), np.intp), np.zeros(1, np.intp), ("a",), {}, 3
            ),
            (BufferError, ValueError),
        ),
        (
            "slot_map: 4-byte slots",
            lambda: S.slot_map(np.zeros(3, np.intp), np.zeros(1, np.int32), ("a",), {}, 3),
            TypeError,
        ),
        (
            "slot_map: an id short",
            lambda: S.slot_map(np.zeros(3, np.intp), np.zeros(2, np.intp), ("a",), {}, 3),
            TypeError,
        ),
        # holding, joined_slots
        ("holding: a slot past the texts", lambda: S.holding(["ab"], [0, 1], "b"), IndexError),
        ("holding: a negative slot", lambda: S.holding(["ab"], [0, -1], "b"), IndexError),
        ("holding: a text not a str", lambda: S.holding(["ab", 5], [0, 1], "b"), TypeError),
        ("holding: a slot not an int", lambda: S.holding(["ab"], ["0"], "b"), TypeError),
        (
            "holding: a text with a lone surrogate",
            lambda: S.holding(["ab", "\ud800b"], [0, 1], "b"),
            NotImplemented,
        ),
        (
            "holding: an astral pair",
            lambda: S.holding(["ab"], [0, 0], "\U0001f600"),
            NotImplemented,
        ),
        (
            "joined: a slot past the texts",
            lambda: S.joined_slots([(i32, i32, " a ")], [" a "], [], 3),
            IndexError,
        ),
        (
            "joined: a slot past capacity",
            lambda: S.joined_slots([(i32, i32, " a ")], [" a "] * 3, [], 2),
            IndexError,
        ),
        ("joined: capacity < 0", lambda: S.joined_slots([], [], [], -1), ValueError),
        (
            "joined: 8-byte slots",
            lambda: S.joined_slots([(i32, i32.astype(np.int64), " a ")], [" a "] * 3, [], 3),
            TypeError,
        ),
        (
            "joined: a pattern not a str",
            lambda: S.joined_slots([(i32, i32, b" a ")], [" a "] * 3, [], 3),
            TypeError,
        ),
        (
            "joined: a text not a str",
            lambda: S.joined_slots([(i32, i32, " a ")], [" a ", 5, " a "], [], 3),
            TypeError,
        ),
        # the vocabulary search
        (
            "near: a span past the token",
            lambda: S.neighbour_sets("ab", [(0, 3)], vocab, words, None, (), {}),
            ValueError,
        ),
        (
            "near: a negative span",
            lambda: S.neighbour_sets("ab", [(-1, 2)], vocab, words, None, (), {}),
            ValueError,
        ),
        (
            "near: a span not a tuple",
            lambda: S.neighbour_sets("ab", [[0, 2]], vocab, words, None, (), {}),
            TypeError,
        ),
        (
            "near: a span of three",
            lambda: S.neighbour_sets("ab", [(0, 1, 2)], vocab, words, None, (), {}),
            TypeError,
        ),
        (
            "near: offsets past the values",
            lambda: S.key_words(
                5, words, None, ((tables[0][0], np.array([0, 9], np.int64), tables[0][2]),), {}
            ),
            ValueError,
        ),
        (
            "near: offsets not one longer",
            lambda: S.key_words(
                5, words, None, ((tables[0][0], np.array([0], np.int64), tables[0][2]),), {}
            ),
            ValueError,
        ),
        (
            "near: 4-byte keys",
            lambda: S.key_words(
                5, words, None, ((np.array([5], np.uint32), tables[0][1], tables[0][2]),), {}
            ),
            TypeError,
        ),
        (
            "near: a word number past the words",
            lambda: S.key_words(5, ["ab"], None, tables, {}),
            IndexError,
        ),
        (
            "near: a word number past live",
            lambda: S.key_words(5, words, np.ones(1, np.bool_), tables, {}),
            IndexError,
        ),
        (
            "near: an overlay value not a list",
            lambda: S.key_words(5, words, None, (), {5: (0,)}),
            TypeError,
        ),
        (
            "near: a word not a str",
            lambda: S.fuzzy_words(
                "abc", [1, 2], None, (), {(97 << 42) | (98 << 21) | 99: [0]}, 0.0, 1.0
            ),
            TypeError,
        ),
        (
            "edits: a level not a number",
            lambda: S.edits("abab", {"ab": "x"}, 0.5, vocab, words, None, (), {}),
            TypeError,
        ),
        # the write loop
        (
            "count: a word not a str",
            lambda: S.count_docs([("i", ["a"], [b"b"])], {}, {}, [], [], {}, [], []),
            TypeError,
        ),
        (
            "count: a doc of two",
            lambda: S.count_docs([("i", ["a"])], {}, {}, [], [], {}, [], []),
            TypeError,
        ),
        (
            "count: a word number < 0",
            lambda: S.count_docs([("i", [], ["a"])], {}, {"a": -1}, [], [], {}, [], []),
            TypeError,
        ),
        (
            "count: a word number past ssize_t",
            lambda: S.count_docs([("i", [], ["a"])], {}, {"a": 2**70}, [], [], {}, [], []),
            OverflowError,
        ),
        (
            "texts: extra not a list",
            lambda: S.index_texts([("i", "a", "b", 5)], str.split, {}, {}, [], [], {}, [], []),
            TypeError,
        ),
        (
            "texts: split not a list",
            lambda: S.index_texts([("i", "é", "", ())], lambda t: "é", {}, {}, [], [], {}, [], []),
            TypeError,
        ),
        (
            "texts: split of no str",
            lambda: S.index_texts([("i", "é", "", ())], lambda t: [1], {}, {}, [], [], {}, [], []),
            TypeError,
        ),
        (
            "texts: split raises",
            lambda: S.index_texts(
                [("i", "é", "", ())], lambda t: 1 / 0, {}, {}, [], [], {}, [], []
            ),
            ZeroDivisionError,
        ),
        ("split: not ASCII", lambda: S.split_ascii("é"), TypeError),
        ("split: a lone surrogate", lambda: S.split_ascii("\ud800"), TypeError),
        ("split: not a str", lambda: S.split_ascii(b"ab"), TypeError),
        # lex_rank
        ("rank: slots not increasing", lambda: rank((tok([3, 1]),)), NotImplemented),
        ("rank: a negative slot", lambda: rank((tok([-1, 2]),), how=1), NotImplemented),
        ("rank: a slot past the columns", lambda: rank((tok([1, n]),), how=2), NotImplemented),
        ("rank: a slot past the ids", lambda: rank((tok([1, 4]),), ids=ids[:2]), IndexError),
        ("rank: levels of another length", lambda: rank((tok([1, 2], levels=1),)), ValueError),
        ("rank: a token of four", lambda: rank(((1, 2, 3, 4),)), TypeError),
        ("rank: how 3", lambda: rank((tok([1]),), how=3), ValueError),
        (
            "rank: a hit type not a tuple type",
            lambda: S.lex_rank(
                (tok([1]),), 1.0, 0.5, 1.0, cols, None, None, None, (), 0.0, 3, ids, list
            ),
            TypeError,
        ),
        (
            "rank: six columns",
            lambda: S.lex_rank(
                (tok([1]),), 1.0, 0.5, 1.0, cols[:6], None, None, None, (), 0.0, 3, ids, None
            ),
            TypeError,
        ),
        (
            "rank: a kind past int64",
            lambda: S.lex_rank(
                (tok([1]),), 1.0, 0.5, 1.0, cols, 2**70, None, None, (), 0.0, 3, ids, None
            ),
            OverflowError,
        ),
    ]


def test_bad_input_gets_a_clear_answer() -> None:
    """Each bad call raises its clear exception, or answers NotImplemented or None (the
    numpy path's), as its caller expects: none crashes (each call's crash fails the run)."""
    wrong = []
    for name, call, want in _bad_calls():
        try:
            got: object = call()  # type: ignore[operator]
        except Exception as e:  # compared below
            got = e
        if want is NotImplemented or want is type(None):
            ok = got is (NotImplemented if want is NotImplemented else None)
        else:
            ok = isinstance(got, want) and bool(str(got))  # type: ignore[arg-type]
        if not ok:
            wrong.append(f"{name}: {got!r}")
    assert wrong == []


class _Text(str):
    """A str subclass (a caller's own text type)."""


# Lone surrogates (either half, in words and between them), astral characters, a
# str subclass, a very long token, and texts that split to nothing.
_STRANGE_DOCS: list[tuple[str, object, object, object]] = [
    ("a", "x\ud800y Ab\udfffCd", "😀 \U0010ffff é", ("\ud800",)),
    ("b", ["\ud800", "😀" * 3, "a\udc00"], "a" * 20000 + " B", ["long" * 1000]),
    ("c", _Text("Hello World"), [_Text("sub"), "sub"], ()),
    ("d", "", "!!! ???", []),
    ("e", "\ud800\udc00 \U0001f600", "", ("x",)),
]


def _counted(docs: list[tuple[str, object, object, object]]) -> dict[str, object]:
    """:func:`memstore._wordbatch.count_texts` of ``docs`` in a comparable form."""
    from collections import Counter

    from memstore import _wordbatch
    from memstore._postings import Postings

    df: Counter[str] = Counter({"sub": 2, "😀😀😀": 1})
    content, title = Postings(), Postings()
    content.add_docs(0, [{"sub"}, {"😀😀😀"}])
    title.add_docs(0, [{"sub"}, set()])
    new, texts, ntitles, batch = _wordbatch.count_texts(
        docs,  # type: ignore[arg-type]
        2,
        df,
        content,
        title,
        want_words=True,
    )
    return {
        "new": sorted(new),
        "texts": texts,
        "ntitles": ntitles,
        "batch": sorted(batch),
        "df": dict(df),
        "content": {w: a.tolist() for w, a in content.items()},
        "title": {w: a.tolist() for w, a in title.items()},
    }


def test_the_write_loop_counts_strange_strings_as_the_pure_loop() -> None:
    """Lone surrogates, astral characters, a str subclass and a 20,000-character token:
    the compiled split and count give the pure loop's words, texts, counts and postings."""
    from memstore import _wordbatch

    saved, _wordbatch.speedups = _wordbatch.speedups, COMPILED
    try:
        fast = _counted(list(_STRANGE_DOCS))
        with _wordbatch.pure_python():
            slow = _counted(list(_STRANGE_DOCS))
    finally:
        _wordbatch.speedups = saved
    assert fast == slow


def test_the_vocabulary_search_of_strange_tokens_is_the_pure_search() -> None:
    """Tokens and words with lone surrogates (either half), astral characters up to
    U+10FFFF and a 3,000-character token: the compiled search's neighbours and pairs are
    the pure ones."""
    from memstore import _editnear, _wordbatch
    from memstore._vocabindex import VocabIndex

    ws = ["a\ud800b", "ab", "😀x", "a\udfffb", "\U0010ffffq", "abab", "\ud800", "x" * 3000]
    index = VocabIndex()
    index.add_many(ws)
    index.flush()
    vocab = dict.fromkeys(ws, 1)
    tokens = [
        "a\ud800",
        "a\ud800bx",
        "😀",
        "ab\U0010ffff",
        "\ud800\udc00",
        "a\udfffb",
        "",
        "x" * 3000,
    ]
    saved, _wordbatch.speedups = _wordbatch.speedups, COMPILED
    try:
        for tok in tokens:
            near, pairs = _editnear.edits(tok, {"ab": 0.1}, vocab, index)
            pure_near, pure_pairs = _editnear.pure_edits(tok, {"ab": 0.1}, vocab, index)
            assert (near, sorted(pairs)) == (pure_near, sorted(pure_pairs)), repr(tok)
            spans = [(0, len(tok)), (0, len(tok) // 2), (len(tok) // 2, len(tok))]
            assert _editnear.neighbour_sets(tok, spans, vocab, index) == (
                _editnear.pure_neighbour_sets(tok, spans, vocab, index)
            ), repr(tok)
    finally:
        _wordbatch.speedups = saved


def test_long_and_astral_rows_are_pydantics_text() -> None:
    """A row far past the writer's stack buffer, every escape, astral characters: the
    compiled row is pydantic-core's text byte for byte (a lone surrogate: declined)."""
    assert COMPILED is not None
    from memstore import Item
    from memstore.journal.version import _FIELDS_TO_JSON, _ROW_FIELDS, _UTCS

    every_escape = "".join(map(chr, range(0x80))) + "\u2028\x7f"
    item = Item(
        kind="note",
        title=every_escape * 50,
        content="😀\U0010ffff" * 5000 + '"\\' * 3000,
        tags=["é" * 300, "\U0001f680"],
        data={"k" * 100: "\n" * 4000},
    )
    assert COMPILED.row_json(_ROW_FIELDS, _UTCS, item.__dict__) == (
        _FIELDS_TO_JSON(item.__dict__).decode()
    )
    d = dict(item.__dict__, content="x" * 5000 + "\udfff")
    assert COMPILED.row_json(_ROW_FIELDS, _UTCS, d) is None


def test_the_ascii_split_of_a_long_text_is_words() -> None:
    """A megabyte of ASCII, words long and short, CamelCase, joins: memstore.text.words."""
    assert COMPILED is not None
    from memstore.text import words

    text = " ".join(["aB" * 50_000, "1.2.3" * 1000, "x9:30y", "HTTPServer" * 100, "-" * 1000] * 5)
    assert COMPILED.split_ascii(text) == words(text)


def test_reference_counts_are_kept_on_every_path() -> None:
    """Hundreds of calls, each answering, raising midway or declining: every object passed
    (and every item the calls read) keeps its reference count."""
    assert COMPILED is not None
    import datetime as dt
    import gc
    from collections import namedtuple

    S = COMPILED
    Hit = namedtuple("Hit", "id score covered fuzzy")
    words = ["ab", "abc", "b", "abd", "\ud800b"]
    vocab = dict.fromkeys(words, 1)
    texts = [" a b ", " c ", "é a b ", " a b c "]
    slots = [0, 1, 3, 0]
    ids = [f"id{i}" for i in range(8)]
    tables = (
        (np.array([1, 5], np.uint64), np.array([0, 1, 2], np.int64), np.array([0, 1], np.int32)),
    )
    i32 = np.array([0, 1, 2], np.int32)
    cols = (
        np.full(8, np.inf),
        np.zeros(8),
        *(np.zeros(8, np.int32) for _ in range(4)),
        np.zeros(8, np.uint8),
    )
    token = (np.array([1, 2, 5], np.int64), np.ones(3), np.array([2], np.int64), np.ones(1), 1.0)
    lean = _lean(8)
    stamp = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    row = {"id": "aé\n", "tags": ["x"], "when": stamp, "data": {"k": "v"}}
    fields = (("id", 0), ("tags", 1), ("when", 3), ("data", 4))
    watched: list[object] = [
        words, vocab, texts, slots, ids, tables, i32, token, *words, *texts, *ids, row, stamp,
        *lean, *cols,
    ]  # fmt: skip

    class Raises:
        def __hash__(self) -> int:
            raise ArithmeticError

        def __lt__(self, other: object) -> bool:
            raise ArithmeticError

    raising = [Raises()] * 8
    calls = [
        lambda: S.lex_rank((token,), 1.0, 0.5, 1.0, cols, None, None, None, (7,), 0.0, 2, ids, Hit),
        lambda: S.lex_rank(
            (token, token), 1.0, 0.5, 1.0, cols, None, None, None, (), 0.0, -1, ids, None
        ),
        lambda: S.lex_rank(
            (token,), 1.0, 0.5, 1.0, cols, None, None, None, (), 0.0, 1, raising, None
        ),
        lambda: S.lex_rank(
            (token,), 1.0, 0.5, 1.0, cols, None, None, None, (), 0.0, 1, ids[:2], None
        ),
        lambda: S.slot_map(
            np.full(8, -1, np.intp), np.array([1, 2, 99]), ("id1", "id2", "zz"), {"id1": 3}, 8
        ),
        lambda: S.slots_of([*ids, Raises()], {"id1": 0}, 5),
        lambda: S.slots_of(ids, {"id1": 0, "id2": 9}, 5),
        lambda: S.holding(texts, slots, " a "),
        lambda: S.holding(texts, [0, 2], " a "),
        lambda: S.holding(texts, [0, 9], " a "),
        lambda: S.joined_slots([(i32, i32, " a b ")], texts, [np.array([1], np.int32)], 4),
        lambda: S.joined_slots([(i32, i32, " é ")], texts, [], 4),
        lambda: S.joined_slots([(i32, i32, " a ")], texts[:1], [], 4),
        lambda: S.neighbour_sets("abx", [(0, 3), (0, 2)], vocab, words, None, tables, {7: [1, 2]}),
        lambda: S.neighbour_sets("abx", [(0, 3), (0, 9)], vocab, words, None, tables, {}),
        lambda: S.edits("abab", {"ab": 0.1}, 0.5, vocab, words, np.ones(5, np.bool_), tables, {}),
        lambda: S.edits("abab", {"ab": "x"}, 0.5, vocab, words, None, tables, {}),
        lambda: S.substring_words("ab", words, None, tables, {1: [0, 9]}),
        lambda: S.key_words(5, words, None, tables, {}),
        lambda: S.fuzzy_words("abcd", words, None, tables, {1: [1, 3]}, 0.0, 1.0),
        lambda: S.best_levels([(1.0, i32), (0.5, np.array([5, 9], np.int32))], 10, None),
        lambda: S.best_levels([(1.0, i32), ("x", i32)], 10, None),
        lambda: S.best_levels([(1.0, i32[::2])], 10, None),
        lambda: S.lean_top(*lean, 5),
        lambda: S.lean_top(*lean[:3], np.array([99]), np.array([1.0]), lean[5], 5),
        lambda: S.row_json(fields, (dt.UTC,), row),
        lambda: S.row_json(fields, (dt.UTC,), dict(row, id="\ud800")),
        lambda: S.split_ascii(" ".join(texts[:2])),
    ]

    def once(call: object) -> None:
        with contextlib.suppress(ArithmeticError, IndexError, TypeError, ValueError):
            call()  # type: ignore[operator]

    for call in calls:
        once(call)
    gc.collect()
    gc.disable()  # no collection between the counts: a count moves by the calls alone
    try:
        for k, call in enumerate(calls):
            before = [sys.getrefcount(o) for o in watched]
            for _ in range(300):
                once(call)
            assert [sys.getrefcount(o) for o in watched] == before, k
    finally:
        gc.enable()


def test_a_word_whose_hash_drops_it_from_the_words_is_kept() -> None:
    """A word of the vocabulary list whose ``__hash__`` replaces it in the list: the word
    added to the answer stays alive (it was added borrowed, and freed once hashed)."""
    out = _child(
        """
        from memstore import _speedups
        from memstore._vocabindex import hash_string

        class Word(str):
            def __hash__(self):
                words[0] = str(self)  # the list's reference to this word dropped
                return str.__hash__(self)

        words = [Word("ab"), "abc", "b"]
        near = _speedups.neighbour_sets(
            "abd", [(0, 3)], {}, words, None, (), {hash_string("abd"): [0, 1]}
        )
        junk = [str(i) * 3 for i in range(1000)]  # reuses what was freed
        print(sorted(near[0]))
        words = [Word("abc"), "abcd", "b"]
        trigram = (ord("a") << 42) | (ord("b") << 21) | ord("c")
        fuzzy = _speedups.fuzzy_words("abc", words, None, (), {trigram: [0, 1]}, 0.0, 1.0)
        junk = [str(i) * 3 for i in range(1000)]
        print(sorted(fuzzy))
        """
    )
    assert out.splitlines() == ["['ab', 'abc']", "['abc', 'abcd']"]
