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
