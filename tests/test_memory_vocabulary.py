"""Memory's search obeys the vocabulary's list of searchable kinds.

With ``Vocabulary(searchable=[...])`` a kind filter that names no searchable
kind (a typo, a kind the host never indexes) used to answer ``[]``: no results,
indistinguishable from "nothing matches". It is refused now, naming the
kinds that may be asked for, as ``Vocabulary.validate_search_kind`` says.
"""

from __future__ import annotations

import pytest

from memstore import Config, InvalidItemError, Memory, Vocabulary


@pytest.fixture
def mem() -> Memory:
    vocabulary = Vocabulary(searchable=("note", "stable_fact"), non_searchable=("identity",))
    m = Memory(embedder=None, config=Config(vocabulary=vocabulary))
    m.add("the gateway times out after 30 s")
    m.add("the agent is called Ada; the gateway is hers", kind="identity")
    return m


@pytest.mark.parametrize("search", ["search", "search_full"])
def test_a_kind_filter_the_vocabulary_cannot_search_is_refused(mem: Memory, search: str) -> None:
    with pytest.raises(InvalidItemError, match="'notes' names no searchable kind") as err:
        getattr(mem, search)("gateway", kind="notes")
    assert "note, stable_fact" in str(err.value)


def test_searchable_and_non_searchable_kinds_may_be_named(mem: Memory) -> None:
    assert [h.item.kind for h in mem.search("gateway", kind="note")] == ["note"]
    assert [h.item.kind for h in mem.search("gateway", kind="identity")] == ["identity"]
    assert mem.search("gateway", kind="stable_fact") == []  # searchable, nothing of it
    assert [h.item.kind for h in mem.search("gateway")] == ["note"]  # identity: asked by name


def test_any_kind_may_be_named_when_the_vocabulary_lists_none() -> None:
    with Memory(embedder=None) as mem:
        mem.add("the gateway times out after 30 s")
        assert mem.search("gateway", kind="notes") == []
