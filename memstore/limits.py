"""Every size the engine accepts, in one place: what an item and a call may carry.

The engine refuses anything past these bounds with
:class:`~memstore.errors.InvalidItemError` and changes nothing; adapters (the
HTTP server, an MCP tool, a host's own layer) import the same names, so an
input refused at the front door is the input the engine would refuse, and
the numbers are documented once (``docs/concepts.md``, "Limits"). Lengths
are in characters (code points), as Python's ``len`` counts them; text must
be valid Unicode (no lone surrogates, which no UTF-8 input can hold).

>>> MAX_CONTENT_CHARS
100000
"""

from __future__ import annotations

from typing import Final

from memstore.item import MAX_MODEL_LINKS

__all__ = [
    "CONTEXT_REACH",
    "MAX_CONTENT_CHARS",
    "MAX_CONTEXT_DEPTH",
    "MAX_DATA_CHARS",
    "MAX_DATA_KEYS",
    "MAX_DATA_KEY_CHARS",
    "MAX_EMBED_QUERIES",
    "MAX_EVENT_DATE_CHARS",
    "MAX_ID_CHARS",
    "MAX_KIND_CHARS",
    "MAX_LINKS",
    "MAX_NAME_CHARS",
    "MAX_PARTITION_TAG_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_REASON_CHARS",
    "MAX_REFS",
    "MAX_REF_CHARS",
    "MAX_RESULTS",
    "MAX_SUBJECT_CHARS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "MAX_TITLE_CHARS",
    "SKIPPED_READS",
    "SPREAD_REACH",
    "adapter_cap",
]

# ------------------------------------------------------------------ an item

MAX_ID_CHARS: Final = 256
"""Longest id (no whitespace or control characters)."""
MAX_KIND_CHARS: Final = 64
"""Longest kind (letters, digits and ``_ . : / -``)."""
MAX_TITLE_CHARS: Final = 1_000
"""Longest title (a title is a one-line summary)."""
MAX_CONTENT_CHARS: Final = 100_000
"""Longest content (memory notes, not documents: chunk a document first)."""
MAX_SUBJECT_CHARS: Final = 1_000
"""Longest subject (who or what the note is about)."""
MAX_EVENT_DATE_CHARS: Final = 64
"""Longest event date (``YYYY-MM-DD`` or RFC 3339 fit easily)."""
MAX_TAGS: Final = 64
"""Most tags on one item (the partition and owner tags count)."""
MAX_TAG_CHARS: Final = 256
"""Longest tag."""
MAX_PARTITION_TAG_CHARS: Final = MAX_TAG_CHARS
"""Longest partition tag (``tenant/...``) on every write, those storing an item as given too.

The writes that store an item as given (``Store.put``, ``mirror``,
``reflect``) are held to the record rule rather than to the other bounds
here, but to this one too (:func:`~memstore.validate.intake_rejection`), and
so is every version an import brings in. A PostgreSQL journal indexes each
version by ``(partition, id, lsn)``, and a btree refuses an index row over
2,704 bytes (a third of an 8 kB page): a longer partition could be written
to an SQLite journal and never moved to PostgreSQL. At 256 characters the
partition (249 after ``tenant/``) takes at most 996 bytes of UTF-8 (4 a
character) and the id at most 1,024 (:data:`MAX_ID_CHARS`): with the stamp
(8) and the row's headers, about 2,050 bytes whatever the text (PostgreSQL
may compress a key, but text that does not compress is kept whole).
Journals already holding a longer one are read as they are.
"""
MAX_REFS: Final = 256
"""Most entries in ``supersedes`` and in ``evidence_refs`` (each)."""
MAX_REF_CHARS: Final = 1_000
"""Longest entry of ``supersedes`` or ``evidence_refs`` (an id, a URL, a citation)."""
MAX_LINKS: Final = MAX_MODEL_LINKS
"""Most links one item holds (the model's cap, ``MAX_MODEL_LINKS``)."""
MAX_DATA_KEYS: Final = 256
"""Most keys in ``data``."""
MAX_DATA_KEY_CHARS: Final = 256
"""Longest key in ``data``."""
MAX_DATA_CHARS: Final = 100_000
"""Most characters in ``data``, keys and values together (as much as ``content``)."""

# ------------------------------------------------------------------- a call

MAX_QUERY_CHARS: Final = 10_000
"""Longest search query or ``context`` anchor."""
MAX_NAME_CHARS: Final = 128
"""Longest partition name or user key (``partition=``, ``private_to=``, ``user=``).

Short enough that its tag (``tenant/<name>``, ``user:<key>``) fits :data:`MAX_TAG_CHARS`.
"""
MAX_RESULTS: Final = 1_000
"""Largest ``limit`` of a search or ``recent`` (and the least is 1).

An adapter may cap the results of one call lower, on purpose, with
:func:`adapter_cap`; never higher."""
MAX_EMBED_QUERIES: Final = 1_000
"""Most queries one ``embed_queries`` call embeds (each at most :data:`MAX_QUERY_CHARS`)."""
MAX_CONTEXT_DEPTH: Final = 8
"""Most hops ``context`` follows links (and the least is 1)."""
CONTEXT_REACH: Final = 10_000
"""Most items a graph read reaches before it stops and says so (``complete`` false).

Spreading activation from a hub reaches every item linked to it, and from
each of those every other: unbounded, one read of a hub with 100,000 spokes
costs seconds. ``Memory.context`` and ``context_within``, a MemoryProtocol
recall in mode ``graph`` and the MCP ``related`` tool all stop here; under it
their answers are the whole walk's. An adapter may stop sooner, on purpose
(the inspector's Related panel reads 1,000), never later."""
SPREAD_REACH: Final = 1_000
"""Most linkers one spreading pass of a search reads (``SearchConfig.spread_relations``).

A candidate lends part of its score along its own links (a few) and along
the links of the items linking to it, which may be a hundred thousand: read
for every query, a hub found by a search cost seconds. Candidates lend in
score order (ties by id) until this many linkers, of any relation or state,
have been read; the one that would pass it lends to its first linkers by id
up to the bound, those after it along their own links alone
(:meth:`Store.neighbours <memstore.store.Store.neighbours>`, ``reach``).
Under the bound the answer is the unbounded one, on both search paths.
Smaller than :data:`CONTEXT_REACH`: a search runs far more often than a
graph read, and a few results have no use for ten thousand loans."""
SKIPPED_READS: Final = 4
"""Items a bounded graph walk may read and refuse, per item it may reach.

A walk for one tenant passes only through that tenant's items
(``Store.traverse_within``'s ``through``); the others it meets are read and
refused. A hub linked from a hundred thousand items of other partitions would
cost all of them: past this many times its ``reach`` refused, the walk stops
there and says it is incomplete."""
MAX_REASON_CHARS: Final = 1_000
"""Longest reason given to ``refute``."""


def adapter_cap(cap: int) -> int:
    """``cap``, an adapter's own smaller bound on the results of one call, checked here.

    The engine answers up to :data:`MAX_RESULTS` results per call. An adapter
    may answer fewer on purpose (a model reads an MCP tool's answer whole;
    seed 002 fixes Mind Layer's ``limit`` at 1-100), and then it names the
    cap, documents it on its page under ``docs/`` with the reason, and refuses
    a request past it with an error naming it (never cutting it down quietly).
    Its constant is defined through this function, so a cap looser than the
    engine's cannot be defined (``ValueError`` on import, even under ``-O``).

    >>> adapter_cap(100)
    100
    >>> adapter_cap(MAX_RESULTS + 1)
    Traceback (most recent call last):
    ...
    ValueError: an adapter's cap on results must be 1 to MAX_RESULTS (1000), not 1001
    """
    if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= MAX_RESULTS:
        raise ValueError(
            f"an adapter's cap on results must be 1 to MAX_RESULTS ({MAX_RESULTS}), not {cap!r}"
        )
    return cap
