"""Two ``memstore import`` runs into the same new folder: one lands, the other says why not.

Both find the folder missing, so each builds the memory in a hidden folder of
its own beside it and renames it into place at the end. Before, the run that
finished second failed on that rename with a bare ``OSError`` (``Directory not
empty``). Now it says another import got there first, leaves the winner's
memory as it is, and removes its own hidden folder.

The loser is held mid-import by reading its export from a named pipe (a real
process blocked on a real read), while the winner runs whole.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memstore import Memory

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")


def _import(*args: str) -> list[str]:
    return [sys.executable, "-m", "memstore", "import", *args]


def test_the_second_import_into_one_new_folder_says_another_got_there_first(
    tmp_path: Path,
) -> None:
    source = tmp_path / "source"
    with Memory(source, embedder=None) as mem:
        mem.add_many([f"note {i} on the ledger" for i in range(20)])
        with open(tmp_path / "export.jsonl", "w", encoding="utf-8") as fp:
            mem.export(fp)
    export = (tmp_path / "export.jsonl").read_text(encoding="utf-8")
    pipe = tmp_path / "pipe.jsonl"
    os.mkfifo(pipe)
    dest = tmp_path / "dest"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    late = subprocess.Popen(
        _import(str(pipe), "--data", str(dest), "--embedder", "none"),
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        while True:  # until the late import has its input open (never blocking on a dead one)
            assert late.poll() is None, late.communicate()
            try:
                fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:  # ENXIO: no reader yet
                time.sleep(0.02)
        os.set_blocking(fd, True)
        with open(fd, "w", encoding="utf-8") as feed:
            while not [p for p in tmp_path.iterdir() if p.name.startswith(".dest.")]:
                assert late.poll() is None, late.communicate()
                time.sleep(0.02)
            # It has staged its memory and waits on the pipe: another import runs whole.
            first = subprocess.run(
                _import(str(tmp_path / "export.jsonl"), "--data", str(dest), "--embedder", "none"),
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            )
            assert first.returncode == 0, first.stderr
            feed.write(export)
        _, err = late.communicate(timeout=120)
    finally:
        if late.poll() is None:
            late.kill()
            late.wait()
    assert late.returncode == 1, err
    assert "another import got there first" in err and "Traceback" not in err, err
    assert "Errno" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dest",
        "export.jsonl",
        "pipe.jsonl",
        "source",
    ]
    with Memory(dest, embedder=None) as copy:
        assert len(copy.store.all_items()) == 20
