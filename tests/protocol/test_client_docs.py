"""The examples of ``docs/client.md`` run as written, against the conformance server.

The page's ``python`` blocks need a live server, so they are not doctests: this
runs them in order in one namespace, with the page's URL and ``TOKEN``
pointing at the suite's server and a fresh tenant, and compares what they
print with the ``text`` block after each.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from tests.protocol.conftest import Server

PAGE = Path(__file__).resolve().parents[2] / "docs" / "client.md"
BLOCK = re.compile(r"^```python\n(.*?)^```\n(?:\nprints\n)?\n```text\n(.*?)^```", re.S | re.M)


def test_the_client_page_runs_and_prints_what_it_says(server: Server) -> None:
    pairs = BLOCK.findall(PAGE.read_text())
    assert len(pairs) == 5
    namespace: dict[str, object] = {"TOKEN": server.tenants.take()}
    for code, expected in pairs:
        code = code.replace("http://127.0.0.1:8080", server.url)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(PAGE), "exec"), namespace)
        assert out.getvalue() == expected
