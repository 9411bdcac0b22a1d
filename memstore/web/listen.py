"""Take the listening address before anything else starts.

A server that finds its port taken only when uvicorn binds has by then opened
its storage, written its tokens file and printed that it is serving. Binding
first turns a port in use into a one-line refusal that changes nothing.

:func:`listen` binds the way uvicorn (through asyncio's ``create_server``)
would bind ``host`` and ``port`` itself: one socket for every address the
host resolves to (``localhost`` is 127.0.0.1 and ``::1``), ``SO_REUSEADDR``
set, IPv6 sockets IPv6-only. :func:`~memstore.web.runner.serve_app` then
serves on those sockets (``ServeConfig.sockets``). They listen from the
start (on Linux, a socket bound with ``SO_REUSEADDR`` but not listening keeps
nobody else off its port): a client that connects while the server is still
opening its storage waits in the backlog, and is answered once it serves.

>>> socks = listen("127.0.0.1", 0)
>>> port = socks[0].getsockname()[1]  # port 0: the system chose one
>>> listen("127.0.0.1", port)
Traceback (most recent call last):
...
memstore.web.listen.ListenError: cannot listen on http://127.0.0.1:...: address already in use
>>> close_all(socks)
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from collections.abc import Iterator, Sequence

__all__ = [
    "BACKLOG",
    "ListenError",
    "base_url",
    "close_all",
    "listen",
    "listening",
]

BACKLOG = 2048
"""Connections the system queues before the server accepts them (uvicorn's default)."""


class ListenError(OSError):
    """The address cannot be listened on (in use, not this machine's, not a host name)."""


def base_url(host: str, port: int) -> str:
    """The URL a client writes for ``host:port``: an IPv6 address in brackets.

    >>> base_url("::1", 8080), base_url("127.0.0.1", 80)
    ('http://[::1]:8080', 'http://127.0.0.1:80')
    """
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address of ``host`` at ``port`` (0: a free one).

    :raises ListenError: naming the address and why, with nothing left bound.
    """
    try:
        infos = socket.getaddrinfo(
            host or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE
        )
    except socket.gaierror as e:
        raise ListenError(f"cannot listen on {base_url(host, port)}: {e.strerror}") from None
    socks: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)  # only a listening socket holds the port against another bind
            sock.set_inheritable(True)
    except OSError as e:
        close_all(socks)
        why = "address already in use" if e.errno == errno.EADDRINUSE else _reason(e)
        raise ListenError(f"cannot listen on {base_url(host, port)}: {why}") from None
    return socks


@contextlib.contextmanager
def listening(host: str, port: int) -> Iterator[list[socket.socket]]:
    """:func:`listen`, and every socket closed when the block ends (a server that has stopped).

    :raises ListenError: as :func:`listen`, before the block runs.
    """
    socks = listen(host, port)
    try:
        yield socks
    finally:
        close_all(socks)


def close_all(socks: Sequence[socket.socket]) -> None:
    """Close every socket (a server that will not start lets its address go)."""
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.close()


def _reason(e: OSError) -> str:
    text = e.strerror or (os.strerror(e.errno) if e.errno else str(e))
    return text[:1].lower() + text[1:]
