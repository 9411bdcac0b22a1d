"""A damaged export is refused whole: one line naming where, and nothing imported.

An import reads and checks the whole file before it writes anything, so a
bad line anywhere (not JSON, a value no journal could read back, and with
``check_rules=True`` an item a write would refuse) leaves the target journal
exactly as it was: no item before the bad line is imported either. The reason
is one line naming the file's line, as the CLI prints it.

Tests taking ``place`` run against an SQLite file and a PostgreSQL schema.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memstore import Item, Memory, Store, ThoughtLink
from memstore.errors import InvalidItemError
from memstore.journal import JournalBase
from tests.journals import Place, open_journal

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def target(place: Place) -> Iterator[tuple[JournalBase, Store]]:
    """The journal imported into, already holding an item of its own."""
    journal, store = open_journal(place), Store()
    journal.attach(store)
    store.upsert(Item(id="mine", kind="note", title="already here"))
    try:
        yield journal, store
    finally:
        journal.close()


def _export_lines(tmp_path: Path) -> list[str]:
    """An export of three linked notes: header, items ``a``, ``b``, ``c`` (lines 2-4), end."""
    journal, store = open_journal(tmp_path / "source.db"), Store()
    journal.attach(store)
    try:
        for id in ("a", "b", "c"):
            store.upsert(Item(id=id, kind="note", title=f"note {id}", tags=["t"]))
        store.add_link("a", ThoughtLink(to_id="b", relation="explains", weight=0.5))
        buf = io.StringIO()
        journal.export(None, buf)
    finally:
        journal.close()
    return buf.getvalue().splitlines()


def _item_of(line: str) -> dict[str, Any]:
    """The last version's item of an export line (to damage)."""
    item: dict[str, Any] = json.loads(line)["versions"][-1]["item"]
    return item


def _damaged(lines: list[str], n: int, change: Callable[[dict[str, Any]], None]) -> str:
    """The export with the last item version on line ``n`` (from 1) changed."""
    obj = json.loads(lines[n - 1])
    change(obj["versions"][-1]["item"])
    return "\n".join([*lines[: n - 1], json.dumps(obj), *lines[n:]]) + "\n"


def _set(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda item: item.__setitem__(key, value)


def _nan_link(item: dict[str, Any]) -> None:
    item["links"] = [{"to_id": "b", "relation": "explains", "weight": float("nan")}]


# The damage, the reason named, and whether the import asks for the write rules.
DAMAGE = [
    pytest.param(_nan_link, "links.0.weight: .*got float nan", False, id="nan-weight"),
    pytest.param(_set("data", {"k": 5}), "data.k: Input should be a valid", False, id="int-data"),
    pytest.param(_set("title", "x\ud800"), "lone surrogate", False, id="surrogate"),
    pytest.param(_set("tags", ["a\x00"]), "holds a NUL", False, id="nul-tag"),
    pytest.param(_set("kind", "note\x00"), "kind holds a NUL", False, id="nul-kind"),
    pytest.param(_set("created_at", "2020-01-01T00:00:00"), "timezone", False, id="naive-time"),
    pytest.param(_set("surplus", 1), "surplus: Extra inputs", False, id="unknown-field"),
    pytest.param(_set("kind", "deploy note"), "kind 'deploy note' must be", True, id="bad-kind"),
]


def _state(journal: JournalBase, store: Store) -> tuple[list[str], object]:
    return sorted(it.model_dump_json() for it in store.items()), journal.head()


def _reopened(place: Place) -> list[str]:
    journal, store = open_journal(place), Store()
    try:
        journal.attach(store)
        return sorted(it.model_dump_json() for it in store.items())
    finally:
        journal.close()


@pytest.mark.parametrize("line", [3, 4])  # the middle item, then the last
@pytest.mark.parametrize(("change", "message", "check_rules"), DAMAGE)
def test_a_bad_item_anywhere_refuses_the_whole_import_naming_its_line(
    tmp_path: Path,
    place: Place,
    target: tuple[JournalBase, Store],
    line: int,
    change: Callable[[dict[str, Any]], None],
    message: str,
    check_rules: bool,
) -> None:
    journal, store = target
    text = _damaged(_export_lines(tmp_path), line, change)
    before = _state(journal, store)

    with pytest.raises(InvalidItemError, match=f"^line {line}: .*{message}") as caught:
        journal.import_(io.StringIO(text), check_rules=check_rules)

    assert "\n" not in str(caught.value), "one line, as the CLI prints it"
    assert _state(journal, store) == before  # not even the items before the bad line
    journal.close()
    assert _reopened(place) == before[0]


def _stamped_twice(line: str) -> str:
    """The item line with a second version under its last version's stamp, saying other words.

    A journal keys versions by (id, stamp), so it would keep one of the two while
    the store took the other: SQLite's store showed the second, its journal
    (and so any reopen) the first.
    """
    obj = json.loads(line)
    twin = json.loads(json.dumps(obj["versions"][-1]))
    twin["item"]["title"] = "another text under the same stamp"
    obj["versions"].append(twin)
    return json.dumps(obj)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda ls: [ls[0], "{not json", *ls[2:]], "^line 2: not JSON"),
        (lambda ls: [*ls[:2], ls[1], *ls[3:]], "^line 3: a appears twice"),
        (lambda ls: ls[:-1], "without its end line"),
        (lambda ls: [*ls[:2], "[" * 100_000, *ls[3:]], "^line 3: JSON nested too deeply"),
        (lambda ls: [ls[0], _stamped_twice(ls[1]), *ls[2:]], "^line 2: a has two versions st"),
    ],
    ids=["not-json", "twice", "cut-off", "deep", "one-stamp-twice"],
)
def test_a_file_that_is_no_whole_export_is_refused_and_changes_nothing(
    tmp_path: Path,
    target: tuple[JournalBase, Store],
    edit: Callable[[list[str]], list[str]],
    message: str,
) -> None:
    journal, store = target
    text = "\n".join(edit(_export_lines(tmp_path))) + "\n"
    before = _state(journal, store)
    with pytest.raises(InvalidItemError, match=message):
        journal.import_(io.StringIO(text))
    assert _state(journal, store) == before


def test_the_intact_export_imports(tmp_path: Path, target: tuple[JournalBase, Store]) -> None:
    """The control: the same file undamaged imports every item, links and all."""
    journal, store = target
    assert journal.import_(io.StringIO("\n".join(_export_lines(tmp_path)) + "\n")) == 3
    a = store.get("a")
    assert a is not None and [(lk.to_id, lk.weight) for lk in a.links] == [("b", 0.5)]


def test_the_cli_refuses_a_damaged_export_in_one_line_and_imports_nothing(
    tmp_path: Path,
) -> None:
    text = _damaged(_export_lines(tmp_path), 4, _nan_link)
    bad = tmp_path / "bad.ndjson"
    bad.write_text(text, encoding="utf-8")
    data = tmp_path / "data"
    with Memory(data, embedder=None) as mem:
        mem.add("already here", id="mine")
        before = sorted(it.model_dump_json() for it in mem.store.items())

    command = ["import", str(bad), "--data", str(data), "--embedder", "none"]
    refused = subprocess.run(
        [sys.executable, "-m", "memstore.cli", *command],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )

    assert refused.returncode == 1
    message = refused.stderr.strip()
    assert "\n" not in message, message
    assert "line 4: c: item: links.0.weight" in message and "got float nan" in message
    assert "nothing was imported" in message
    with Memory(data, embedder=None) as mem:
        assert sorted(it.model_dump_json() for it in mem.store.items()) == before


def test_an_export_saved_with_a_byte_order_mark_imports_the_same_items(tmp_path: Path) -> None:
    """An editor's "UTF-8 with BOM" save, opened as ``open(path)`` does (``utf-8``, keeping the
    mark): it was refused as ``line 1: not JSON: Unexpected UTF-8 BOM``. A mark that is
    not at the very start is still text, and its line still not JSON."""
    source = tmp_path / "source"
    with Memory(source, embedder=None) as mem:
        mem.add("the deploy moved to Friday", id="a")
        mem.add("the on-call rota changed", id="b")
        expected = sorted(it.model_dump_json() for it in mem.store.items())
        with open(tmp_path / "e.ndjson", "w", encoding="utf-8-sig") as fp:  # writes the mark
            assert mem.export(fp) == 2
    assert (tmp_path / "e.ndjson").read_bytes().startswith(b"\xef\xbb\xbf{")

    with Memory(tmp_path / "copy", embedder=None) as mem:
        with open(tmp_path / "e.ndjson", encoding="utf-8") as fp:
            assert mem.import_(fp) == 2
        assert sorted(it.model_dump_json() for it in mem.store.items()) == expected

    lines = (tmp_path / "e.ndjson").read_text(encoding="utf-8-sig").splitlines()
    marked_later = "\n".join([lines[0], "\ufeff" + lines[1], *lines[2:]]) + "\n"
    with (
        Memory(tmp_path / "other", embedder=None) as mem,
        pytest.raises(InvalidItemError, match=r"^line 2: not JSON"),
    ):
        mem.import_(io.StringIO(marked_later))
