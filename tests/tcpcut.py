"""A TCP forwarder on loopback whose connections a test can cut, and hold back.

Real network failures at a moment a test chooses, for any TCP server (an
HTTP server's change stream, say): every byte is forwarded both ways;
:meth:`CutProxy.cut` closes every open connection at once (the client sees
its stream break) and :meth:`CutProxy.hold` keeps new connections waiting
before they reach the server, until :meth:`CutProxy.release`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

_BUFFER = 65536


class CutProxy:
    """``CutProxy(host, port)``: forwards to ``host:port``; ``.url`` is its ``http://`` URL."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._gate = threading.Event()
        self._gate.set()
        self._answers = threading.Condition()
        self._answered = bytearray()
        threading.Thread(target=self._accept, daemon=True, name="tcpcut").start()

    def wait_answer(self, marker: bytes, timeout: float) -> bool:
        """Wait until the server sent ``marker`` (on any connection since the last
        :meth:`cut`), forwarded to the client; whether it did within ``timeout``."""
        with self._answers:
            return self._answers.wait_for(lambda: marker in self._answered, timeout)

    def hold(self) -> None:
        """Keep connections made from now on waiting, unforwarded, until :meth:`release`."""
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    def cut(self) -> None:
        """Close every open connection, both ends (what was forwarded still reaches the client)."""
        with self._lock:
            sockets, self._open = self._open, []
        with self._answers:
            self._answered.clear()
        for s in sockets:
            _close(s)

    def close(self) -> None:
        self._gate.set()
        self._listener.close()
        self.cut()

    def __enter__(self) -> CutProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self._gate.wait()
        try:
            upstream = socket.create_connection(self._target)
        except OSError:
            _close(client)
            return
        with self._lock:
            self._open += [client, upstream]
        threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
        self._pump(upstream, client, True)

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        try:
            while data := src.recv(_BUFFER):
                dst.sendall(data)
                if answers:
                    with self._answers:
                        self._answered += data
                        self._answers.notify_all()
        except OSError:
            pass
        _close(src)
        _close(dst)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
