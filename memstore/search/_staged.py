"""A hybrid search in two steps: the lexical pass, then (with a vector, if it wants one) the rest.

:meth:`memstore.search.Searcher.hybrid_search_staged` runs a search up to the
point where it would embed its query and stops there. Its
:attr:`StagedSearch.wants_vector` says whether it would: ``False`` when the
lexical answer is confident (or there is no vector index), so the search ends
without any embedding. :meth:`StagedSearch.finish` runs the rest, with the
query's vector when the caller has it (else the search embeds the query
itself, as :meth:`~memstore.search.Searcher.hybrid_search` would), and returns
exactly what :meth:`~memstore.search.Searcher.hybrid_search` returns.

That lets a server start every search of a batch of concurrent requests,
embed in one model call only the queries that still want a vector, then
finish each (:class:`memstore.web.batching.QueryBatcher`).

>>> from memstore import Item, Store
>>> from memstore.search import SearchConfig, Searcher
>>> store = Store()
>>> _ = store.upsert(Item(id="a", kind="note", title="Deploys", content="the deploy failed"))
>>> staged = Searcher(SearchConfig(store=store)).hybrid_search_staged("deploy failed")
>>> staged.wants_vector  # no vector index here: nothing to embed
False
>>> [r.item.id for r in staged.finish()]
['a']
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from memstore.search._types import SearchResult

__all__ = ["SearchSteps", "StagedSearch"]

SearchSteps: TypeAlias = Generator[bool, npt.NDArray[np.float32] | None, list[SearchResult]]
"""A search as a generator: it yields once (whether it wants the query's vector), is
sent the vector (or ``None``), and returns its results."""


class StagedSearch:
    """A search stopped after its lexical pass; :meth:`finish` it once.

    ``steps``: the search's generator, not started yet (it is run to its pause
    here); ``check``: turns a caller's vector into the index's checked vector
    (or raises).
    """

    __slots__ = ("_check", "_steps", "wants_vector")

    def __init__(
        self, steps: SearchSteps, check: Callable[[Any], npt.NDArray[np.float32] | None]
    ) -> None:
        self._steps: SearchSteps | None = steps
        self._check = check
        self.wants_vector: bool = next(steps)
        """Whether the rest of the search uses the query's vector (it embeds it if not given)."""

    def finish(self, query_vector: npt.ArrayLike | None = None) -> list[SearchResult]:
        """The search's results. ``query_vector``: the query's embedding, or ``None``.

        A vector is checked as :meth:`~memstore.search.Searcher.hybrid_search`
        checks it (and unused when :attr:`wants_vector` is ``False``).

        :raises RuntimeError: the search was finished already.
        """
        steps, self._steps = self._steps, None
        if steps is None:
            raise RuntimeError("this staged search was finished already")
        vec = self._check(query_vector)
        try:
            steps.send(vec)
        except StopIteration as done:
            results: list[SearchResult] = done.value
            return results
        raise RuntimeError("the search yielded twice")  # pragma: no cover - a broken generator
