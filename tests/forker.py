"""Writers killed with SIGKILL, each a process of its own, forked from one that imported memstore.

The crash tests (:mod:`tests.test_journal_crash`, :mod:`tests.test_journal_pg_crash`) run a
writer module (``tests.crash_writer``, ``tests.crash_bulk_writer``,
``tests.pg_batch_writer``: each has a ``main`` that writes and prints ``ack N``
as each operation is acknowledged), kill it at a random moment and check what
survived. Starting a Python per trial and importing memstore in it cost about a
second a trial; the :func:`forked_writers` process imports memstore (and each
writer module, the first time it is asked for it) once, and forks one writer
per trial. A writer still opens everything after the fork, and is killed on
its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Forker", "forked_writers", "kill_writer"]

ROOT = Path(__file__).resolve().parents[1]

_FORKER = """
import importlib, json, os, sys, traceback
from memstore import Item, Memory, Store  # what the writers import: loaded once, here
from memstore.journal import SqliteJournal
from memstore.transaction import transaction
from memstore_index import CellStore, HashEmbedder

for line in sys.stdin:
    module, args = json.loads(line)
    main = importlib.import_module("tests." + module).main  # imported once, before the fork
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            print("pid", os.getpid(), flush=True)
            main(*args)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("exit", os.waitstatus_to_exitcode(status), flush=True)
"""


@dataclass
class Forker:
    """The process forking the writers, and the file its (and their) stderr goes to."""

    proc: subprocess.Popen[str]
    err: Path


@contextlib.contextmanager
def forked_writers(folder: Path) -> Iterator[Forker]:
    """A process that has imported memstore, forking one writer per line it reads.

    Each writer prints ``pid N`` before anything else; when it has ended, the
    forker prints ``exit STATUS`` after whatever it wrote. Their stderr goes to
    ``forker.err`` in ``folder``. (The ``forker`` fixture of ``tests/conftest.py``.)
    """
    err_path = folder / "forker.err"
    err = err_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-c", _FORKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    try:
        yield Forker(proc, err_path)
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            err.close()


def kill_writer(
    forker: Forker,
    module: str,
    args: list[object],
    until: Callable[[str, int], bool],
    pause: float,
    rng: random.Random,
) -> int:
    """Run ``tests.MODULE.main(*args)`` in a process of its own, SIGKILL it; how many
    operations it acknowledged.

    ``args`` travel as JSON (strings and numbers). The writer prints ``ack N`` as
    each operation is acknowledged. Once ``until(line, acked)`` holds, it is
    killed after a random pause of up to ``pause`` seconds (to land the kill
    anywhere in what it does next); the acknowledgements already in the pipe
    then count too: they were acknowledged.
    """
    proc = forker.proc
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps([module, args]) + "\n")
    proc.stdin.flush()
    first = proc.stdout.readline()
    assert first.startswith("pid "), (first, forker.err.read_text())
    pid = int(first.split()[1])
    acked = 0
    status: int | None = None
    try:
        for line in proc.stdout:
            if line.startswith("exit "):
                status = int(line.split()[1])
                raise AssertionError(f"writer stopped early: {forker.err.read_text()}")
            if line.startswith("ack "):
                acked = int(line.split()[1]) + 1
            if until(line, acked):
                break
        else:
            raise AssertionError(f"the forker stopped: {forker.err.read_text()}")
        time.sleep(rng.random() * pause)
        os.kill(pid, signal.SIGKILL)
        for line in proc.stdout:
            if line.startswith("exit "):
                status = int(line.split()[1])
                break
            if line.startswith("ack "):
                acked = int(line.split()[1]) + 1
    finally:
        if status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert status == -signal.SIGKILL
    return acked
