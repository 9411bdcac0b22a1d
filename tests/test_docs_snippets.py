"""Every Python snippet in docs/ and the README is executed: no block goes unchecked.

A ``python`` code block must be a doctest (``>>>`` lines, run by pytest's
doctest collection of ``*.md``) or be the README quickstart (run as printed by
``test_readme_quickstart``). Interface sketches and formulas use ``text``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_python_block_is_a_doctest() -> None:
    unchecked = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for m in re.finditer(r"```python\n(.*?)```", text, re.S):
            block = m.group(1)
            quickstart = path.name == "README.md" and 'with Memory("data/") as mem:' in block
            if not block.lstrip().startswith(">>>") and not quickstart:
                line = text[: m.start()].count("\n") + 1
                unchecked.append(f"{path.relative_to(ROOT)}:{line}")
    assert unchecked == [], f"python blocks that no test runs: {unchecked}"
