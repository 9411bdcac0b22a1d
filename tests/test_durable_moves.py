"""``export -o``, ``import`` into a new folder and ``backup`` are on disk when they say done.

Each writes beside its destination and renames into place. Without flushing,
a power cut after "done" can leave the new name pointing at an empty file or
missing. The tests wrap ``os.fsync``, ``os.replace`` and ``os.rename`` in recorders that still
do the real work, run each real command, and check the order on disk: every
file that ends up in the destination was flushed before the rename, and the
folder holding the new name after it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memstore import Memory
from memstore.cli import main

Event = tuple[str, tuple[int, int]]


def _record(monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    """Record each ``os.fsync`` (by the inode flushed) and rename; each still runs."""
    events: list[Event] = []
    real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        events.append(("fsync", (st.st_dev, st.st_ino)))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str], **kw: object) -> None:
        st = os.stat(src)
        real_replace(src, dst, **kw)  # type: ignore[arg-type]
        events.append(("replace", (st.st_dev, st.st_ino)))

    def rename(src: str | os.PathLike[str], dst: str | os.PathLike[str], **kw: object) -> None:
        st = os.stat(src)
        real_rename(src, dst, **kw)  # type: ignore[arg-type]
        events.append(("replace", (st.st_dev, st.st_ino)))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "rename", rename)
    return events


def _inode(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _last(events: list[Event], what: str, inode: tuple[int, int]) -> int:
    hits = [i for i, e in enumerate(events) if e == (what, inode)]
    assert hits, f"no {what} of {inode}"
    return hits[-1]


def _assert_durable(events: list[Event], moved: Path, files: list[Path]) -> None:
    """Each of ``files`` flushed before ``moved`` was renamed, its parent flushed after."""
    rename = _last(events, "replace", _inode(moved))
    for f in files:
        assert _last(events, "fsync", _inode(f)) < rename, f"{f} not flushed before the rename"
    if moved.is_dir():
        assert _last(events, "fsync", _inode(moved)) < rename  # its list of names
    assert _last(events, "fsync", _inode(moved.parent)) > rename, "the new name not flushed"


def _memory(folder: Path, n: int) -> None:
    with Memory(folder, embedder="hash") as mem:
        mem.add_many([f"note {i} about the quarterly ledger" for i in range(n)])


def test_export_to_a_file_is_flushed_then_renamed_then_its_folder_flushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _memory(tmp_path / "data", 40)
    out = tmp_path / "exports" / "all.jsonl"
    out.parent.mkdir()
    out.write_text("the previous export\n")  # replaced, as a re-export does
    events = _record(monkeypatch)
    assert main(["export", "--data", str(tmp_path / "data"), "-o", str(out)]) == 0
    _assert_durable(events, out, [out])
    lines = out.read_text().splitlines()
    assert len(lines) == 40 + 2  # the format line, the items, the end line
    assert json.loads(lines[0])["format"].startswith("memstore-journal-export")


def test_an_import_into_a_new_folder_is_flushed_whole_before_it_is_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _memory(tmp_path / "data", 30)
    export = tmp_path / "all.jsonl"
    assert main(["export", "--data", str(tmp_path / "data"), "-o", str(export)]) == 0
    events = _record(monkeypatch)
    new = tmp_path / "restored" / "deep"  # two folders made: the outer one is renamed
    args = ["import", str(export), "--data", str(new), "--embedder", "hash"]
    assert main(args) == 0
    top = tmp_path / "restored"
    files = [p for p in top.rglob("*") if p.is_file()]
    assert new / "journal.db" in files
    _assert_durable(events, top, [*files, new])
    with Memory(new, embedder="hash") as mem:
        assert mem.stats().items == 30


def test_a_backup_is_flushed_whole_before_it_is_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _memory(tmp_path / "data", 30)
    dest = tmp_path / "backups" / "today"
    events = _record(monkeypatch)
    assert main(["backup", str(tmp_path / "data"), str(dest)]) == 0
    top = tmp_path / "backups"
    files = [p for p in top.rglob("*") if p.is_file()]
    assert {p.name for p in files} == {"journal.db", "vectors.sqlite3"}
    _assert_durable(events, top, [*files, dest])
    with Memory(dest, embedder="hash") as mem:
        assert mem.stats().items == 30 and mem.stats().vectors == 30


def test_a_backup_into_an_existing_empty_folder_is_flushed_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _memory(tmp_path / "data", 5)
    dest = tmp_path / "empty"
    dest.mkdir()
    folder = _inode(dest)
    events = _record(monkeypatch)
    assert main(["backup", str(tmp_path / "data"), str(dest)]) == 0
    # The user's folder is filled, never replaced: each file is flushed before
    # the folder that now names it.
    assert _inode(dest) == folder
    names = _last(events, "fsync", folder)
    for f in (dest / "journal.db", dest / "vectors.sqlite3"):
        assert _last(events, "fsync", _inode(f)) < names, f"{f} not flushed before its folder"


def test_a_tokens_file_is_flushed_then_renamed_then_its_folder_flushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # memstore serve writes DATA/tokens.json on first start and prints its token;
    # an empty file after a power cut made the next start refuse the file.
    from memstore.protocol.auth import SCOPES, Principal, TokenTable, new_token, write_tokens_file

    path, token = tmp_path / "tokens.json", new_token()
    events = _record(monkeypatch)
    write_tokens_file(path, {token: Principal("default", frozenset(SCOPES))})
    _assert_durable(events, path, [path])
    assert TokenTable.load(path).authenticate(f"Bearer {token}").tenant == "default"


def test_a_folder_holding_a_socket_or_a_link_is_moved_and_its_files_flushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only regular files are opened to be flushed: a socket cannot be opened, a pipe blocks."""
    import socket

    from memstore._durable import move_into_place

    staged, target = tmp_path / ".new.partial", tmp_path / "new"
    staged.mkdir()
    (staged / "journal.db").write_bytes(b"x" * 100)
    (staged / "link").symlink_to(tmp_path / "elsewhere")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(staged / "s"))  # a server's socket left in the folder
        events = _record(monkeypatch)
        move_into_place(staged, target)
    _assert_durable(events, target, [target / "journal.db"])
    assert sorted(p.name for p in target.iterdir()) == ["journal.db", "link", "s"]
