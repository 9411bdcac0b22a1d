"""A batch's words counted and numbered: the lexicon's hottest write loop, pure or compiled.

:meth:`~memstore.lexical.Lexicon.index_many` hands every batch of documents
to :func:`count_docs`: each document's distinct words (title first) are
counted into the vocabulary (word -> live documents), and numbered into the
content and title postings' logs (:mod:`memstore._postings`). It is the only
per-word Python loop of a write that is not a split, so it is the one an
optional C extension, ``memstore._speedups`` (``memstore/_speedups.c``),
replaces: the same numbers, counts and logs, without a set per document.

The extension is built by ``pip install`` where a C compiler and the Python
headers are at hand, and skipped (with a warning) where they are not; the
pure loop here is then used, and it stays the oracle the compiled one is
tested against (``tests/test_speedups.py``). ``MEMSTORE_PURE_PYTHON=1`` in
the environment at import selects the pure loop even where the extension is
built; :func:`pure_python` does it for the lexicons made inside it (tests).

The only difference between the two is one no reader sees: the order in
which words new to the batch are numbered and enter the vocabulary (set
order here, first occurrence there). Every lookup is by word; the
lexicon's answers do not depend on it.

>>> from collections import Counter
>>> from memstore._postings import Postings
>>> df, content, title = Counter(), Postings(), Postings()
>>> new = count_docs([("a", ["api"], ["api", "timeout", "api"])], 0, df, content, title)
>>> sorted(new), dict(df), content.pending, title.pending
(['api', 'timeout'], {'api': 1, 'timeout': 1}, 2, 1)
"""

from __future__ import annotations

import os
from collections import Counter, _count_elements  # type: ignore[attr-defined]
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import chain, islice
from types import ModuleType

from memstore._postings import Postings

__all__ = ["compiled", "count_docs", "pure_python", "speedups"]

Doc = tuple[str, list[str], list[str]]


def _load() -> ModuleType | None:
    if os.environ.get("MEMSTORE_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from memstore import _speedups
    except ImportError:  # not built (no compiler at install): the pure loop
        return None
    return _speedups


speedups: ModuleType | None = _load()
"""The compiled module in use, or ``None`` (the pure loop). Read at each call."""


def compiled() -> bool:
    """Whether the compiled loop is in use (built, and not switched off)."""
    return speedups is not None


@contextmanager
def pure_python() -> Iterator[None]:
    """Use the pure loop inside the ``with`` (not thread-safe: a test's switch)."""
    global speedups
    saved, speedups = speedups, None
    try:
        yield
    finally:
        speedups = saved


def count_docs(
    docs: Sequence[Doc], start: int, df: Counter[str], content: Postings, title: Postings
) -> list[str]:
    """Count and number the words of ``docs`` (at slots ``start``, ``start + 1``, ...).

    ``df`` gains one per distinct word of each document; ``content`` logs
    each document's distinct words (its title's included) and ``title`` its
    distinct title words. Returns the words new to ``df`` (its last keys, in
    some order).
    """
    native = speedups
    if native is None:
        titles = list(map(set, [d[1] for d in docs]))
        uniqs = list(map(set.union, titles, [d[2] for d in docs]))
        known = len(df)
        # Counter.update's C loop, without its type checks, over the whole batch.
        _count_elements(df, chain.from_iterable(uniqs))
        content.add_docs(start, uniqs)
        title.add_docs(start, titles)
        # The words new to the vocabulary are the last keys counted.
        return list(islice(reversed(df), len(df) - known)) if len(df) != known else []
    docs = docs if isinstance(docs, list) else list(docs)
    new: list[str] = native.count_docs(docs, df, *content.log_lists(), *title.log_lists())
    content.logged(start, len(docs))
    title.logged(start, len(docs))
    return new
