"""The HTTP defence flags, added once to every command that runs an HTTP server.

``memstore serve`` and ``memstore mcp`` call :func:`add_http_defences`; the
server reads the flags back with :func:`memstore.web.settings.http_settings`.
The names, the defaults and the help are the same for both; only
``--max-body``'s default is each surface's own (MemoryProtocol's 256 KiB, MCP's
4 MiB, the Mind Layer API's 1 MiB), given by the caller for the help and applied
by the server. :data:`~memstore.web.settings.HTTP_OPTIONS` lists what this adds.

``--max-body``, ``--rate-per-second`` and ``--rate-burst`` are stored as ``None``
when not given, so that a server can tell "not given" from "given the default":
:func:`~memstore.web.settings.http_settings` fills in the surface's default, and
the Mind Layer API, which limits no rate unless asked, applies one only when a
rate flag is given (``memstore.mindlayer.server``).
"""

from __future__ import annotations

import argparse

from memstore.web.connections import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_HEADER_TIMEOUT_SECONDS,
    DEFAULT_KEEPALIVE_TIMEOUT_SECONDS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    DEFAULT_MAX_HEADER_BYTES,
)
from memstore.web.ratelimit import DEFAULT_BURST, DEFAULT_RATE_PER_SECOND
from memstore.web.shutdown import DEFAULT_GRACEFUL_SHUTDOWN_SECONDS

from ._common import positive_int, positive_number

__all__ = ["add_http_defences"]


def add_http_defences(
    parser: argparse.ArgumentParser,
    *,
    title: str,
    max_body: int,
    max_body_note: str = "",
    rate_note: str = "",
) -> argparse._ArgumentGroup:
    """Add the HTTP defence flags to ``parser``, in a group headed ``title``; the group.

    ``max_body``: the surface's default for ``--max-body`` (said in the help; the
    server applies it when the flag is not given); ``max_body_note``: a sentence
    after its help (what bounds its surface keeps whatever it says, another API's
    default); ``rate_note``: a sentence after ``--rate-per-second``'s help.
    """
    web = parser.add_argument_group(title)
    web.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME[:PORT]",
        help="a Host the server answers besides 127.0.0.1, localhost and [::1] (repeatable; "
        "'*' for any). Default: none on a loopback bind, any host on a public bind",
    )
    web.add_argument(
        "--allow-origin",
        action="append",
        metavar="URL",
        help="a web origin (https://app.example) whose pages may call the server, with CORS "
        "(repeatable; '*' for any). Default: only the server's own origin, no CORS",
    )
    web.add_argument(
        "--header-timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="time to send a request's headers, else 408 and the connection closes "
        f"(default {DEFAULT_HEADER_TIMEOUT_SECONDS:g})",
    )
    web.add_argument(
        "--body-timeout",
        type=float,
        default=DEFAULT_BODY_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="time to send a whole body after the headers, else the connection closes "
        f"(default {DEFAULT_BODY_TIMEOUT_SECONDS:g})",
    )
    web.add_argument(
        "--keepalive-timeout",
        type=float,
        default=DEFAULT_KEEPALIVE_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="idle time before a keep-alive connection is closed "
        f"(default {DEFAULT_KEEPALIVE_TIMEOUT_SECONDS:g}); an open stream is not idle",
    )
    web.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="open connections in all; more are answered 503 and closed "
        f"(default {DEFAULT_MAX_CONNECTIONS}, lowered to fit ulimit -n)",
    )
    web.add_argument(
        "--max-connections-per-client",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        metavar="N",
        help="open connections per client IP address "
        f"(default {DEFAULT_MAX_CONNECTIONS_PER_CLIENT})",
    )
    web.add_argument(
        "--max-header-bytes",
        type=positive_int,
        default=DEFAULT_MAX_HEADER_BYTES,
        metavar="BYTES",
        help="largest request line and headers; larger is 431 and the connection closes "
        f"(default {DEFAULT_MAX_HEADER_BYTES}, {_size(DEFAULT_MAX_HEADER_BYTES)})",
    )
    web.add_argument(
        "--max-body",
        type=positive_int,
        metavar="BYTES",
        help=f"largest request body; larger is 413 (default {max_body}, {_size(max_body)})"
        + (f". {max_body_note}" if max_body_note else ""),
    )
    web.add_argument(
        "--rate-per-second",
        type=positive_number,
        metavar="N",
        help="requests a second each tenant (a token's tenant) may send once its --rate-burst "
        f"is spent; more are 429 with Retry-After (default {DEFAULT_RATE_PER_SECOND:g})"
        + (f". {rate_note}" if rate_note else ""),
    )
    web.add_argument(
        "--rate-burst",
        type=positive_int,
        metavar="N",
        help=f"requests a tenant may send at once (default {DEFAULT_BURST})",
    )
    web.add_argument(
        "--shutdown-grace",
        type=positive_number,
        metavar="SECONDS",
        help="on SIGTERM or SIGINT, how long requests in flight may still run; "
        "those still running then are answered 503 unavailable with Retry-After "
        f"(default {DEFAULT_GRACEFUL_SHUTDOWN_SECONDS:g})",
    )
    return web


def _size(n: int) -> str:
    """``n`` bytes in KiB or MiB when it is a whole number of them.

    >>> _size(262144), _size(4194304), _size(1000)
    ('256 KiB', '4 MiB', '1000 bytes')
    """
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"
