"""Names a reader compares by eye: what a new id, tag or partition may hold; names
stored before these rules are used as they are.

An id, a tag and a partition name are matched exactly, but read by eye (in the
inspector, a terminal, a log). ``"inv\\u200b-42"`` (a zero-width space) reads as
``"inv-42"`` and a bidi control reorders what is shown around it: two ids that
look the same named two items. ``" x"`` and ``"x"`` were two partitions that
read the same. An id refused every control character already (it holds no
whitespace), but a tag took any but ``\\n``, ``\\r`` and NUL: ``"on\\tcall"``
reads as ``"on call"``, and ``"ops\\x1b[8m"`` hides what a terminal prints after
it. New writes refuse all of these, naming the code point, and change nothing.
A journal written before these rules (here: by ``Store.put``, which takes a
record as it is, and so wrote such items before and still does) opens,
restores, exports, imports, and its items are read, searched, updated, linked
to and deleted as they are, on every backend.
"""

from __future__ import annotations

import io
import json
import re
import unicodedata
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Memory, Store
from memstore.cli import main
from memstore.errors import InvalidItemError
from memstore.item import Item
from memstore.journal import JournalBase
from memstore.tags import PARTITION_TAG_PREFIX, sanitize_tag_value, stamp_author_tag
from memstore.validate import format_character, new_id_rejection, validate_base
from memstore.vocabulary import Vocabulary
from tests.journals import Place, memory_state, open_journal
from tests.mcp_harness import in_process

FORMATS = [
    "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",  # bidi embeddings and overrides
    "\u2066", "\u2067", "\u2068", "\u2069",  # bidi isolates
    "\u200b", "\u200c", "\u200d", "\u200e", "\u200f",  # zero-width, marks
    "\u2060", "\ufeff", "\u00ad", "\U000e0041",  # word joiner, BOM, soft hyphen, tag A
]  # fmt: skip
CONTROLS = ["\t", "\x01", "\x0b", "\x1b", "\x7f", "\x80", "\x85", "\x9b", "\x9f"]
LEGACY_ID = "inv\u200b-42"  # reads as "inv-42"
LEGACY_TAG = "urgent\u2060"
LEGACY_CONTROL_TAG = "on\tcall"
LEGACY_PARTITION = "ops\x1b[0m"
PADDED = " ops"


# -- format characters: ids, tags, partitions


@pytest.mark.parametrize("ch", FORMATS, ids=lambda ch: f"U+{ord(ch):04X}")
def test_an_id_with_a_format_character_is_refused_naming_it_and_nothing_changes(
    tmp_path: Path, ch: str
) -> None:
    with Memory(tmp_path / "data", embedder=None) as mem:
        mem.add("already here", id="inv-42")
        before = memory_state(mem)
        with pytest.raises(InvalidItemError) as refused:
            mem.add("the twin", id=f"inv{ch}-42")
        code = f"U+{ord(ch):04X}"
        assert f"holds a format character ({code} " in refused.value.reason
        assert unicodedata.name(ch) in refused.value.reason
        assert refused.value.reason.startswith(f"id {f'inv{ch}-42'!r} ")
        assert memory_state(mem) == before
        with pytest.raises(InvalidItemError, match=rf"^entry 1: .*U\+{ord(ch):04X}"):  # a batch
            mem.add_many([{"text": "fine", "id": "ok-1"}, {"text": "bad", "id": f"x{ch}"}])
        assert memory_state(mem) == before


@pytest.mark.parametrize("ch", FORMATS, ids=lambda ch: f"U+{ord(ch):04X}")
def test_a_tag_or_partition_with_a_format_character_is_refused(ch: str) -> None:
    with Memory(embedder=None) as mem:
        with pytest.raises(InvalidItemError, match=r"tag .* holds a format character"):
            mem.add("x", tags=[f"urgent{ch}"])
        with pytest.raises(InvalidItemError, match=f"U\\+{ord(ch):04X}"):
            mem.add("x", partition=f"ops{ch}")
        assert mem.stats().items == 0


def test_a_zero_width_joiner_inside_an_emoji_is_part_of_it() -> None:
    """The decision on U+200D: taken between two pictographs (one emoji), refused elsewhere."""
    technologist = "\U0001f469\u200d\U0001f4bb"  # woman technologist
    rainbow = "\U0001f3f3\ufe0f\u200d\U0001f308"  # rainbow flag (a variation selector first)
    toned = "\U0001f469\U0001f3fd\u200d\U0001f4bb"  # with a skin tone
    with Memory(embedder=None) as mem:
        for emoji in (technologist, rainbow, toned):
            assert mem.add("x", id=f"team-{emoji}", tags=[emoji]).id == f"team-{emoji}"
        for joined in ("a\u200db", f"{technologist[0]}\u200d", "\u200d\U0001f4bb"):
            with pytest.raises(InvalidItemError, match="U\\+200D ZERO WIDTH JOINER"):
                mem.add("x", id=joined)


@settings(max_examples=200, deadline=None)
@given(
    st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=8),
    st.characters(categories=["Cf"]),
    st.integers(0, 8),
)
def test_any_id_with_a_format_character_inserted_is_refused(text: str, ch: str, at: int) -> None:
    id = text[:at] + ch + text[at:]
    joins_emoji = ch == "\u200d" and not format_character(id)
    assert new_id_rejection(text) == ""
    assert bool(new_id_rejection(id)) != joins_emoji
    why = validate_base(Vocabulary(), Item(id=id, kind="note", title="x"))
    assert bool(why) != joins_emoji
    if why:
        assert f"U+{ord(ch):04X}" in why


# -- control characters: tags (and so partitions)


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


# -- padded partition names


@pytest.mark.parametrize("name", [PADDED, "ops ", "\tops", "ops\u00a0", "\u3000ops"])
def test_a_padded_partition_name_is_refused(tmp_path: Path, name: str) -> None:
    with Memory(tmp_path / "data", embedder=None) as mem:
        mem.add("in ops", partition="ops")
        before = memory_state(mem)
        with pytest.raises(InvalidItemError) as refused:
            mem.add("in the twin", partition=name)
        assert refused.value.reason == (
            f"partition {name!r} is padded with whitespace: it would be another partition "
            "than 'ops', which reads the same; name it without the padding"
        )
        with pytest.raises(InvalidItemError, match="padded"):
            mem.add("tagged by hand", tags=[PARTITION_TAG_PREFIX + name])
        assert memory_state(mem) == before
        assert [h.item.content for h in mem.search("in", partition="ops")] == ["in ops"]


# -- names stored before these rules


def _legacy(mem_or_store: Memory | Store) -> None:
    """Write what a store took before these rules: ``Store.put`` takes a record as it is."""
    store = mem_or_store.store if isinstance(mem_or_store, Memory) else mem_or_store
    store.put(Item(id=LEGACY_ID, kind="note", title="the legacy invoice", tags=[LEGACY_TAG]))
    store.put(
        Item(id="padded-1", kind="note", title="in the padded partition",
             tags=[PARTITION_TAG_PREFIX + PADDED])
    )  # fmt: skip
    store.put(Item(id="rota-1", kind="note", title="the pager rota", tags=[LEGACY_CONTROL_TAG]))
    store.put(
        Item(id="rota-2", kind="note", title="the ops pager rota",
             tags=[PARTITION_TAG_PREFIX + LEGACY_PARTITION])
    )  # fmt: skip


def _only(export: str, id: str) -> str:
    """The export ``export`` cut down to the item ``id``: its header, its line, its end."""
    lines = export.splitlines()
    line = next(ln for ln in lines[1:-1] if json.loads(ln)["id"] == id)
    return "\n".join([lines[0], line, json.dumps({"end": True, "items": 1})]) + "\n"


def test_a_journal_holding_such_names_opens_and_its_items_are_used_as_they_are(
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
        assert store.get(LEGACY_ID).tags == [LEGACY_TAG]  # type: ignore[union-attr]
        # Updated as they are: the id, the tags and the partitions were stored before.
        old = store.get(LEGACY_ID)
        assert old is not None
        store.upsert(old.model_copy(update={"title": "the legacy invoice, paid"}))
        padded = store.get("padded-1")
        assert padded is not None
        store.upsert(padded.model_copy(update={"content": "more"}))
        rota = store.get("rota-1")
        assert rota is not None and rota.tags == [LEGACY_CONTROL_TAG]
        store.upsert(rota.model_copy(update={"title": "the pager rota, 2026"}))
        # A tag added beside one stored before is held to the rule.
        with pytest.raises(InvalidItemError, match="U\\+001B"):
            store.upsert(rota.model_copy(update={"tags": [LEGACY_CONTROL_TAG, "new\x1b"]}))
        assert store.get("rota-1").tags == [LEGACY_CONTROL_TAG]  # type: ignore[union-attr]
        # Linked to, from a new item and from the old one.
        store.upsert(Item(id="note-1", kind="note", title="see the invoice",
                          links=[{"to_id": LEGACY_ID, "relation": "explains"}]))  # fmt: skip
        assert store.get("note-1").links[0].to_id == LEGACY_ID  # type: ignore[union-attr]
        # Exported, and imported into a new journal.
        out = io.StringIO()
        journal.export(None, out)
        target = open_journal(tmp_path / "imported.db")
        imported = Store()
        target.attach(imported)
        target.import_(io.StringIO(out.getvalue()))
        assert imported.get(LEGACY_ID).title == "the legacy invoice, paid"  # type: ignore[union-attr]
        assert imported.get("padded-1").tags == [PARTITION_TAG_PREFIX + PADDED]  # type: ignore[union-attr]
        assert imported.get("rota-1").title == "the pager rota, 2026"  # type: ignore[union-attr]
        assert imported.get("rota-2").tags == [PARTITION_TAG_PREFIX + LEGACY_PARTITION]  # type: ignore[union-attr]
        target.close()
        # With the write rules asked (a file from elsewhere), each such name is refused.
        for n, (id, why) in enumerate(
            [
                (LEGACY_ID, "format character"),
                ("padded-1", "padded"),
                ("rota-1", "no control character in a tag"),
                ("rota-2", "no control character in a tag"),
            ]
        ):
            fresh = open_journal(tmp_path / f"checked-{n}.db")
            fresh.attach(Store())
            with pytest.raises(InvalidItemError, match=why):
                fresh.import_(io.StringIO(_only(out.getvalue(), id)), check_rules=True)
            fresh.close()
        # Deleted.
        for id in (LEGACY_ID, "padded-1", "rota-1", "rota-2"):
            assert store.delete(id)
            assert store.get(id) is None
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
        head = mem.stats().head
        assert head is not None
        assert [it.id for it in mem.as_of(head, partition=LEGACY_PARTITION)] == ["rota-2"]
        with pytest.raises(InvalidItemError, match="U\\+001B"):
            mem.add("a new rota", partition=LEGACY_PARTITION)


def test_the_cli_reads_exports_imports_and_forgets_such_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    with Memory(data, embedder=None) as mem:
        _legacy(mem)
    base = ["--data", str(data), "--embedder", "none"]
    assert main(["get", LEGACY_ID, *base]) == 0
    assert LEGACY_ID in capsys.readouterr().out.encode().decode("unicode_escape")
    assert main(["search", "padded", "--partition", PADDED, *base]) == 0
    assert "padded-1" in capsys.readouterr().out
    export = tmp_path / "all.jsonl"
    assert main(["export", "-o", str(export), *base]) == 0
    assert (
        main(["import", str(export), "--data", str(tmp_path / "copy"), "--embedder", "none"]) == 0
    )
    assert main(["forget", LEGACY_ID, *base]) == 0
    assert main(["forget", "padded-1", "--hard", *base]) == 0
    capsys.readouterr()
    with Memory(tmp_path / "copy", embedder=None) as copy:
        assert copy.get(LEGACY_ID) is not None and copy.get("padded-1") is not None
    with Memory(data, embedder=None) as mem:
        assert mem.get(LEGACY_ID) is None and mem.history(LEGACY_ID)  # deleted, history kept
        assert mem.history("padded-1") == []


def test_memstore_add_refuses_a_padded_partition_and_makes_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    code = main(["add", "the nightly backup", "--partition", PADDED, "--data", str(data),
                 "--embedder", "none"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert err == (
        "memstore: partition ' ops' is padded with whitespace: it would be another partition "
        "than 'ops', which reads the same; name it without the padding\n"
    )
    assert not data.exists()
    assert list(tmp_path.iterdir()) == []
