"""One socket write per answer: a response's head is held until its body is written.

uvicorn's HTTP/1.1 protocols (h11 and httptools alike) write a response in
two calls to their transport: the status line and headers when the
application sends ``http.response.start``, then the body with
``http.response.body``. asyncio and uvloop set ``TCP_NODELAY`` on every
connection, so each call is a system call and a TCP segment of its own, and
the client wakes up for the head alone, then again for the body. For a
recall's few kilobytes the second write costs about what the first does: a
tenth of the event loop's CPU time per request (docs/benchmarks.md, "loop").

:class:`OneWriteTransport` stands between uvicorn's protocol and the
connection's transport. A write that begins a response (its bytes start with
``HTTP/``) is held; the next write, the body sent in the same step of the
event loop, goes out with it in one ``writelines`` (one system call, one
segment). A head whose body does not follow at once (a streamed answer
waiting for its first frame, an interim ``100 Continue``) goes out on its own
at the next turn of the loop, before anything that turn could write; closing
the transport or ending its output sends what is held first, and aborting it
drops it, as the transport drops its own buffer. Every other attribute is
the transport's own.

>>> import asyncio
>>> class Wire:  # a transport that records its writes
...     def __init__(self): self.writes = []
...     def write(self, data): self.writes.append(data)
...     def writelines(self, parts): self.writes.append(b"".join(parts))
...     def is_closing(self): return False
>>> async def answer():
...     wire = Wire()
...     t = OneWriteTransport(wire, asyncio.get_running_loop())
...     t.write(b"HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\n\\r\\n")
...     t.write(b"ok")
...     return wire.writes
>>> asyncio.run(answer())
[b'HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\n\\r\\nok']
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Final

__all__ = ["OneWriteTransport"]

_HEAD: Final = b"HTTP/"
"""How every response head begins (HTTP/1.x status lines; nothing else a server writes does)."""


class OneWriteTransport:
    """``transport`` as a protocol writes to it, each response's head sent with its body.

    ``loop``: the transport's event loop (a held head whose body does not
    follow is sent at its next turn). See the module documentation.
    """

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:  # the held head's body (or whatever comes next): one write
            self._held = None
            self._transport.writelines((held, data))
        elif isinstance(data, bytes) and data.startswith(_HEAD):
            self._held = data
            self._loop.call_soon(self.flush)  # no-op once the body has taken it along
        else:
            self._transport.write(data)

    def writelines(self, parts: Iterable[bytes]) -> None:
        held, self._held = self._held, None
        self._transport.writelines((held, *parts) if held is not None else parts)

    def flush(self) -> None:
        """Send the held head now, if any (and the connection is still open)."""
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
