"""The host's kinds: which may be written, searched, or kept out of the working set.

The zero value restricts nothing. :func:`base_vocabulary` is the vocabulary of
X-Ray's own server, a sensible default for agent memory.

>>> v = base_vocabulary()
>>> v.validate_write("stable_fact", "low")
"kind 'stable_fact' needs confidence 'high', got 'low'"
>>> v.validate_write("episodic", "")  # doctest: +ELLIPSIS
"kind 'episodic' is not writable; writable kinds: event, hypothesis, ..."
>>> v.is_searchable("episodic"), v.is_searchable("")
(True, False)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from memstore.item import (
    KIND_EVENT,
    KIND_HYPOTHESIS,
    KIND_OPERATIONAL_PATTERN,
    KIND_STABLE_FACT,
    KIND_UNKNOWN,
    KIND_WATCH_ITEM,
    Item,
)

__all__ = ["ENGINE_KINDS", "Vocabulary", "base_vocabulary"]


@dataclass(frozen=True)
class Vocabulary:
    """The host's kinds. Empty lists mean "any"."""

    rejected: tuple[str, ...] = ()
    """Kinds a model-authored write may not use (kinds with writers of their own)."""
    writable: tuple[str, ...] = ()
    """Kinds an outside writer may write through :meth:`validate_write`; empty means any."""
    searchable: tuple[str, ...] = ()
    """Kinds a kind filter may name; empty means any."""
    non_searchable: tuple[str, ...] = ()
    """Kinds left out of an unfiltered search but valid as an explicit filter or a fetch."""
    coerce: Callable[[Item], None] | None = field(default=None, compare=False)
    """Rewrites an item's kind before validation (runs with no lock held)."""
    fact_confidence_optional: bool = False
    """Turn off the store's rule that a stable fact carries high confidence."""
    data_kinds: Callable[[str], bool] | None = field(default=None, compare=False)
    """Kinds the host keeps out of the working set (never indexed)."""

    def is_data(self, kind: str) -> bool:
        """Whether the host keeps ``kind`` out of the working set."""
        return self.data_kinds is not None and self.data_kinds(kind)

    def is_non_searchable(self, kind: str) -> bool:
        """Whether ``kind`` is left out of an unfiltered search."""
        return kind in self.non_searchable

    def is_rejected(self, kind: str) -> bool:
        """Whether a model-authored write of ``kind`` is refused."""
        return kind in self.rejected

    def is_searchable(self, kind: str) -> bool:
        """Whether ``kind`` may be named in a kind filter.

        The empty string (no filter) is deliberately not searchable, so an unset
        kind cannot pass a check written the wrong way round.
        """
        if not kind:
            return False
        return not self.searchable or kind in self.searchable or kind in self.non_searchable

    def validate_search_kind(self, kind: str) -> str:
        """Why a kind filter is refused, or ``""``; empty means every kind and is valid."""
        if not kind or self.is_searchable(kind):
            return ""
        names = ", ".join(sorted({*self.searchable, *self.non_searchable}))
        return f"kind filter {kind!r} names no searchable kind; searchable kinds: {names}"

    def validate_write(self, kind: str, confidence: str) -> str:
        """Why an outside writer may not write this, or ``""``.

        A kind from the writable list (and not rejected), and high confidence on
        a stable fact: a fact that is stable is one the writer is sure of.
        """
        if not kind:
            return "kind is required"
        if self.is_rejected(kind) or (self.writable and kind not in self.writable):
            names = ", ".join(sorted(self.writable)) or "any kind not rejected"
            return f"kind {kind!r} is not writable; writable kinds: {names}"
        if kind == KIND_STABLE_FACT and confidence != "high":
            return f"kind {kind!r} needs confidence 'high', got {confidence!r}"
        return ""


_KNOWLEDGE = (
    KIND_STABLE_FACT,
    KIND_OPERATIONAL_PATTERN,
    KIND_WATCH_ITEM,
    KIND_HYPOTHESIS,
    KIND_UNKNOWN,
    KIND_EVENT,
)


ENGINE_KINDS = _KNOWLEDGE
"""The kinds the engine gives rules of its own (confidence, deadlines, event dates)."""


_SYSTEM_CONFIGURATION = "system_configuration"
"""The kind of the server's own configuration cells: a data kind, never indexed."""


def base_vocabulary() -> Vocabulary:
    """The kinds X-Ray's own server uses.

    Outside writers may write the six engine kinds; ``episodic`` and
    ``mental_map`` are written by the server itself (searchable, not writable).
    A ``system_configuration`` cell is never indexed (a data kind, read by id),
    so it is left out of the searchable list on purpose: a kind filter naming
    it could only return nothing, and :meth:`Vocabulary.validate_search_kind`
    refuses it. (The vector index embeds what it is given: a host that writes
    such cells through a store with a vector index marks them ``no_embed``.)

    >>> v = base_vocabulary()
    >>> v.is_searchable("system_configuration"), v.is_data("system_configuration")
    (False, True)
    """
    return Vocabulary(
        rejected=("episodic", "mental_map", _SYSTEM_CONFIGURATION),
        writable=_KNOWLEDGE,
        searchable=(*_KNOWLEDGE, "episodic", "mental_map"),
        data_kinds=_is_system_configuration,
    )


def _is_system_configuration(kind: str) -> bool:
    return kind == _SYSTEM_CONFIGURATION
