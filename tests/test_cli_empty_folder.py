"""``memstore import`` into an empty folder the user made fills that folder, never replaces it.

The import was built in a hidden folder beside the destination and renamed over
it: the mode was copied, but the folder was another one under the same name (a
mount point, an owner, a shell standing in it: all lost). As ``memstore backup``
does, an existing empty folder is now filled in place: the import is built in a
hidden folder inside it and its files moved in when it succeeded; refused, the
folder is left as it was.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memstore import Memory
from memstore.cli import main


@pytest.fixture
def export(tmp_path: Path) -> Path:
    with Memory(tmp_path / "data", embedder=None) as mem:
        mem.add("the deploy moved to Friday", id="deploy")
    path = tmp_path / "all.jsonl"
    assert main(["export", "-o", str(path), "--data", str(tmp_path / "data")]) == 0
    return path


def test_an_import_fills_the_empty_folder_it_is_given(tmp_path: Path, export: Path) -> None:
    restore = tmp_path / "restore"
    restore.mkdir(mode=0o710)
    before = restore.stat()
    assert main(["import", str(export), "--data", str(restore), "--embedder", "none"]) == 0
    after = restore.stat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert not [p for p in restore.iterdir() if p.name.startswith(".")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.jsonl", "data", "restore"]
    with Memory(restore, embedder=None) as mem:
        assert mem.get("deploy") is not None


def test_a_refused_import_leaves_the_empty_folder_as_it_was(
    tmp_path: Path, export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_text(export.read_text()[:-30])  # cut mid-line
    restore = tmp_path / "restore"
    restore.mkdir(mode=0o710)
    before = restore.stat()
    assert main(["import", str(cut), "--data", str(restore), "--embedder", "none"]) == 1
    assert "nothing was imported" in capsys.readouterr().err
    after = restore.stat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert list(restore.iterdir()) == []


def test_what_a_killed_import_left_inside_the_folder_is_swept(tmp_path: Path, export: Path) -> None:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    assert child.wait() == 0  # a process that ran and is gone
    restore = tmp_path / "restore"
    restore.mkdir()
    left = restore / f".memory.partial-{child.pid}"  # a killed import's, its process gone
    left.mkdir()
    (left / "journal.db").write_bytes(b"half a memory")
    assert main(["import", str(export), "--data", str(restore), "--embedder", "none"]) == 0
    assert not left.exists()
    with Memory(restore, embedder=None) as mem:
        assert mem.get("deploy") is not None
