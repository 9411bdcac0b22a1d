"""The snippets of ``docs/hub.md`` run and print what the page says they print."""

from __future__ import annotations

import doctest
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "hub.md"


def test_docs_hub_snippets_run() -> None:
    result = doctest.testfile(
        str(DOC), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False
    )
    assert result.attempted > 20
    assert result.failed == 0
