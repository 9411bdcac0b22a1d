"""Every Python snippet in docs/ and the README is executed: no block goes unchecked.

A ``python`` code block must be a doctest (``>>>`` lines, run by pytest's
doctest collection of ``*.md``), be the README quickstart (run as printed by
``test_readme_quickstart``), or live in a page a dedicated test runs block by
block (``RUN_ELSEWHERE``). Interface sketches and formulas use ``text``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_ELSEWHERE = {
    "postgres.md": "tests/test_postgres_docs.py",
    "client.md": "tests/protocol/test_client_docs.py",
}
"""Pages whose plain Python blocks another test executes (against a live service)."""
QUICKSTART = 'with Memory("quickstart-memory/") as mem:'
"""The README quickstart's first line: ``test_readme_quickstart`` runs that block."""


def test_every_python_block_is_a_doctest() -> None:
    unchecked = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for m in re.finditer(r"```python\n(.*?)```", text, re.S):
            block = m.group(1)
            quickstart = path.name == "README.md" and QUICKSTART in block
            elsewhere = path.name in RUN_ELSEWHERE
            if not block.lstrip().startswith(">>>") and not quickstart and not elsewhere:
                line = text[: m.start()].count("\n") + 1
                unchecked.append(f"{path.relative_to(ROOT)}:{line}")
    assert unchecked == [], f"python blocks that no test runs: {unchecked}"
    for runner in RUN_ELSEWHERE.values():
        assert (ROOT / runner).exists()
