"""Servers the tests start on a free loopback port, started again when the port was taken.

A free port is found by binding port 0 and closing the socket: the number is
free only until the server, started after, binds it, seconds later (its
imports come first). Meanwhile any process may take it (a parallel test's
server on port 0, an outgoing connection), and the server exits 1 with
``address already in use`` (``memstore serve`` and ``memstore mcp`` bind
before anything else, so such a refusal made nothing). :func:`on_free_port`
then starts it again on another free port.

Nor does a port that answers prove the server is up: another process that
took the port answers too. :func:`wait_listening` waits until the started
process *itself* holds a listening socket on the port (Linux's ``/proc``);
from then on a connection to it reaches that process, waiting in its
backlog until it serves.

One helper for the three harnesses that start servers: the protocol suite's
(``tests/protocol/conftest.py``), the MCP tests' (``tests/mcp_harness.py``)
and the Mind Layer suite's (``tests/mindlayer/conftest.py``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "PORT_TRIES",
    "PortTaken",
    "free_port",
    "listens_on",
    "on_free_port",
    "wait_listening",
]

PORT_TRIES = 5
"""How many free ports :func:`on_free_port` tries when the one it picked was taken."""
START_S = 60.0
"""The longest a server may take to listen (a hang guard, not a measurement)."""
_IN_USE = "address already in use"
"""What a server started on a taken port says (``memstore.web.listen``, errno's words)."""
_LISTEN = "0A"
"""A listening socket's state in ``/proc/net/tcp``."""

Started = TypeVar("Started")


class PortTaken(RuntimeError):
    """The server exited, refused its port: another process took it first."""


def free_port() -> int:
    """A loopback port free now (nobody holds it once this returns; see the module)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def on_free_port(start: Callable[[int], Started], port: int | None = None) -> Started:
    """``start(port)`` on a free port, tried again on another while it raises :class:`PortTaken`.

    ``start`` starts the server and waits until it listens (:func:`wait_listening`),
    stopping it on any failure. With ``port`` given, that port is the only one
    tried: a caller that chose it (to start a server again where it was) is
    told it was taken.
    """
    if port is not None:
        return start(port)
    for attempt in range(1, PORT_TRIES + 1):
        try:
            return start(free_port())
        except PortTaken:
            if attempt == PORT_TRIES:
                raise
    raise AssertionError("unreachable: the last try returns or raises")


def wait_listening(
    proc: subprocess.Popen[Any], port: int, said: Callable[[], str], timeout: float = START_S
) -> None:
    """Wait until ``proc`` listens on ``port`` itself; kill it and raise if it never does.

    ``said`` reads what the process wrote (its log), for the error.

    :raises PortTaken: it exited saying the address was in use.
    :raises RuntimeError: it exited otherwise, or did not listen within ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while not listens_on(proc.pid, port):
        code = proc.poll()
        if code is not None:
            output = said()
            if _IN_USE in output.lower():
                raise PortTaken(f"port {port} was taken before the server bound it")
            raise RuntimeError(f"the server exited with {code}; it said:\n{output}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"the server did not listen on {port}; it said:\n{said()}")
        time.sleep(0.05)


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a TCP socket listening on ``port`` (any address).

    Its sockets are the ``socket:[inode]`` links among ``/proc/PID/fd``; the
    system's TCP tables (``/proc/PID/net/tcp`` and ``tcp6``) say which inode
    listens where.
    """
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # exited meanwhile
        return False
    inodes = set()
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed since the listing (the listing's own, for this process)
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    if not inodes:
        return False
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == _LISTEN and inode in inodes and int(local.rsplit(":", 1)[1], 16) == port:
                return True
    return False
