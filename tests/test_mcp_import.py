"""``memstore import --format mcp-memory``: the reference memory.jsonl, whole or not at all."""

from __future__ import annotations

import io
import json
from pathlib import Path

import anyio
import pytest

from memstore.errors import InvalidItemError
from memstore.mcp.graph import KnowledgeGraph
from memstore.mcp.importer import GraphImportError, import_graph
from memstore.memory import Memory
from tests.mcp_harness import in_process, run_cli

GOOD = [
    {"type": "entity", "name": "Alice", "entityType": "person", "observations": ["likes tea"]},
    {"type": "entity", "name": "Acme", "entityType": "company", "observations": ["anvils"]},
    {"type": "entity", "name": "Bob", "entityType": "person", "observations": []},
    {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"},
    {"type": "relation", "from": "Bob", "to": "Alice", "relationType": "knows"},
]


def _jsonl(records: list[object]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def _refused(text: str, says: str, error: type[Exception] = InvalidItemError) -> str:
    """Importing ``text`` raises ``error`` matching ``says`` (a regex) and leaves the
    memory empty; the error's message."""
    with Memory(embedder="hash") as mem:
        with pytest.raises(error, match=says) as err:
            import_graph(mem, io.StringIO(text))
        assert KnowledgeGraph(mem).read() == ([], [])
        assert mem.stats().items == 0
    return str(err.value)


def test_every_entity_observation_and_relation_arrives(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_text(_jsonl(GOOD) + "\n", encoding="utf-8")  # a trailing blank line is fine
    data = tmp_path / "data"
    done = run_cli("import", "--format", "mcp-memory", str(path), "--data", str(data),
                   "--embedder", "hash")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "imported 3 entities, 2 observations, 2 relations" in done.stderr

    async def main() -> None:
        with Memory(data, embedder="hash") as mem:
            async with in_process(mem, compat="knowledge-graph") as c:
                graph = await c.ok("read_graph")
        assert graph == {
            "entities": [{k: v for k, v in r.items() if k != "type"} for r in GOOD[:3]],
            "relations": [{k: v for k, v in r.items() if k != "type"} for r in GOOD[3:]],
        }

    anyio.run(main)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("{not json", "line 3: not JSON"),
        (json.dumps({"type": "entity", "name": "X"}), "line 3: an entity needs"),
        (json.dumps({"type": "relation", "from": "Alice"}), "line 3: a relation needs"),
        (json.dumps({"type": "fact", "text": "x"}), 'line 3: expected an object with "type"'),
        (json.dumps(["a list"]), "line 3: expected an object"),
        (
            json.dumps({"type": "relation", "from": "Alice", "to": "Zed", "relationType": "x"}),
            "line 3: relation names entity 'Zed'",
        ),
        # A lone surrogate (legal JSON) in any text: UnicodeEncodeError, from the write.
        (
            '{"type": "entity", "name": "X\\ud800", "entityType": "t", "observations": []}',
            "line 3: name is not valid Unicode",
        ),
        (
            '{"type": "entity", "name": "X", "entityType": "t", "observations": ["a", "\\udce9"]}',
            "line 3: observations.1 is not valid Unicode",
        ),
        (
            '{"type": "relation", "from": "Alice", "to": "Acme", "relationType": "\\udc00"}',
            "line 3: relationType is not valid Unicode",
        ),
        # A blank name or relation type: the graph tools could never name it again.
        (
            json.dumps({"type": "entity", "name": "", "entityType": "t", "observations": ["a"]}),
            "line 3: name must not be empty or only whitespace",
        ),
        (
            json.dumps({"type": "entity", "name": " \t", "entityType": "t", "observations": []}),
            "line 3: name must not be empty or only whitespace",
        ),
        (
            json.dumps({"type": "relation", "from": " ", "to": "Acme", "relationType": "x"}),
            "line 3: from must not be empty or only whitespace",
        ),
        (
            json.dumps({"type": "relation", "from": "Alice", "to": "", "relationType": "x"}),
            "line 3: to must not be empty or only whitespace",
        ),
        (
            json.dumps({"type": "relation", "from": "Alice", "to": "Acme", "relationType": "\n"}),
            "line 3: relationType must not be empty or only whitespace",
        ),
    ],
)
def test_a_bad_line_is_named_and_nothing_is_kept(bad: str, says: str) -> None:
    text = _jsonl(GOOD[:2]) + bad + "\n" + _jsonl(GOOD[2:])
    message = _refused(text, says.replace("(", r"\("), GraphImportError)
    assert "nothing was imported" in message


def test_importing_into_an_existing_graph_merges() -> None:
    with Memory(embedder="hash") as mem:
        first = import_graph(mem, io.StringIO(_jsonl(GOOD)))
        assert (first.entities, first.observations, first.relations) == (3, 2, 2)
        more = [
            {"type": "entity", "name": "Alice", "entityType": "person",
             "observations": ["likes tea", "plays go"]},
            GOOD[1],
            GOOD[3],
        ]  # fmt: skip
        again = import_graph(mem, io.StringIO(_jsonl(more)))
        assert (again.entities, again.observations, again.relations) == (0, 1, 0)
        entities, relations = KnowledgeGraph(mem).read()
        assert entities[0].observations == ("likes tea", "plays go")
        assert len(relations) == 2


def test_a_file_saved_with_a_byte_order_mark_imports_the_same_graph(tmp_path: Path) -> None:
    """Opened with ``encoding="utf-8"`` the mark stays in line 1: it was ``line 1: not JSON``."""
    path = tmp_path / "memory.jsonl"
    path.write_text(_jsonl(GOOD), encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf{")
    with Memory(embedder="hash") as plain, Memory(embedder="hash") as marked:
        import_graph(plain, io.StringIO(_jsonl(GOOD)))
        with open(path, encoding="utf-8") as fp:
            done = import_graph(marked, fp)
        assert (done.entities, done.observations, done.relations) == (3, 2, 2)
        assert KnowledgeGraph(marked).read() == KnowledgeGraph(plain).read()


def test_an_entity_a_write_refuses_is_named_with_its_lines_and_nothing_is_kept() -> None:
    """Lines joined under one name are all named; a name too long to show is cut."""
    long = "N" * 5_000
    records = [
        *GOOD,
        {"type": "entity", "name": "Ada", "entityType": "p", "observations": ["short"]},
        {"type": "entity", "name": "Ada", "entityType": "p", "observations": ["x" * 200_000]},
    ]
    _refused(_jsonl(records), r"^line 6 \(joined with lines 7\): entity 'Ada': content is")
    named = [{"type": "entity", "name": long, "entityType": "p", "observations": []}]
    _refused(_jsonl(named), r"^line 1: entity 'N{60}'\.\.\. \(5000 characters\): ")


def test_a_relation_a_write_refuses_is_named_with_its_line_and_nothing_is_kept() -> None:
    """It said only ``data holds 100122 characters``: not which line, nor which relation."""
    huge = {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "t" * 100_000}
    _refused(
        _jsonl([*GOOD, huge]),
        r"^line 6: relation 'Alice' -> 'Acme' \('t{60}'\.\.\. \(100000 characters\)\): "
        r"data holds \d+ characters; at most 100000$",
    )


def test_the_relation_that_outgrows_its_source_is_the_one_named() -> None:
    """Relations from one entity are kept on its item: the one crossing the limit is named."""
    kinds = [f"{k}{'k' * 30_000}" for k in "abcd"]  # three fit in Bob's data, the fourth not
    rows = [
        *GOOD,
        {"type": "relation", "from": "Bob", "to": "Acme", "relationType": kinds[0]},
        {"type": "relation", "from": "Alice", "to": "Bob", "relationType": kinds[0]},
        {"type": "relation", "from": "Bob", "to": "Acme", "relationType": kinds[1]},
        {"type": "relation", "from": "Bob", "to": "Acme", "relationType": kinds[0]},  # a repeat
        {"type": "relation", "from": "Alice", "to": "Acme", "relationType": kinds[1]},
        {"type": "relation", "from": "Bob", "to": "Alice", "relationType": kinds[2]},
        {"type": "relation", "from": "Bob", "to": "Alice", "relationType": kinds[3]},  # line 12
        {"type": "relation", "from": "Bob", "to": "Acme", "relationType": kinds[3]},
    ]
    _refused(_jsonl(rows), r"^line 12: relation 'Bob' -> 'Alice' \('dkkk")


HUGE_ENTITY = {"type": "entity", "name": "Ada", "entityType": "p", "observations": ["x" * 200_000]}
HUGE_RELATION = {"type": "relation", "from": "Bob", "to": "Alice", "relationType": "t" * 100_000}
SURROGATE = '{"type": "entity", "name": "\\ud800", "entityType": "t", "observations": []}'


@pytest.mark.parametrize(
    ("text", "embedder", "says"),
    [
        pytest.param(_jsonl(GOOD[:2]) + "oops\n", "hash", ["line 3: not JSON"], id="not JSON"),
        # It printed a Python traceback (UnicodeEncodeError from the entity's id).
        pytest.param(
            _jsonl(GOOD[:2]) + SURROGATE + "\n",
            "none",
            ["line 3: name is not valid Unicode text"],
            id="a lone surrogate",
        ),
        # It exited 2 (a usage error) with the engine's words alone, not naming the
        # file: only "content is 200000 characters", not which of the file's entities.
        pytest.param(
            _jsonl([*GOOD[:2], HUGE_ENTITY]),
            "none",
            ["refused {path}: line 3: entity 'Ada': content is 200000 characters"],
            id="an entity a write refuses",
        ),
        pytest.param(
            _jsonl([*GOOD, HUGE_RELATION]),
            "none",
            [
                "refused {path}: line 6: relation 'Bob' -> 'Alice' ('ttt",
                "(100000 characters)): data holds",
            ],
            id="a relation a write refuses",
        ),
    ],
)
def test_cli_refuses_a_file_in_one_line_as_a_failure_and_writes_nothing(
    tmp_path: Path, text: str, embedder: str, says: list[str]
) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_text(text, encoding="utf-8")
    data = tmp_path / "data"
    done = run_cli("import", "--format", "mcp-memory", str(path), "--data", str(data),
                   "--embedder", embedder)  # fmt: skip
    assert done.returncode == 1, done.stderr  # a refused file is a failure; 2 is for usage errors
    assert done.stderr.strip().count("\n") == 0, done.stderr
    for words in says:
        assert words.format(path=path) in done.stderr, done.stderr
    assert done.stderr.rstrip().endswith("nothing was imported"), done.stderr
    assert not data.exists()
