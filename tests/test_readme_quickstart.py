"""The README's quickstart, run exactly as printed, must print exactly what the README says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART_FOLDER = "quickstart-memory"
"""The quickstart's own folder: never ``data/``, which ``make serve`` uses."""


def quickstart() -> tuple[str, str]:
    """The README quickstart's code and the output it promises."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Quickstart") :]
    section = section[: section.index("\n## ", 1)]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    output = re.search(r"```text\n(.*?)```", section, re.S)
    assert code and output, "the quickstart needs a python block and a text block"
    return code.group(1), output.group(1)


def test_readme_quickstart_runs_as_printed(tmp_path: Path) -> None:
    code, expected = quickstart()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    assert (tmp_path / QUICKSTART_FOLDER / "journal.db").exists()
    assert not (tmp_path / "data").exists(), "the quickstart must not touch the server's folder"
