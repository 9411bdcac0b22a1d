"""AsyncMemory's methods have the signatures of the Memory methods they wrap.

Each coroutine takes the same parameters as its :class:`Memory` twin (names,
kinds, defaults and annotations, as written: both modules spell the types the
same way) and is declared to return what the twin returns, which ``await``
gives. So a type checker or an IDE checks ``await mem.search(..., parition="x")``
as it checks ``mem.search``, and a misspelt keyword fails where it is written,
not deep in a worker thread. Checked for every public method of
:class:`Memory`, so a method added or changed there cannot go unmatched here.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstore import AsyncMemory, Memory
from memstore.errors import MemstoreError

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = sorted(
    name for name, fn in vars(Memory).items() if inspect.isfunction(fn) and not name.startswith("_")
)
"""Every public method of Memory (its properties are reached as ``AsyncMemory.memory``)."""


def _params(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    return list(inspect.signature(fn).parameters.values())


def test_every_public_memory_method_is_wrapped() -> None:
    assert PUBLIC, "Memory has public methods"
    missing = [name for name in PUBLIC if not hasattr(AsyncMemory, name)]
    assert missing == [], f"AsyncMemory lacks {missing}"


@pytest.mark.parametrize("name", PUBLIC)
def test_each_method_has_its_memory_twins_signature(name: str) -> None:
    mine, twin = getattr(AsyncMemory, name), getattr(Memory, name)
    assert _params(mine) == _params(twin), name
    assert inspect.signature(mine).return_annotation == inspect.signature(twin).return_annotation
    synchronous = name == "subscribe"  # a subscription is iterated with ``async for``
    assert inspect.iscoroutinefunction(mine) is not synchronous, name


def test_opening_takes_the_memorys_own_arguments() -> None:
    twin = _params(Memory.__init__)
    assert _params(AsyncMemory.open) == twin[1:]  # bound to the class: no cls, and no self
    init = _params(AsyncMemory.__init__)
    assert init[:-1] == twin and init[-1].name == "memory"
    assert init[-1].kind is inspect.Parameter.KEYWORD_ONLY


def test_a_type_checker_catches_a_misspelt_keyword(tmp_path: Path) -> None:
    # Before: every keyword went through **kwargs: Any, so mypy passed this file.
    pytest.importorskip("mypy")
    code = tmp_path / "caller.py"
    code.write_text(
        "from memstore import AsyncMemory\n\n\n"
        "async def main(mem: AsyncMemory) -> None:\n"
        '    await mem.search("backup", parition="ops")\n'
        '    await mem.add("note", partition="ops", dedup="yes")\n',
        encoding="utf-8",
    )
    cache = tmp_path / "mypy-cache"
    if (ROOT / ".mypy_cache").is_dir():  # make test type-checks the packages first: start
        # from a copy of that cache (mypy rechecks whatever changed since) rather than
        # analysing all of memstore again to read one file; the project's stays untouched.
        shutil.copytree(ROOT / ".mypy_cache", cache)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), str(code)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'Unexpected keyword argument "parition"' in done.stdout, done.stdout
    assert 'Argument "dedup" to "add" of "AsyncMemory" has incompatible type' in done.stdout


def test_given_with_memory_another_argument_is_refused(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder="hash") as memory:
        with pytest.raises(MemstoreError, match="memory="):
            AsyncMemory(memory=memory, readonly=True)
        with pytest.raises(MemstoreError, match="memory="):
            AsyncMemory(memory=memory, hub=True)
        assert AsyncMemory(memory=memory).memory is memory
