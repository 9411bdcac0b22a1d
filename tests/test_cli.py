"""The memstore command, run as a user runs it (a real process per call)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def memstore(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "memstore.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
    )


def test_add_search_get_forget_export_import(tmp_path: Path) -> None:
    added = memstore(
        "add",
        "the nightly backup runs at 02:00",
        "--partition",
        "ops",
        "--embedder",
        "hash",
        "--json",
        cwd=tmp_path,
    )
    assert added.returncode == 0, added.stderr
    item = json.loads(added.stdout)
    assert item["tags"] == ["tenant/ops"] and (tmp_path / "data" / "journal.db").exists()

    found = memstore(
        "search", "backup", "--partition", "ops", "--embedder", "hash", "--json", cwd=tmp_path
    )
    assert json.loads(found.stdout.splitlines()[0])["id"] == item["id"]

    got = memstore("get", item["id"], cwd=tmp_path)
    assert got.returncode == 0 and json.loads(got.stdout)["content"].startswith("the nightly")
    assert memstore("get", "missing", cwd=tmp_path).returncode == 1

    out = tmp_path / "export.ndjson"
    assert memstore("export", "-o", str(out), cwd=tmp_path).returncode == 0
    imported = memstore("import", str(out), "--data", "copy", "--embedder", "hash", cwd=tmp_path)
    assert imported.returncode == 0 and "imported 1 item(s)" in imported.stderr

    assert memstore("forget", item["id"], cwd=tmp_path).returncode == 0
    assert memstore("get", item["id"], cwd=tmp_path).returncode == 1
    stats = json.loads(memstore("stats", cwd=tmp_path).stdout)
    assert stats["items"] == 0 and stats["head"]
    hard = memstore("forget", item["id"], "--hard", cwd=tmp_path)
    assert hard.returncode == 0 and "purged" in hard.stdout
    assert memstore("forget", item["id"], "--hard", cwd=tmp_path).returncode == 1


def test_bad_input_exits_2_with_a_message(tmp_path: Path) -> None:
    bad = memstore(
        "add",
        "x",
        "--kind",
        "stable_fact",
        "--confidence",
        "low",
        "--embedder",
        "hash",
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "needs confidence 'high'" in bad.stderr
    bogus = memstore("import", str(tmp_path / "nope.ndjson"), cwd=tmp_path)
    assert bogus.returncode == 2 and "No such file" in bogus.stderr
