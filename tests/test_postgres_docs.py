"""The examples of ``docs/postgres.md`` run as written, against the test server.

The page's ``python`` blocks are not doctests (a doctest cannot skip when
there is no server); this runs them in order in one namespace, with the
page's DSN and schema replaced by the test server's and a fresh schema.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.pgtest import PgPlace

PAGE = Path(__file__).resolve().parents[1] / "docs" / "postgres.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_the_postgres_page_runs(pg_place: PgPlace) -> None:
    blocks = BLOCK.findall(PAGE.read_text())
    assert len(blocks) >= 4
    code = "\n".join(blocks)
    assert 'DSN = "postgresql://app@db.internal/memory"' in code and 'schema="agents"' in code
    code = code.replace("postgresql://app@db.internal/memory", pg_place.dsn)
    code = code.replace('schema="agents"', f'schema="{pg_place.schema}"')
    code = code.replace('== "agents"', f'== "{pg_place.schema}"')
    # agents_staging becomes the test's schema with _staging: dropped at the end of the run.
    code = code.replace("memstore_schema=agents", f"memstore_schema={pg_place.schema}")
    exec(compile(code, str(PAGE), "exec"), {})
