"""Vocabulary and base_vocabulary(): what the seed says of the host's kinds."""

from __future__ import annotations

from memstore import Config, Item, Store, Vocabulary, base_vocabulary
from memstore.vocabulary import ENGINE_KINDS


def test_the_zero_vocabulary_restricts_nothing() -> None:
    v = Vocabulary()
    assert v.is_searchable("anything") and not v.is_searchable("")
    assert v.validate_search_kind("") == v.validate_search_kind("anything") == ""
    assert v.validate_write("anything", "") == ""
    assert not v.is_rejected("anything") and not v.is_non_searchable("anything")
    assert not v.is_data("anything")


def test_a_non_searchable_kind_is_still_a_valid_filter() -> None:
    v = Vocabulary(searchable=("note",), non_searchable=("prompt",))
    assert v.is_searchable("prompt") and v.is_non_searchable("prompt")
    assert v.validate_search_kind("prompt") == ""
    assert "names no searchable kind" in v.validate_search_kind("other")


def test_base_vocabulary_writable_and_searchable_kinds() -> None:
    v = base_vocabulary()
    for kind in ENGINE_KINDS:
        assert v.validate_write(kind, "high") == "", kind
        assert v.is_searchable(kind), kind
    # Written by the server itself: searchable, not writable.
    for kind in ("episodic", "mental_map"):
        assert v.is_searchable(kind) and v.validate_search_kind(kind) == ""
        assert "not writable" in v.validate_write(kind, "")
    assert "needs confidence 'high'" in v.validate_write("stable_fact", "low")


def test_base_vocabulary_leaves_system_configuration_out_of_search() -> None:
    # The seed: a system_configuration cell is never indexed, so the kind is
    # left out of the searchable list on purpose (a filter on it could only
    # return nothing).
    v = base_vocabulary()
    assert not v.is_searchable("system_configuration")
    assert "names no searchable kind" in v.validate_search_kind("system_configuration")
    assert "not writable" in v.validate_write("system_configuration", "")
    assert v.is_data("system_configuration")
    store = Store(Config(vocabulary=v))
    cfg = store.upsert(Item(kind="system_configuration", title="retention days 30"))
    assert not store.indexed(cfg.id)
    assert store.keyword_search("retention days") == []
    assert store.get(cfg.id) is not None  # read by id
