"""A batch's words counted and numbered: the lexicon's hottest write loop, pure or compiled.

:meth:`~memstore.lexical.Lexicon.index_many` hands every batch of documents
to :func:`count_docs`: each document's distinct words (title first) are
counted into the vocabulary (word -> live documents), and numbered into the
content and title postings' logs (:mod:`memstore._postings`). It is the only
per-word Python loop of a write that is not a split, so it is the one an
optional C extension, ``memstore._speedups`` (``memstore/_wordcount.c``),
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
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain, islice
from types import ModuleType

from memstore._postings import Postings
from memstore.text import words, words_many

__all__ = ["TextDoc", "compiled", "count_docs", "count_texts", "padded", "pure_python", "speedups"]

Doc = tuple[str, list[str], list[str]]
TextDoc = tuple[str, str | list[str], str | list[str], Sequence[str]]
"""A document of :func:`count_texts`: its id, its title and its content (each a text or
its words, :func:`~memstore.text.words`), and words added to the content's."""


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


def padded(doc: Doc) -> str:
    """A document's words as the lexicon keeps them: one space-padded string, title first."""
    _, title, content = doc
    if title and content:
        return f" {' '.join(title)} {' '.join(content)} "
    return f" {' '.join(title or content)} " if title or content else ""


def split_docs(docs: Sequence[TextDoc]) -> list[Doc]:
    """``docs`` as :func:`count_docs` documents: texts split (together, :func:`words_many`),
    the extra words after the content's (in a new list: a writer's split is never changed)."""
    split = iter(words_many([p for d in docs for p in (d[1], d[2]) if isinstance(p, str)]))
    out: list[Doc] = []
    for id, title, content, extra in docs:
        tw = next(split) if isinstance(title, str) else title
        cw = next(split) if isinstance(content, str) else content
        out.append((id, tw, [*cw, *extra] if extra else cw))
    return out


def count_texts(
    docs: list[TextDoc],
    start: int,
    df: Counter[str],
    content: Postings,
    title: Postings,
    *,
    want_words: bool,
) -> tuple[list[str], list[str], list[int], Collection[str]]:
    """:func:`count_docs` of ``docs`` with texts not split yet: split here, on either path.

    Returns the words new to ``df``, each document's padded text (:func:`padded`)
    and title word count, and (``want_words``; else maybe empty) the batch's
    distinct words. The compiled loop (``index_texts``) splits an ASCII text
    itself, in the same pass that counts its words, so a word is made a
    string once a batch rather than once an occurrence, and its numbers are
    looked up once a batch too; other texts it hands to :func:`words`.
    """
    native = speedups
    if native is None:
        wdocs = split_docs(docs)
        texts = list(map(padded, wdocs))
        ntitles = [len(d[1]) for d in wdocs]
        new = count_docs(wdocs, start, df, content, title)
        batch: Collection[str] = ()
        if want_words:
            batch = set(chain.from_iterable(chain.from_iterable(d[1:] for d in wdocs)))
        return new, texts, ntitles, batch
    out: tuple[list[str], list[str], list[int], list[str]] = native.index_texts(
        docs, words, df, *content.log_lists(), *title.log_lists()
    )
    content.logged(start, len(docs))
    title.logged(start, len(docs))
    return out
