"""A TCP proxy in front of PostgreSQL that cuts chosen connections, or falls silent.

Real network failures at a moment a test chooses: the proxy forwards every
byte both ways, and for the next ``n`` connections whose start-up message
names an ``application_name`` starting with a given prefix it lets the
start-up through (the server accepts the connection), then closes both
sockets as soon as the client sends its first query. The client sees a
connection that opened and then died under its first statement, as when a
server restarts or ``pg_terminate_backend`` lands just after a connect.

:meth:`CuttingProxy.silence` makes it stop forwarding, both ways, on every
connection (and hold new ones before their start-up reaches the server),
without closing anything: what a client sees of a dropped route or a firewall
eating packets, or of a frozen server process. It forwards again after
:meth:`CuttingProxy.speak`. (Its own kernel still acknowledges what the client
sends, and TCP keepalive probes: only a bound above TCP, or closing the
client's socket, ends a wait on it.)

It listens on 127.0.0.1 only. The DSN it gives turns TLS and GSS encryption
off, so that the client's first message is the plain start-up message.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

from psycopg.conninfo import conninfo_to_dict, make_conninfo

_PROTOCOL_3 = 196608
_BUFFER = 65536


class CuttingProxy:
    """``CuttingProxy(dsn)``: a proxy to the server ``dsn`` names; ``.dsn`` goes through it."""

    def __init__(self, dsn: str) -> None:
        target = conninfo_to_dict(dsn)
        self._target = (str(target.get("host", "127.0.0.1")), int(target.get("port", 5432)))
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        self.dsn = make_conninfo(
            dsn, host="127.0.0.1", port=port, sslmode="disable", gssencmode="disable"
        )
        self._lock = threading.Lock()
        self._cuts: list[tuple[str, int]] = []
        self.cut = 0
        """Connections cut so far."""
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._open = threading.Event()
        self._open.set()
        self.held = threading.Event()
        """Set once bytes arrived that silence held back (a client waits on them)."""
        threading.Thread(target=self._accept, daemon=True, name="pgproxy").start()

    def cut_next(self, name_prefix: str, n: int = 1) -> None:
        """Cut the next ``n`` connections whose application_name starts with ``name_prefix``."""
        with self._lock:
            self._cuts.append((name_prefix, n))

    def silence(self) -> None:
        """Stop forwarding anything, on every connection, until :meth:`speak`."""
        self.held.clear()
        self._open.clear()

    def speak(self) -> None:
        """Forward again (what was held back goes on, in order)."""
        self._open.set()

    def close(self) -> None:
        self._closed = True
        _close(self._listener)  # shut first: a close alone leaves a pending accept() accepting
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            _close(s)
        self._open.set()  # held pumps end on the closed sockets, forwarding nothing

    def __enter__(self) -> CuttingProxy:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self._wait_open()
        try:
            server = socket.create_connection(self._target, timeout=10)
        except OSError:
            _close(client)
            return
        server.settimeout(None)
        with self._lock:
            self._sockets += [client, server]
        try:
            head = _recv_exact(client, 4)
            startup = head + _recv_exact(client, int.from_bytes(head, "big") - 4)
        except OSError:
            _close(client)
            _close(server)
            return
        cutting = self._take_cut(_application_name(startup))
        self._wait_open()
        server.sendall(startup)
        threading.Thread(target=self._pump, args=(server, client), daemon=True).start()
        if cutting:
            # The client's first query after the start-up: close instead of sending it.
            with contextlib.suppress(OSError):
                client.recv(1)
            with self._lock:
                self.cut += 1
            _close(client)
            _close(server)
            return
        self._pump(client, server)

    def _wait_open(self) -> None:
        if not self._open.is_set():
            self.held.set()
            self._open.wait()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        """Forward ``src`` to ``dst``, holding what comes while silent."""
        try:
            while chunk := src.recv(_BUFFER):
                self._wait_open()
                dst.sendall(chunk)
        except OSError:
            pass
        _close(src)
        _close(dst)

    def _take_cut(self, name: str) -> bool:
        with self._lock:
            for i, (prefix, n) in enumerate(self._cuts):
                if name.startswith(prefix):
                    if n > 1:
                        self._cuts[i] = (prefix, n - 1)
                    else:
                        del self._cuts[i]
                    return True
        return False


def _application_name(startup: bytes) -> str:
    """The application_name a protocol 3 start-up message names (``""``: none)."""
    if len(startup) < 8 or int.from_bytes(startup[4:8], "big") != _PROTOCOL_3:
        return ""
    fields = startup[8:].split(b"\x00")
    for key, value in zip(fields[::2], fields[1::2], strict=False):
        if key == b"application_name":
            return value.decode("utf-8", "replace")
    return ""


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("connection closed during the start-up message")
        data += chunk
    return data


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
