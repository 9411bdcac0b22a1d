"""The commands that run a server: ``serve`` (MemoryProtocol or Mind Layer) and ``mcp``.

Each imports its server only when run, so the other commands need none of
the optional extras. Each checks ``--journal`` against the journal the
``--data`` folder records (:func:`~memstore.cli._journal.journal_refusal`, as
every data command does) before its server opens or makes anything.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

from memstore.web.settings import HTTP_OPTIONS

from ._journal import journal_refusal

_PROTOCOL_ONLY = {
    "sse_keepalive": "the Mind Layer API streams no answer (it has no SSE to keep alive)",
    "confirm_key_file": "the Mind Layer API has no hard delete to confirm (it deletes logically)",
}
"""``memstore serve`` options the MemoryProtocol server applies and the Mind Layer one has
no use for, each with the reason said when it is given: refused rather than ignored. (The
HTTP defences, ``--max-body`` and the rates included, apply to both.)"""


def cmd_serve(args: argparse.Namespace) -> int:
    if args.api != "mindlayer" and args.owner_token_file:
        print(
            "memstore: --owner-token-file is for --api mindlayer (this takes --tokens-file)",
            file=sys.stderr,
        )
        return 2
    if _journal_refused(args):
        return 2
    module = "memstore.mindlayer.server" if args.api == "mindlayer" else "memstore.protocol.server"
    server = _extra(module, "serve", "server")
    if server is None:
        return 1
    if args.api == "mindlayer":  # its own API and auth; the inspector rides on the protocol's
        from .parser import build_parser  # the parser names these commands: imported here

        flag = _changed(args, build_parser().parse_args(["serve"]), tuple(_PROTOCOL_ONLY))
        if flag:  # an option asked for that would not apply: refused
            why = _PROTOCOL_ONLY[flag.removeprefix("--").replace("-", "_")]
            print(
                f"memstore: {flag} is MemoryProtocol's, not for --api mindlayer: {why} "
                "(docs/mindlayer.md)",
                file=sys.stderr,
            )
            return 2
        code: int = server.serve(args)
        return code
    mounts = []
    if not getattr(args, "no_ui", False):  # the browser inspector at /ui (memstore.ui)
        mounts.append(importlib.import_module("memstore.ui").install)
    code = server.serve(args, mounts=mounts)
    return code


def _journal_refused(args: argparse.Namespace) -> bool:
    """Whether ``--journal`` is not the ``--data`` folder's (said on stderr, as the data
    commands say it): a server given another would serve, and record, another memory.

    A ``--journal`` or ``--journal-schema`` that names no journal at all is left to
    the server, which refuses it in its own words before opening anything.
    """
    try:
        why = journal_refusal(
            args.data, args.journal, getattr(args, "journal_schema", None), server=True
        )
    except (ValueError, ImportError):  # JournalOptionError is a ValueError; psycopg missing
        return False
    if why:
        print(f"memstore: {why}", file=sys.stderr)
    return bool(why)


def _changed(
    args: argparse.Namespace, defaults: argparse.Namespace, names: tuple[str, ...]
) -> str | None:
    """The flag of the first of ``names`` given a value other than its default, if any."""
    for name in names:
        if getattr(args, name) != getattr(defaults, name):
            return "--" + name.replace("_", "-")
    return None


_HTTP_ONLY = ("host", "port", "tokens_file", *HTTP_OPTIONS)
"""``memstore mcp`` options only its HTTP transport uses: the address, the tokens and every
HTTP defence (stdio has no connections to cap or time out, no Host, no bodies beyond its
client's lines, and it ends when its client does: no requests in flight to give
``--shutdown-grace`` to). Given with stdio, they are refused rather than ignored."""


def cmd_mcp(args: argparse.Namespace) -> int:
    if args.transport != "http":  # stdio would start, silent, on a terminal's input
        from .parser import build_parser

        flag = _changed(args, build_parser().parse_args(["mcp"]), _HTTP_ONLY)
        if flag:
            print(
                f"memstore mcp: {flag} is for --transport http; stdio (the default) "
                "serves the client that started it on standard input and output",
                file=sys.stderr,
            )
            return 2
    if _journal_refused(args):
        return 2
    run = _extra("memstore.mcp.run", "mcp", "mcp")
    if run is None:
        return 1
    code: int = run.serve(args)
    return code


def _extra(module: str, command: str, extra: str) -> ModuleType | None:
    """``module``, or None after saying which extra ``memstore COMMAND`` needs installed.

    A missing extra is a failure (exit status 1): the command line was right, the
    installation lacks a part.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        print(
            f"memstore {command} needs the {extra} extra ({e.name} is missing): "
            f'pip install "memstore-engine[{extra}]"',
            file=sys.stderr,
        )
        return None
