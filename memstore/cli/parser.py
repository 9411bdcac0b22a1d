"""The command line's grammar: every command, its flags, and what each does."""

from __future__ import annotations

import argparse
from typing import Any, get_args

from memstore import __version__
from memstore.item import Origin
from memstore.limits import MAX_RESULTS
from memstore.mcp.limits import MAX_BODY_BYTES as MCP_MAX_BODY_BYTES
from memstore.protocol.limits import MAX_BODY_BYTES as PROTOCOL_MAX_BODY_BYTES
from memstore.web.journal_option import JOURNAL_HELP

from ._common import (
    DEFAULT_DATA,
    EMBEDDERS,
    hit_count,
    journal_dsn,
    port_number,
    positive_number,
    user_path,
)
from ._http import add_http_defences
from .records import cmd_add, cmd_forget, cmd_get, cmd_search, cmd_stats
from .servers import cmd_mcp, cmd_serve
from .transfer import BACKUP_HELP, cmd_backup, cmd_export, cmd_import

USAGE = """\
examples:
  memstore add "the nightly backup runs at 02:00" --partition ops
  memstore search "when is the backup?" --partition ops
  memstore get ID          memstore forget ID [--hard]          memstore stats
  memstore export [--partition P] [-o FILE]          memstore import FILE
  memstore backup DIR DEST
  memstore serve           (MemoryProtocol 0.1 over HTTP, extra server)
  memstore mcp             (memory for MCP clients, extra mcp)

Every command works on a data folder: --data DIR (default ./data).
'memstore COMMAND --help' says what each command takes.
Exit status: 0 done, 1 not there or cannot be done now, 2 usage error,
128+N stopped by signal N (130 for Ctrl-C).
"""


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line that says where to look (exit status 2)."""

    def error(self, message: str) -> Any:  # argparse types it NoReturn
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memstore",
        description="memstore: an in-process memory engine for AI agents, from the shell.",
        epilog=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"memstore {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str,
        help: str,
        *,
        reads: bool = False,
        json_help: str | None = "print JSON instead of text",
        journal: bool = True,
    ) -> argparse.ArgumentParser:
        """A command with the common flags; ``json_help``: what --json does (None: no --json).

        ``journal``: the command takes ``--journal`` and ``--journal-schema`` as
        the servers do, to work on the memory a server keeps in PostgreSQL.
        """
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument(
            "--data",
            default=DEFAULT_DATA,
            type=user_path,
            metavar="DIR",
            help="the data folder (default ./data)",
        )
        p.add_argument(
            "--embedder",
            default="auto",
            choices=EMBEDDERS,
            help="the embedding model: auto (the one that made the folder's vectors when "
            "memstore ships it, else the local model when installed, else hash), "
            "local, local-int8 (the local model in integer arithmetic: faster, its own "
            "vectors), hash, or none for lexical search only (default auto)",
        )
        if json_help is None:
            p.set_defaults(json=False)
        else:
            p.add_argument("--json", action="store_true", help=json_help)
        if journal:
            p.add_argument(
                "--journal",
                type=journal_dsn,
                help="the PostgreSQL journal a server of --data was given (--journal "
                "postgresql://...): work on that memory, not on the folder's own journal.db",
            )
            p.add_argument(
                "--journal-schema",
                help="the PostgreSQL schema of --journal (default memstore, or the DSN's "
                "memstore_schema), as the server had it",
            )
        if reads:
            p.add_argument(
                "--readonly",
                action="store_true",
                help="open the folder read-only (what a reader beside a running server gets "
                "by itself)",
            )
        return p

    p = command("add", "store a note (plain text becomes a note's content)")
    p.add_argument("text", help="what to remember")
    p.add_argument("--partition", metavar="NAME", help="the partition (tenant) it belongs to")
    p.add_argument(
        "--kind",
        help="what it is: stable_fact, hypothesis, event, watch_item, operational_pattern, "
        "unknown, note (default) or a kind already in the folder",
    )
    p.add_argument(
        "--new-kind", action="store_true", help="allow a --kind nobody has used yet (your own)"
    )
    p.add_argument(
        "--confidence",
        choices=("high", "medium", "low"),
        help="how sure (a stable_fact needs high)",
    )
    p.add_argument(
        "--origin",
        choices=[origin for origin in get_args(Origin) if origin],
        help="where it came from (default: derived)",
    )
    p.add_argument("--subject", help="what or whom it is about")
    p.add_argument(
        "--event-date",
        dest="event_date",
        metavar="DATE",
        help="when it happened, YYYY-MM-DD or RFC 3339 (an event needs one)",
    )
    p.add_argument("--title", help="a short title (searched with extra weight)")
    p.set_defaults(fn=cmd_add)

    p = command("search", "hybrid search: lexical first, semantic when unsure", reads=True)
    p.add_argument("query", help="the words to search for")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--partition",
        metavar="NAME",
        help="search this partition (and untagged and shared items); default: untagged only",
    )
    where.add_argument("--all", action="store_true", help="search every partition")
    p.add_argument("--kind", default="", help="only items of this kind")
    p.add_argument(
        "--limit",
        type=hit_count,
        default=10,
        metavar="N",
        help=f"hits to show, 1..{MAX_RESULTS} (default 10)",
    )
    p.set_defaults(fn=cmd_search)

    p = command(
        "get",
        "print one item as JSON",
        reads=True,
        json_help="print it on one line (default: indented)",
    )
    p.add_argument("id", help="the item's id")
    p.set_defaults(fn=cmd_get)

    p = command(
        "forget",
        "delete an item (soft: its history stays; --hard erases it)",
        json_help='print {"deleted": ID, "hard": true|false} instead of text',
    )
    p.add_argument("id", help="the item's id")
    p.add_argument(
        "--hard", action="store_true", help="erase every version, past included (cannot be undone)"
    )
    p.set_defaults(fn=cmd_forget)

    p = command(
        "export", "write items with their whole history as NDJSON", reads=True, json_help=None
    )
    p.add_argument(
        "--partition",
        metavar="NAME",
        help="only this partition's own items (not the untagged or shared ones a search adds)",
    )
    p.add_argument(
        "-o", "--output", type=user_path, metavar="FILE", help="write to FILE (default: stdout)"
    )
    p.add_argument(
        "--salvage",
        action="store_true",
        help="a journal with damaged rows: export every readable version, naming each one "
        "left out on stderr (import the file into a new folder; docs/journal.md)",
    )
    p.set_defaults(fn=cmd_export)

    p = command(
        "import",
        "load an export (all or nothing; importing twice changes nothing)",
        json_help="print what was imported as JSON on stdout (default: a line on stderr)",
    )
    p.add_argument("file", type=user_path, help="the export file, or - for standard input")
    p.add_argument(
        "--format",
        choices=("memstore", "mcp-memory"),
        default="memstore",
        help="memstore (an export) or mcp-memory (the reference MCP memory server's JSONL)",
    )
    p.add_argument("--partition", help="mcp-memory: the partition the graph goes into")
    p.add_argument(
        "--check-rules",
        action="store_true",
        help="hold every item to the rules a write obeys too (a file from elsewhere); "
        "by default an export is restored as it was",
    )
    p.set_defaults(fn=cmd_import)

    p = command("stats", "counts by partition and kind, and the journal head", reads=True)
    p.set_defaults(fn=cmd_stats)

    p = sub.add_parser(
        "backup",
        help="copy a data folder consistently, while it is in use",
        description=BACKUP_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dir", type=user_path, metavar="DIR", help="the data folder to back up")
    p.add_argument(
        "dest", type=user_path, metavar="DEST", help="the new folder to write the backup to"
    )
    p.set_defaults(fn=cmd_backup, embedder=None)

    p = command(
        "serve",
        "run the HTTP server: MemoryProtocol 0.1, or --api mindlayer",
        json_help=None,
        journal=False,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port", type=port_number, default=8080, help="port to listen on (default 8080)"
    )
    p.add_argument(
        "--tokens-file",
        type=user_path,
        help="the tokens JSON (re-read when it changes and on SIGHUP); "
        "default: DATA/tokens.json, made on a loopback bind",
    )
    p.add_argument(
        "--journal",
        type=journal_dsn,
        help=JOURNAL_HELP,
    )
    p.add_argument(
        "--journal-schema",
        help="the PostgreSQL schema of --journal (default memstore, or the DSN's "
        "memstore_schema); replicas share one",
    )
    p.add_argument(
        "--confirm-key-file",
        type=user_path,
        help="a secret (16+ bytes) keying hard-delete confirmations; default: the tokens file",
    )
    p.add_argument(
        "--metrics-disabled",
        action="store_true",
        help="answer GET /metrics with 404 (it needs no token and names the tenants)",
    )
    p.add_argument(
        "--sse-keepalive",
        type=positive_number,
        default=15.0,
        help="idle seconds before an SSE keep-alive comment (default 15)",
    )
    add_http_defences(
        p,
        title="HTTP defences",
        max_body=PROTOCOL_MAX_BODY_BYTES,
        # The Mind Layer's numbers are typed here, not imported: importing its package
        # costs every command's start-up; tests/mindlayer/test_http_defences.py checks them.
        max_body_note="An episode's content is capped at 16 KiB and a recall query at 4096 "
        "characters whatever this says (docs/protocol.md, Limits). With --api mindlayer "
        "the default is 1 MiB (seed 002's bound) and a larger body is 413 too",
        rate_note="With --api mindlayer no rate is limited unless --rate-per-second or "
        "--rate-burst is given; then every request that passes the owner token takes from "
        "one bucket, the owner's (docs/mindlayer.md, Security)",
    )
    mindlayer = p.add_argument_group("Mind Layer API (--api mindlayer; see docs/mindlayer.md)")
    mindlayer.add_argument(
        "--api",
        choices=("protocol", "mindlayer"),
        default="protocol",
        help="the API served: MemoryProtocol 0.1 (default) or the Mind Layer REST API",
    )
    mindlayer.add_argument(
        "--owner-token-file",
        type=user_path,
        metavar="FILE",
        help="the Mind Layer owner token and a newline (mode 0600; re-read when it changes). "
        "Default: no token, on a loopback bind only",
    )
    p.add_argument(
        "--no-ui",
        action="store_true",
        help="do not serve the browser memory inspector at /ui (served by default)",
    )
    p.set_defaults(fn=cmd_serve)

    p = command(
        "mcp",
        "run the MCP server (memory for MCP clients; extra mcp)",
        json_help=None,
        journal=False,
    )
    p.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (the client starts the server; default) or http (streamable HTTP at /mcp)",
    )
    p.add_argument("--host", default="127.0.0.1", help="--transport http: address (127.0.0.1)")
    p.add_argument("--port", type=port_number, default=8765, help="--transport http: port (8765)")
    p.add_argument("--partition", help="the partition every call reads and writes")
    p.add_argument(
        "--journal",
        type=journal_dsn,
        help=JOURNAL_HELP,
    )
    p.add_argument(
        "--journal-schema",
        help="the PostgreSQL schema of --journal (default memstore, or the DSN's memstore_schema)",
    )
    p.add_argument("--readonly", action="store_true", help="serve reads only")
    p.add_argument("--compat", choices=("knowledge-graph",), help="the reference server's tools")
    p.add_argument(
        "--tokens-file",
        type=user_path,
        help="bearer tokens (needed off loopback, --transport http)",
    )
    add_http_defences(
        p,
        title="HTTP defences (--transport http only; the same as memstore serve's)",
        max_body=MCP_MAX_BODY_BYTES,
    )
    p.set_defaults(fn=cmd_mcp)
    return parser
