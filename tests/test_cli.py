"""The memstore command, run as a user runs it (a real process per call)."""

from __future__ import annotations

import argparse
import json
import re
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

from memstore.cli import build_parser
from tests.cli_harness import ENV, holding, memstore, seed


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
    assert imported.returncode == 0 and "imported 1 item(s), 0 unchanged" in imported.stderr

    assert memstore("forget", item["id"], cwd=tmp_path).returncode == 0
    assert memstore("get", item["id"], cwd=tmp_path).returncode == 1
    stats = json.loads(memstore("stats", "--json", cwd=tmp_path).stdout)
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
    assert bogus.returncode == 1 and "No such file" in bogus.stderr


# --------------------------------------------------------------- the first hour


def test_help_is_plain_text_and_every_flag_says_what_it_does(tmp_path: Path) -> None:
    top = memstore("--help", cwd=tmp_path)
    assert top.returncode == 0 and "``" not in top.stdout and "examples:" in top.stdout
    assert memstore("--version", cwd=tmp_path).stdout.startswith("memstore ")
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    silent = [
        f"{name} {'/'.join(action.option_strings) or action.dest}"
        for name, sub in commands.choices.items()
        for action in sub._actions
        if action.help in (None, "") and not isinstance(action, argparse._HelpAction)
    ]
    assert silent == [], f"flags without help: {silent}"
    serve = memstore("serve", "--help", cwd=tmp_path).stdout
    for flag in ("--host", "--port", "--max-body", "--header-timeout", "--max-connections"):
        assert flag in serve


def test_the_servers_journal_help_names_the_timeouts_its_dsn_sets(tmp_path: Path) -> None:
    """docs/journal.md describes them; ``--help`` said only "a postgresql:// DSN"."""
    for command in ("serve", "mcp"):
        shown = memstore(command, "--help", cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        for name in ("statement_timeout", "close_timeout", "lock_timeout"):
            assert f"memstore_{name}" in shown.stdout, (command, shown.stdout)


def test_an_unknown_kind_is_refused_with_the_known_ones_and_nothing_is_created(
    tmp_path: Path,
) -> None:
    typo = memstore("add", "x", "--kind", "stable-fact", "--embedder", "hash", cwd=tmp_path)
    assert typo.returncode == 2
    assert "did you mean 'stable_fact'?" in typo.stderr and "note" in typo.stderr
    assert len(typo.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "data").exists(), "a refused add creates nothing"
    own = memstore("add", "x", "--kind", "recipe", "--new-kind", "--embedder", "hash", cwd=tmp_path)
    assert own.returncode == 0, own.stderr
    again = memstore("add", "y", "--kind", "recipe", "--embedder", "hash", cwd=tmp_path)
    assert again.returncode == 0, "a kind already in the folder is known"


def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    sure = memstore("add", "x", "--confidence", "sure", cwd=tmp_path)
    assert sure.returncode == 2 and len(sure.stderr.strip().splitlines()) == 1
    assert "'high', 'medium', 'low'" in sure.stderr
    limit = memstore("search", "x", "--limit", "-1", cwd=tmp_path)
    assert limit.returncode == 2 and "at least 1" in limit.stderr
    empty = memstore("search", "", cwd=tmp_path)
    assert empty.returncode == 2 and "query is empty" in empty.stderr
    rule = memstore("add", "x", "--kind", "stable_fact", "--confidence", "low", cwd=tmp_path)
    assert rule.returncode == 2 and "needs confidence 'high'" in rule.stderr
    assert len(rule.stderr.strip().splitlines()) == 1


def test_read_commands_never_create_a_memory(tmp_path: Path) -> None:
    for command in (["stats"], ["search", "x"], ["get", "x"], ["export"]):
        done = memstore(*command, "--data", str(tmp_path / "typo" / "dir"), cwd=tmp_path)
        assert done.returncode == 1 and "no memory in" in done.stderr, command
    assert not (tmp_path / "typo").exists()


def test_stats_is_a_table_and_json_on_request(tmp_path: Path) -> None:
    for text, part in (("a", "ops"), ("b", "ops"), ("c", None)):
        extra = ["--partition", part] if part else []
        assert memstore("add", text, *extra, "--embedder", "none", cwd=tmp_path).returncode == 0
    table = memstore("stats", cwd=tmp_path)
    assert table.returncode == 0 and not table.stdout.lstrip().startswith("{")
    assert re.search(r"^ops\s+2$", table.stdout, re.M) and re.search(
        r"^\(none\)\s+1$", table.stdout, re.M
    )
    report = json.loads(memstore("stats", "--json", cwd=tmp_path).stdout)
    assert report["items"] == 3 and report["partitions"] == {"": 1, "ops": 2}
    assert report["kinds"] == {"note": 3}


def test_search_says_when_partitioned_items_exist(tmp_path: Path) -> None:
    memstore(
        "add", "the backup runs at 02:00", "--partition", "ops", "--embedder", "none", cwd=tmp_path
    )
    plain = memstore("search", "backup", "--embedder", "none", cwd=tmp_path)
    assert plain.returncode == 0 and plain.stdout == ""
    assert "partitions here: ops (1)" in plain.stderr and "--all" in plain.stderr
    every = memstore("search", "backup", "--all", "--embedder", "none", cwd=tmp_path)
    assert "the backup runs" in every.stdout


def test_export_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    code = (
        "from memstore import Memory\n"
        "with Memory('data', embedder=None) as m:\n"
        "    m.add_many([f'note {i} ' + 'padding ' * 20 for i in range(3000)])\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=ENV, check=True)
    done = subprocess.run(
        f"{sys.executable} -m memstore.cli export | head -1",
        shell=True,
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert done.stdout.startswith('{"format"')
    assert "Broken pipe" not in done.stderr and "Traceback" not in done.stderr


def test_a_failed_export_leaves_the_file_it_was_to_replace_as_it_was(tmp_path: Path) -> None:
    code = (
        "from memstore import Memory\n"
        "with Memory('data', embedder=None) as m:\n"
        "    m.add('the on-call rota changed', id='rota')\n"
        "    m.update('rota', content='the on-call rota changed again')\n"
        "    m.add_many([f'note {i}' for i in range(50)])\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=ENV, check=True)
    out = tmp_path / "backup.ndjson"
    assert memstore("export", "-o", str(out), cwd=tmp_path).returncode == 0
    good = out.read_bytes()
    db = sqlite3.connect(tmp_path / "data" / "journal.db")  # an old version goes bad on disk
    db.execute("UPDATE versions SET item = '{not json' WHERE id = 'rota' AND to_lsn IS NOT NULL")
    db.commit()
    db.close()
    failed = memstore("export", "-o", str(out), cwd=tmp_path)
    assert failed.returncode == 1 and "unreadable" in failed.stderr
    assert out.read_bytes() == good, "the last good export was cut short"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.ndjson", "data"]
    fresh = memstore("export", "-o", str(tmp_path / "new.ndjson"), cwd=tmp_path)
    assert fresh.returncode == 1 and not (tmp_path / "new.ndjson").exists()


def test_import_reports_what_changed_and_draws_no_bar_off_a_terminal(tmp_path: Path) -> None:
    seed(tmp_path / "data", "one", "two")  # one process, not an add each
    out = tmp_path / "e.ndjson"
    assert memstore("export", "-o", str(out), cwd=tmp_path).returncode == 0
    fresh = memstore("import", str(out), "--data", "b", "--embedder", "none", cwd=tmp_path)
    assert "imported 2 item(s), 0 unchanged" in fresh.stderr and "\r" not in fresh.stderr
    again = memstore("import", str(out), "--data", "b", "--embedder", "none", cwd=tmp_path)
    assert "imported 0 item(s), 2 unchanged" in again.stderr
    bad = tmp_path / "bad.ndjson"
    bad.write_text(out.read_text() + "{not json\n")
    refused = memstore("import", str(bad), "--data", "c", "--embedder", "none", cwd=tmp_path)
    assert refused.returncode == 1 and "nothing was imported" in refused.stderr
    deep = memstore("import", str(bad), "--data", "n/e/w", "--embedder", "none", cwd=tmp_path)
    assert deep.returncode == 1 and "nothing was imported" in deep.stderr
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["b", "bad.ndjson", "data", "e.ndjson"], "a refused import creates nothing"
    nested = memstore("import", str(out), "--data", "n/e/w", "--embedder", "none", cwd=tmp_path)
    assert nested.returncode == 0 and "imported 2 item(s)" in nested.stderr
    listed = memstore("search", "one", "--data", "n/e/w", "--embedder", "none", cwd=tmp_path)
    assert "one" in listed.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [*left[:3], "e.ndjson", "n"]
    for graph in ("missing.jsonl", str(bad)):  # the MCP memory server's file: the same rule
        mcp = memstore("import", "--format", "mcp-memory", graph, "--data", "m", cwd=tmp_path)
        assert mcp.returncode == 1 and not (tmp_path / "m").exists(), mcp.stderr


def test_an_export_cut_short_is_refused_by_import(tmp_path: Path) -> None:
    """A copy that stopped at a line boundary imported what it had, and the rest was lost."""
    seed(tmp_path / "data", "one", "two", "three")  # one process, not an add each
    out = tmp_path / "e.ndjson"
    assert memstore("export", "-o", str(out), cwd=tmp_path).returncode == 0
    cut = tmp_path / "cut.ndjson"
    cut.write_text("".join(out.read_text().splitlines(keepends=True)[:3]))  # header, 2 items
    refused = memstore("import", str(cut), "--data", "b", "--embedder", "none", cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "cut off" in refused.stderr and "nothing was imported" in refused.stderr
    assert not (tmp_path / "b").exists()


def test_a_folder_held_by_a_writer_is_read_read_only(tmp_path: Path) -> None:
    with holding(tmp_path, before="m.add('the vault code is 1234')\n"):
        found = memstore("search", "vault", "--embedder", "none", cwd=tmp_path)
        assert found.returncode == 0 and "the vault code" in found.stdout
        assert "read-only" in found.stderr
        quiet = memstore("stats", "--readonly", "--json", cwd=tmp_path)
        assert quiet.returncode == 0 and json.loads(quiet.stdout)["items"] == 1
        assert "read-only" not in quiet.stderr, "asked for on purpose: nothing to say"
        write = memstore("add", "blocked", "--embedder", "none", cwd=tmp_path)
        assert write.returncode == 1 and "being written by another process" in write.stderr


def test_a_port_outside_1_to_65535_is_a_usage_error_before_anything_opens(tmp_path: Path) -> None:
    for command in (["serve"], ["mcp", "--transport", "http"]):
        for port in ("99999", "-5", "0", "http"):
            # timeout: a hang guard, 99999 used to be served (as port 34463) until killed
            done = memstore(*command, "--port", port, cwd=tmp_path, timeout=30)
            assert done.returncode == 2, (command, port, done.stderr)
            assert "--port" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "data").exists(), "a refused serve opens no folder"


def test_serve_refuses_rates_and_keepalives_that_cannot_work(tmp_path: Path) -> None:
    bad = [
        ("--rate-per-second", "0"),
        ("--rate-per-second", "-1"),
        ("--rate-per-second", "nan"),
        ("--rate-burst", "0"),
        ("--sse-keepalive", "0"),  # used to send keep-alive comments without pause
        ("--sse-keepalive", "-1"),
        ("--sse-keepalive", "inf"),
    ]
    for flag, value in bad:
        # timeout: a hang guard, --sse-keepalive 0 used to be served
        done = memstore("serve", "--embedder", "hash", flag, value, cwd=tmp_path, timeout=30)
        assert done.returncode == 2, (flag, value, done.stderr)
        assert flag in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "data").exists(), "a refused serve creates no folder and no token"


def test_python_dash_m_memstore_is_the_command(tmp_path: Path) -> None:
    # Where the venv's scripts are not on PATH, `python -m memstore` is what one types.
    added = memstore("add", "the backup runs nightly", cwd=tmp_path, module="memstore")
    assert added.returncode == 0, added.stderr
    found = memstore("search", "backup", cwd=tmp_path, module="memstore")
    assert found.returncode == 0 and "the backup runs nightly" in found.stdout
    assert memstore("--version", cwd=tmp_path, module="memstore").returncode == 0


def test_a_tilde_in_a_path_means_home_even_where_no_shell_expands_it(tmp_path: Path) -> None:
    # An MCP client runs `memstore mcp --data ~/.memstore/x` with no shell, and bash leaves
    # `--data=~/x` alone: before, each made a folder literally named "~" in the cwd.
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return memstore(*args, cwd=cwd, env={"HOME": str(home)})

    added = run("add", "kept at home", "--data=~/mem", "--embedder", "hash")
    assert added.returncode == 0, added.stderr
    assert (home / "mem" / "journal.db").is_file()
    assert run("export", "--data", "~/mem", "-o", "~/mem.ndjson").returncode == 0
    assert "kept at home" in (home / "mem.ndjson").read_text()
    assert run("backup", "~/mem", "~/mem-copy").returncode == 0
    assert (home / "mem-copy" / "journal.db").is_file()
    assert list(cwd.iterdir()) == []  # no "~" folder where the command ran


def test_importing_the_reference_servers_file_without_its_format_says_which_flag(
    tmp_path: Path,
) -> None:
    # Before: "not a memstore export (the first line must name format ...)" and nothing
    # more, leaving someone migrating from @modelcontextprotocol/server-memory stuck.
    graph = tmp_path / "memory.jsonl"
    graph.write_text('{"type":"entity","name":"Ada","entityType":"person","observations":[]}\n')
    done = memstore("import", str(graph), "--data", "mem", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.rstrip().endswith("add --format mcp-memory)"), done.stderr
    assert done.stderr.count("\n") == 1 and not (tmp_path / "mem").exists()
    (tmp_path / "other.ndjson").write_text('{"a": 1}\n')  # no hint for anything else
    other = memstore("import", "other.ndjson", "--data", "mem", cwd=tmp_path)
    assert other.returncode == 1 and "mcp-memory" not in other.stderr
    fixed = memstore("import", str(graph), "--format", "mcp-memory", "--data", "mem", cwd=tmp_path)
    assert fixed.returncode == 0 and "imported 1 entities" in fixed.stderr


def test_a_journal_that_is_not_a_postgres_dsn_is_a_usage_error_in_cli_words(
    tmp_path: Path,
) -> None:
    # Before: `serve --journal data/journal.db` opened the tokens file, then failed with
    # exit 1 and "pass a Journal object ... give Memory a folder path instead" (Python's
    # words, not the command line's).
    for command in ("serve", "mcp"):
        done = memstore(command, "--journal", "old/journal.db", "--data", "d", cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "--journal: takes a postgresql:// DSN" in done.stderr
        assert "journal.db in the --data folder" in done.stderr
        assert "Memory" not in done.stderr and not (tmp_path / "d").exists()
    typo = memstore("serve", "--journal", "postgressql://me:s3cret@db/x", cwd=tmp_path)
    assert typo.returncode == 2 and "s3cret" not in typo.stderr


def test_searching_a_partition_no_item_is_in_says_which_there_are(tmp_path: Path) -> None:
    # Before: `search ... --partition opz` (a typo of ops) answered the untagged items, or
    # nothing, and said nothing: the user could not tell a typo from an empty memory.
    common = ("--data", "m", "--embedder", "hash")
    assert memstore("add", "the nightly backup runs at 02:00", "--partition", "ops", *common,
                    cwd=tmp_path).returncode == 0  # fmt: skip
    typo = memstore("search", "backup", "--partition", "opz", *common, cwd=tmp_path)
    assert typo.returncode == 0
    assert typo.stderr.strip() == (
        "memstore: no item here is in partition 'opz': did you mean 'ops'? partitions here: ops (1)"
    )
    right = memstore("search", "backup", "--partition", "ops", *common, cwd=tmp_path)
    assert right.returncode == 0 and right.stderr == "" and "nightly backup" in right.stdout


def test_a_search_that_finds_nothing_says_so_on_stderr(tmp_path: Path) -> None:
    # docs/getting-started.md: exit 0 for a search that found nothing, "it says so on
    # stderr". Before, a search of a memory with no match printed nothing at all.
    common = ("--data", "m", "--embedder", "none")
    assert (
        memstore("add", "the nightly backup runs at 02:00", *common, cwd=tmp_path).returncode == 0
    )
    none = memstore("search", "zebra", *common, cwd=tmp_path)
    assert none.returncode == 0 and none.stdout == ""
    assert none.stderr == "memstore: no hit for 'zebra'\n"
    as_json = memstore("search", "zebra", "--json", *common, cwd=tmp_path)
    assert as_json.returncode == 0 and as_json.stdout == "" and "no hit" in as_json.stderr
    found = memstore("search", "backup", *common, cwd=tmp_path)
    assert "nightly backup" in found.stdout and found.stderr == ""
    # a hint that already says why (a partition no item is in) is the one line
    typo = memstore("search", "zebra", "--partition", "opz", *common, cwd=tmp_path)
    assert len(typo.stderr.strip().splitlines()) == 1 and "partition 'opz'" in typo.stderr


def test_exporting_a_partition_no_item_is_in_says_which_there_are(tmp_path: Path) -> None:
    # Before: `export --partition opz` (a typo of ops) exported 0 items, exit 0, and no
    # word of why; as search does, it now says which partitions there are (still exit 0).
    common = ("--data", "m", "--embedder", "hash")
    assert memstore("add", "the nightly backup runs at 02:00", "--partition", "ops", *common,
                    cwd=tmp_path).returncode == 0  # fmt: skip
    for output in (("-o", "x.ndjson"), ()):
        typo = memstore("export", "--partition", "opz", *output, *common, cwd=tmp_path)
        assert typo.returncode == 0
        assert typo.stderr.splitlines() == [
            "exported 0 item(s)",
            "memstore: no item here is in partition 'opz': did you mean 'ops'? "
            "partitions here: ops (1)",
        ]
        right = memstore("export", "--partition", "ops", *output, *common, cwd=tmp_path)
        assert (right.returncode, right.stderr) == (0, "exported 1 item(s)\n")


def test_a_server_on_a_folder_another_process_writes_is_told_what_the_command_line_offers(
    tmp_path: Path,
) -> None:
    """Before: ``memstore serve`` (either API) on a folder a running writer holds exited
    with the engine's words, "... close that one, or open this one with readonly=True":
    a Python option, which no command takes (and ``memstore serve`` has no read-only
    mode). Now it names the folder and what the command line offers."""
    from memstore import Memory

    with Memory(tmp_path / "data", embedder=None):  # the writer's lock, held by this process
        for api in ("protocol", "mindlayer"):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = str(s.getsockname()[1])
            done = memstore(
                "serve", "--api", api, "--data", "data", "--port", port, "--embedder", "none",
                cwd=tmp_path,
            )  # fmt: skip
            assert done.returncode == 1, (api, done.stderr)
            last = done.stderr.strip().splitlines()[-1]
            assert last.startswith("memstore: data is being written by another process"), last
            assert "own --data folder" in last and "--journal postgresql://" in last, last
            assert "readonly=True" not in done.stderr, done.stderr
