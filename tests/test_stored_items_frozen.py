"""A listener or hook holds the stored item itself: every change to it is refused, none lands.

Before, only the shared empty containers refused: a listener could change a
non-empty ``data`` dict, ``supersedes`` or ``evidence_refs`` list or a link in
place, and setting a field (``item.title = ...``) raised *after* the new value
had landed. Either way the store no longer said what the journal recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstore import Item, Memory, ThoughtLink

Change = Callable[[Item], Any]
CHANGES: dict[str, Change] = {
    "data[k] = v": lambda it: it.data.__setitem__("owner", "mallory"),
    "data.update": lambda it: it.data.update(owner="mallory"),
    "data.pop": lambda it: it.data.pop("owner"),
    "evidence_refs.append": lambda it: it.evidence_refs.append("forged"),
    "supersedes.clear": lambda it: it.supersedes.clear(),
    "links.append": lambda it: it.links.append(ThoughtLink(to_id="old", relation="explains")),
    "links[0].weight =": lambda it: setattr(it.links[0], "weight", 0.01),
    "tags.append": lambda it: it.tags.append("forged"),
    "title =": lambda it: setattr(it, "title", "forged"),
    "data =": lambda it: setattr(it, "data", {"owner": "mallory"}),
}


def _view(it: Item | None) -> dict[str, Any]:
    assert it is not None
    return it.model_dump(exclude={"updated_at", "created_at"})


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_a_listener_changing_the_stored_item_is_refused(tmp_path: Path, name: str) -> None:
    change = CHANGES[name]
    outcomes: list[str] = []

    def meddle(op: str, item: Item | None, id: str, kind: str) -> None:
        if item is None or item.id != "new":
            return
        try:
            change(item)
            outcomes.append("changed")
        except TypeError as e:
            outcomes.append(str(e))

    with Memory(tmp_path, embedder=None, hub=True) as mem:
        mem.add(Item(id="old", kind="note", title="old note"))
        mem.store.add_change_listener(meddle)
        mem.store.set_change_hook(meddle)  # the hook a change stream is fed by
        new = Item(
            id="new",
            kind="note",
            title="new note",
            content="the owner is alice",
            tags=["tenant/ops", "owner"],
            data={"owner": "alice"},
            supersedes=["old"],
            evidence_refs=["ticket-1"],
            links=[ThoughtLink(to_id="old", relation="explains", weight=0.5)],
        )
        written = _view(mem.add(new, dedup=False))
        assert outcomes == ["a stored item is never changed in place: change a clone of it"] * 2
        assert _view(mem.get("new")) == written
        hits = mem.search("alice owner", partition="ops", limit=1)
        assert [h.item.id for h in hits] == ["new"] and hits[0].item.data == {"owner": "alice"}
    with Memory(tmp_path, embedder=None) as mem:  # the journal says what the store said
        assert _view(mem.get("new")) == written


def test_a_clone_of_a_stored_item_is_the_callers_to_change(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        seen: list[Item] = []
        mem.store.add_change_listener(lambda op, item, id, kind: seen.append(item))
        mem.add(Item(id="a", kind="note", title="a", data={"k": "v"}, evidence_refs=["e"]))
        mine = seen[0].clone()
        mine.data["k"] = "w"
        mine.evidence_refs.append("f")
        mine.title = "b"
        mem.add(mine, dedup=False)
        got = mem.get("a")
        assert got is not None and (got.data, got.evidence_refs, got.title) == (
            {"k": "w"},
            ["e", "f"],
            "b",
        )
