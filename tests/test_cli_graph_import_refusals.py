"""``memstore import --format mcp-memory`` refusals read as every other import refusal.

A memstore export that cannot be imported is refused as ``refused FILE:
REASON; nothing was imported``; a graph file that cannot be read as a graph
(a line that is not JSON, an entity without a name...) said only
``line 3: not JSON ...``, without naming the file. Both now start alike.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstore.cli import main

ALICE = {"type": "entity", "name": "Alice", "entityType": "person", "observations": ["tea"]}


def _refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> str:
    """Import ``text`` as a graph: exit 1, the one line on stderr, no folder made."""
    path, data = tmp_path / "memory.jsonl", tmp_path / "data"
    path.write_text(text, encoding="utf-8")
    code = main(["import", "--format", "mcp-memory", str(path), "--data", str(data),
                 "--embedder", "none"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1, err
    assert not data.exists()  # nothing was imported, and no empty memory made
    assert err.count("\n") == 1, err
    return err.strip()


def test_a_line_that_is_not_json_is_refused_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refusal(tmp_path, capsys, json.dumps(ALICE) + "\n{oops\n")
    path = tmp_path / "memory.jsonl"
    assert err.startswith(f"memstore: refused {path}: line 2: not JSON ("), err
    assert err.endswith("; nothing was imported"), err
    assert err.count("nothing was imported") == 1, err


def test_a_memstore_export_keeps_its_hint_after_the_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refusal(tmp_path, capsys, '{"format": "memstore-journal-export/2"}\n')
    path = tmp_path / "memory.jsonl"
    assert err.startswith(f"memstore: refused {path}: line 1: expected an object"), err
    assert err.endswith(
        "; nothing was imported (it is a memstore export: import it without --format mcp-memory)"
    ), err
