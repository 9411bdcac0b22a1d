"""A new tag holds no control character; tags stored before keep theirs.

An id refused every control character already (it holds no whitespace), but a
tag took any but ``\\n``, ``\\r`` and NUL: ``"on\\tcall"`` reads as
``"on call"``, and ``"ops\\x1b[8m"`` hides what a terminal prints after it.
Every write that makes a tag now refuses one, naming the code point, and
changes nothing; a journal written before (here by ``Store.put``, which takes a
record as it is) opens, and its items are read, searched, updated, exported,
imported and deleted as they are, on every backend.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Memory, Store
from memstore.errors import InvalidItemError
from memstore.item import Item
from memstore.journal import JournalBase
from memstore.tags import PARTITION_TAG_PREFIX, sanitize_tag_value, stamp_author_tag
from memstore.validate import validate_base
from memstore.vocabulary import Vocabulary
from tests.journals import Place, memory_state, open_journal
from tests.mcp_harness import in_process

CONTROLS = ["\t", "\x01", "\x0b", "\x1b", "\x7f", "\x80", "\x85", "\x9b", "\x9f"]
LEGACY_TAG = "on\tcall"
LEGACY_PARTITION = "ops\x1b[0m"


def _code(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def _said(ch: str) -> str:
    """A pattern matching the code point as a refusal names it."""
    return re.escape(_code(ch))


@pytest.mark.parametrize("ch", CONTROLS, ids=_code)
def test_a_new_tag_with_a_control_character_is_refused_naming_it_and_nothing_changes(
    tmp_path: Path, ch: str
) -> None:
    tag = f"on{ch}call"
    with Memory(tmp_path / "data", embedder=None) as mem:
        kept = mem.add("already here", tags=["oncall"])
        before = memory_state(mem)
        with pytest.raises(InvalidItemError) as refused:
            mem.add("the twin", tags=[tag])
        assert refused.value.reason == (
            f"tag {tag!r} holds a control character ({_code(ch)} {ch!r}), which is not "
            "printable: no control character in a tag"
        )
        with pytest.raises(InvalidItemError, match=rf"^entry 1: tag .*{_said(ch)}"):
            mem.add_many([{"text": "fine"}, {"text": "bad", "tags": [tag]}])
        with pytest.raises(InvalidItemError, match=_said(ch)):
            mem.add("placed", partition=f"o{ch}ps")
        with pytest.raises(InvalidItemError, match=_said(ch)):
            mem.update(kept.id, tags=["oncall", tag])
        with pytest.raises(InvalidItemError, match=_said(ch)):
            mem.store.upsert(Item(id=kept.id, kind="note", title="x", tags=[tag]))
        with pytest.raises(InvalidItemError, match=_said(ch)):
            mem.store.upsert_many([Item(kind="note", title="x", tags=[tag])])
        assert memory_state(mem) == before


def test_the_mcp_tools_refuse_one_in_a_tool_error_and_change_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        with Memory(tmp_path / "data", embedder=None) as mem:
            async with in_process(mem) as c:
                made = await c.ok("remember", {"content": "the pager rota", "tags": ["oncall"]})
                before = memory_state(mem)
                said = await c.fails("remember", {"content": "x", "tags": ["on\x1bcall"]})
                assert "U+001B" in said and "no control character in a tag" in said
                said = await c.fails("update_memory", {"id": made["id"], "tags": ["a\x7fb"]})
                assert "U+007F" in said
                assert memory_state(mem) == before

    anyio.run(main)


@settings(max_examples=200, deadline=None)
@given(
    st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=8),
    st.characters(categories=["Cc"]),
    st.integers(1, 7),
)
def test_any_tag_with_a_control_character_inside_is_refused(text: str, ch: str, at: int) -> None:
    tag = text[:at] + ch + text[at:] + "x"  # inside, never at an end (that is padding)
    why = validate_base(Vocabulary(), Item(kind="note", title="x", tags=[tag]))
    assert why.startswith(f"tag {tag[:80]!r} ")  # the NUL and newline rules say theirs
    # Grandfathered: the stored item this write replaces holds the tag already.
    stored = Item(id="a-1", kind="note", title="x", tags=[tag])
    if "\n" not in tag and "\r" not in tag and "\x00" not in tag and tag == tag.strip():
        assert validate_base(Vocabulary(), stored.model_copy(), previous=stored) == ""


def test_an_author_with_a_control_character_is_stamped_without_it() -> None:
    """The author tag is made from the caller's identity: cleaned, it never fails a write."""
    assert sanitize_tag_value("ana\x1b[2J\x7f") == "ana [2J"
    it = Item(kind="note", title="x")
    stamp_author_tag(it, "ana\tb\x85")
    assert it.tags == ["author/ana b"]
    assert validate_base(Vocabulary(), it) == ""


def _legacy(store: Store) -> None:
    """Write what a store took before this rule: ``Store.put`` takes a record as it is."""
    store.put(Item(id="rota-1", kind="note", title="the pager rota", tags=[LEGACY_TAG]))
    store.put(
        Item(id="rota-2", kind="note", title="the ops pager rota",
             tags=[PARTITION_TAG_PREFIX + LEGACY_PARTITION])
    )  # fmt: skip


def test_a_journal_holding_such_tags_opens_and_its_items_are_used_as_they_are(
    place: Place, tmp_path: Path
) -> None:
    journal: JournalBase = open_journal(place)
    store = Store()
    journal.attach(store)
    _legacy(store)
    journal.close()
    journal = open_journal(place)  # reopening restores them: no rule is asked again
    store = Store()
    journal.attach(store)
    try:
        old = store.get("rota-1")
        assert old is not None and old.tags == [LEGACY_TAG]
        # Updated, the tag kept; a tag added beside it is held to the rule.
        store.upsert(old.model_copy(update={"title": "the pager rota, 2026"}))
        with pytest.raises(InvalidItemError, match="U\\+001B"):
            store.upsert(old.model_copy(update={"tags": [LEGACY_TAG, "new\x1b"]}))
        assert store.get("rota-1").tags == [LEGACY_TAG]  # type: ignore[union-attr]
        # Exported, and imported into a new journal.
        out = io.StringIO()
        journal.export(None, out)
        target = open_journal(tmp_path / "imported.db")
        imported = Store()
        target.attach(imported)
        target.import_(io.StringIO(out.getvalue()))
        assert imported.get("rota-1").title == "the pager rota, 2026"  # type: ignore[union-attr]
        assert imported.get("rota-2").tags == [PARTITION_TAG_PREFIX + LEGACY_PARTITION]  # type: ignore[union-attr]
        target.close()
        # With the write rules asked (a file from elsewhere), the tags are refused.
        fresh = open_journal(tmp_path / "checked.db")
        fresh.attach(Store())
        with pytest.raises(InvalidItemError, match="no control character in a tag"):
            fresh.import_(io.StringIO(out.getvalue()), check_rules=True)
        fresh.close()
        # Deleted.
        assert store.delete("rota-1") and store.delete("rota-2")
        assert store.get("rota-1") is None
    finally:
        journal.close()


def test_reads_name_such_a_partition_or_subject_as_it_is(tmp_path: Path) -> None:
    """A read is no write: a filter naming a tag stored before still finds its items.

    A new item placed in that partition is a write that makes the tag, and is refused.
    """
    with Memory(tmp_path / "data", embedder=None) as mem:
        _legacy(mem.store)
        mem.store.put(
            Item(id="pay-1", kind="note", title="the payments pager rota",
                 tags=["service/pay\tments"])
        )  # fmt: skip
        found = mem.search("pager rota", partition=LEGACY_PARTITION)
        assert [h.item.id for h in found if h.item.id == "rota-2"] == ["rota-2"]
        found = mem.search("pager rota", subject="pay\tments")
        assert [h.item.id for h in found] == ["pay-1"]
        assert [it.id for it in mem.as_of(mem.stats().head, partition=LEGACY_PARTITION)] == [
            "rota-2"
        ]
        with pytest.raises(InvalidItemError, match="U\\+001B"):
            mem.add("a new rota", partition=LEGACY_PARTITION)
