"""What a killed ``import``, ``backup`` or ``export`` leaves beside its destination is swept.

Each writes under a hidden name beside its destination (``.NAME.partial-PID.HOST``)
and renames it into place at the end; a run killed with SIGKILL leaves that
name behind. The next run for the same destination removes the leftovers of
processes that no longer run, and never the one of a run still going.

The killed and the live run are real ``memstore import -`` processes: they
create their hidden folder, then wait on their standard input for the items.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memstore import Memory
from memstore.cli import main


def _hidden(folder: Path, name: str) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith(f".{name}."))


def _export(tmp_path: Path) -> Path:
    with Memory(tmp_path / "data", embedder=None) as mem:
        mem.add_many([f"note {i} on the ledger" for i in range(10)])
    out = tmp_path / "all.jsonl"
    assert main(["export", "--data", str(tmp_path / "data"), "-o", str(out)]) == 0
    return out


@contextmanager
def _import_waiting(export: Path, data: Path) -> Iterator[subprocess.Popen[str]]:
    """A ``memstore import -`` into ``data``, stopped reading after the export's first line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memstore",
            "import",
            "-",
            "--data",
            str(data),
            "--embedder",
            "none",
        ],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdin is not None
        child.stdin.write(export.read_text().splitlines(keepends=True)[0])
        child.stdin.flush()
        while not [p for p in _hidden(data.parent, data.name) if str(child.pid) in p.name]:
            assert child.poll() is None, child.communicate()[1]
            time.sleep(0.01)  # its hidden folder is made; it now waits for the items
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()


def _killed_import(export: Path, data: Path) -> Path:
    """The hidden folder a ``memstore import`` into ``data`` killed with SIGKILL left."""
    with _import_waiting(export, data) as child:
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
        (left,) = [p for p in _hidden(data.parent, data.name) if str(child.pid) in p.name]
    # The folder is what the sweep is about; how far the import got inside it
    # before the kill (journal.db made yet or not) depends on the machine's load.
    assert left.is_dir()
    return left


def test_a_backup_removes_what_a_killed_run_left_but_not_a_live_runs_folder(
    tmp_path: Path,
) -> None:
    export = _export(tmp_path)
    target = tmp_path / "restored"
    dead = _killed_import(export, target)
    with _import_waiting(export, target) as live:
        (running,) = [p for p in _hidden(tmp_path, "restored") if str(live.pid) in p.name]
        assert main(["backup", str(tmp_path / "data"), str(target)]) == 0
        assert not dead.exists()  # the killed run's folder is gone
        assert running.is_dir()  # the live run's is not touched
        assert _hidden(tmp_path, "restored") == [running]
    with Memory(target, embedder=None) as mem:
        assert mem.stats().items == 10


def test_an_import_removes_what_a_killed_import_left(tmp_path: Path) -> None:
    export = _export(tmp_path)
    target = tmp_path / "restored"
    dead = _killed_import(export, target)
    assert main(["import", str(export), "--data", str(target), "--embedder", "none"]) == 0
    assert not dead.exists() and _hidden(tmp_path, "restored") == []
    with Memory(target, embedder=None) as mem:
        assert mem.stats().items == 10


def _dead_pid() -> int:
    """The id of a process that ran and has exited (and was reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    assert child.wait() == 0
    return child.pid


def test_an_export_removes_a_dead_exports_temporary_file(tmp_path: Path) -> None:
    export = _export(tmp_path)
    pid = _dead_pid()
    older = tmp_path / f".all.jsonl.{pid}.tmp"  # the name releases before this one used
    older.write_text('{"format": "memstore-journal-export/2"}\n{"id": "half')
    other = tmp_path / f".other.jsonl.{pid}.tmp"  # another file's: not this export's to sweep
    other.write_text("x")
    assert main(["export", "--data", str(tmp_path / "data"), "-o", str(export)]) == 0
    assert not older.exists() and other.exists()
    assert len(export.read_text().splitlines()) == 12
