"""Each public entry point refuses a wrong type or size with a MemstoreError, changing nothing.

One test per defect the adversarial probe found (before, each raised a
built-in error from deep inside, or, worse, succeeded): lone surrogates,
``limit`` of the wrong type or sign, a bare string where a list belongs, an
unhashable id, a folder that cannot be created, and fields far past any
sensible size. ``tests/adversarial/test_api_fuzz.py`` drives every method
with arbitrary values on top.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import math
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memstore.limits as limits
from memstore import AsyncMemory, Memory
from memstore.errors import InvalidItemError, JournalError, MemstoreError

DOCS = Path(__file__).resolve().parents[1] / "docs"
LONE = "caf\udce9"


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "mem", embedder="hash") as m:
        m.add("the billing service runs in eu-west-1", id="billing", partition="acme")
        yield m


def snapshot(mem: Memory) -> str:
    buf = io.StringIO()
    mem.export(buf)
    return buf.getvalue() + repr(sorted(it.id for it in mem.store.items()))


def refused(mem: Memory, call: Callable[[], Any], match: str) -> None:
    """``call`` raises InvalidItemError matching ``match`` and leaves ``mem`` as it was."""
    before = snapshot(mem)
    with pytest.raises(InvalidItemError, match=match):
        call()
    assert snapshot(mem) == before


@pytest.mark.parametrize(
    "fields",
    [
        {"title": LONE},
        {"subject": LONE},
        {"tags": [LONE]},
        {"data": {"k": LONE}},
        {"data": {LONE: "v"}},
        {"evidence_refs": [LONE]},
    ],
)
def test_lone_surrogates_are_refused_in_every_field(mem: Memory, fields: dict[str, Any]) -> None:
    refused(mem, lambda: mem.add("a note", **fields), "lone surrogate")
    refused(mem, lambda: mem.update("billing", **fields), "lone surrogate")


def test_lone_surrogates_are_refused_in_text_and_queries(mem: Memory) -> None:
    refused(mem, lambda: mem.add(LONE), "lone surrogate")
    refused(mem, lambda: mem.add_many(["fine", LONE]), "entry 1: .*lone surrogate")
    refused(mem, lambda: mem.search(LONE), "query .*lone surrogate")
    refused(mem, lambda: mem.search_full("x", kind=LONE), "kind .*lone surrogate")
    refused(mem, lambda: mem.context(LONE), "anchor .*lone surrogate")
    refused(mem, lambda: mem.get(LONE), "id .*lone surrogate")
    refused(mem, lambda: mem.add("x", partition=LONE), "partition .*lone surrogate")


@pytest.mark.parametrize("limit", ["5", None, 2.5, math.nan, math.inf, True, [5]])
def test_search_limit_must_be_a_whole_number(mem: Memory, limit: object) -> None:
    refused(mem, lambda: mem.search("billing", limit=limit), "limit must be a whole number")  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0, -1, limits.MAX_RESULTS + 1])
def test_limits_out_of_range_are_refused(mem: Memory, limit: int) -> None:
    refused(mem, lambda: mem.search("billing", limit=limit), "limit must be between 1 and")
    refused(mem, lambda: mem.recent(limit=limit), "limit must be between 1 and")
    assert len(mem.recent(limit=limits.MAX_RESULTS)) == 1


def test_a_string_is_not_a_list(mem: Memory) -> None:
    refused(mem, lambda: mem.add("note", tags="abc"), "tags must be a list of text")
    refused(mem, lambda: mem.add_many("abc"), "items must be a list")  # type: ignore[arg-type]
    refused(mem, lambda: mem.add_many(None), "items must be a list")  # type: ignore[arg-type]
    refused(mem, lambda: mem.refute("billing", "wrong", "abc"), "evidence must be a list")
    refused(mem, lambda: mem.purge("billing"), "expected a list of ids")
    assert mem.add("note", tags=("a", "b")).tags == ["a", "b"]  # a tuple is a list of text


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stale_after", 0),  # was a 1970 deadline: the note was stale as it was added
        ("stale_after", 30),  # days? no: 30 seconds after 1970
        ("stale_after", "30"),
        ("stale_after", 2.5),
        ("stale_after", True),
        ("created_at", "2025"),  # read as 2025 seconds after 1970
        ("created_at", -1),
        ("updated_at", "1.7e9"),
    ],
)
def test_a_number_is_not_a_time(mem: Memory, field: str, value: object) -> None:
    refused(mem, lambda: mem.add("a deadline", **{field: value}), f"^{field} must be an aware")
    refused(mem, lambda: mem.update("billing", **{field: value}), f"^{field} must be an aware")
    entry = {"text": "a deadline", field: value}
    refused(mem, lambda: mem.add_many([entry]), f"^entry 0: {field} must be an aware")


def test_a_time_as_text_or_datetime_is_still_taken(mem: Memory) -> None:
    soon = "2999-01-01T00:00:00Z"
    assert mem.add("a far deadline", stale_after=soon).status == "active"
    later = dt.datetime(2999, 6, 1, tzinfo=dt.UTC)
    assert mem.update("billing", stale_after=later).stale_after == later


@pytest.mark.parametrize("name", ["get", "delete", "expire", "update", "history"])
def test_an_id_must_be_text(mem: Memory, name: str) -> None:
    refused(mem, lambda: getattr(mem, name)(["billing"]), "id must be text, got list")


def test_flags_and_weights_are_checked(mem: Memory) -> None:
    other = mem.add("the deploy is on Friday")
    refused(mem, lambda: mem.add("x", dedup="no"), "dedup must be True or False")
    refused(mem, lambda: mem.search("x", explain=1), "explain must be True or False")  # type: ignore[arg-type]
    for weight in (math.nan, math.inf, 0.0, 1.5, "1"):
        refused(mem, lambda w=weight: mem.link("billing", other.id, weight=w), "weight must")  # type: ignore[misc]
    refused(mem, lambda: mem.context("billing", max_depth=0), "max_depth must be between")


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"subject": "s" * 10_000_000}, "subject is 10000000 characters"),
        ({"data": {"k": "v" * 10_000_000}}, "data holds 10000001 characters"),
        ({"tags": ["t" * 1_000_000]}, "is 1000000 characters; at most 256"),
        ({"evidence_refs": ["r"] * (limits.MAX_REFS + 1)}, "evidence_refs has 257 entries"),
        ({"data": {str(i): "" for i in range(limits.MAX_DATA_KEYS + 1)}}, "data has 257 keys"),
    ],
)
def test_huge_fields_are_refused(mem: Memory, fields: dict[str, Any], match: str) -> None:
    refused(mem, lambda: mem.add("a note", **fields), match)


def test_sizes_at_the_limit_are_accepted(mem: Memory) -> None:
    item = mem.add(
        "a note at every limit",
        subject="s" * limits.MAX_SUBJECT_CHARS,
        tags=["t" * limits.MAX_TAG_CHARS],
        data={"k": "v" * (limits.MAX_DATA_CHARS - 1)},
    )
    assert mem.get(item.id) == item
    name = "p" * limits.MAX_NAME_CHARS  # its tag (tenant/..., user:...) fits MAX_TAG_CHARS
    mine = mem.add("a private note", partition=name, private_to=name)
    assert mine.id in [h.item.id for h in mem.search("private note", partition=name, user=name)]
    refused(mem, lambda: mem.add("x", partition=name + "p"), "partition is 129 characters")


def test_import_refuses_a_string_and_lines_that_are_not_text(mem: Memory) -> None:
    refused(mem, lambda: mem.import_("export.ndjson"), "fp must be a file opened for reading")  # type: ignore[arg-type]
    refused(mem, lambda: mem.import_(io.BytesIO(b'{"format": 1}\n')), "line 1: expected text")  # type: ignore[arg-type]
    refused(mem, lambda: mem.export("out.ndjson"), "fp must be a file opened for writing")  # type: ignore[arg-type]


def test_export_refuses_a_binary_file(mem: Memory, tmp_path: Path) -> None:
    text = "fp must be a file opened for writing text"
    refused(mem, lambda: mem.export(io.BytesIO()), text)  # type: ignore[arg-type]
    with open(tmp_path / "out.ndjson", "wb") as binary:  # 'wb' where 'w' was meant
        refused(mem, lambda: mem.export(binary), text)  # type: ignore[arg-type]
    assert (tmp_path / "out.ndjson").read_bytes() == b""


def test_a_folder_that_cannot_be_made_is_a_journal_error(tmp_path: Path) -> None:
    in_the_way = tmp_path / "file"
    in_the_way.write_text("not a folder")
    with pytest.raises(JournalError, match="cannot create the memory folder"):
        Memory(in_the_way / "mem", embedder=None)
    with pytest.raises(MemstoreError, match="path must be a folder path"):
        Memory(42, embedder=None)  # type: ignore[arg-type]


def test_a_read_only_parent_is_a_journal_error(tmp_path: Path) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    # chmod stops ordinary users; root ignores it, so there the folder is made
    # immutable instead (ext4's chattr +i binds root too), as tests/test_journal.py does.
    immutable = os.geteuid() == 0
    if immutable:
        subprocess.run(["chattr", "+i", str(parent)], check=True)
    else:
        parent.chmod(0o500)
    try:
        with pytest.raises(JournalError, match="cannot create the memory folder"):
            Memory(parent / "mem", embedder=None)
        assert list(parent.iterdir()) == []
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(parent)], check=True)
        else:
            parent.chmod(0o700)


def test_async_memory_checks_the_same_way(mem: Memory) -> None:
    amem = AsyncMemory(memory=mem)

    async def main() -> None:
        with pytest.raises(InvalidItemError, match="limit must be a whole number"):
            await amem.search("billing", limit="5")
        with pytest.raises(InvalidItemError, match="tags must be a list"):
            await amem.add("note", tags="abc")
        with pytest.raises(InvalidItemError, match="id must be text"):
            await amem.get(["billing"])  # type: ignore[arg-type]

    before = snapshot(mem)
    asyncio.run(main())
    assert snapshot(mem) == before


def test_every_limit_is_documented() -> None:
    text = (DOCS / "concepts.md").read_text(encoding="utf-8")
    section = text[text.index("## Limits") :]
    for name in limits.__all__:
        value = getattr(limits, name)
        if callable(value):  # adapter_cap: the rule for an adapter's own cap, not a limit
            continue
        row = re.search(rf"`{name}`\s*\|\s*([\d,]+)\s*\|", section)
        assert row is not None, f"{name} is not in the Limits table of docs/concepts.md"
        assert int(row.group(1).replace(",", "")) == value, name


def test_async_memory_refuses_what_is_not_a_memory() -> None:
    with pytest.raises(MemstoreError, match="memory= takes a Memory"):
        AsyncMemory(memory="data/")  # type: ignore[arg-type]
