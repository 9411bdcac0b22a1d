"""The stdio transport: one JSON-RPC message per line, every request answered.

It replaces the SDK's ``stdio_server`` (1.30) for two reasons:

- every line passes through :func:`~memstore.mcp.framing.frame`, so a line
  that is not JSON, a batch, or an unknown method gets its JSON-RPC error
  on stdout (the SDK answered nothing, or -32602);
- when the client closes stdin, the requests already read are still
  answered before the server exits (for at most :data:`DRAIN_SECONDS`): the
  SDK closed its output the moment input ended and cancelled them, so a
  client that writes its last requests and then closes its end (a script
  piping a file in) lost their answers.

A line longer than :data:`MAX_LINE_BYTES` is refused (-32600) without being
held in memory whole. Nothing but protocol ever goes to stdout.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO, Any, Final

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage

from memstore.web.lines import line_safe

from .framing import error_reply, frame

__all__ = ["DRAIN_SECONDS", "MAX_LINE_BYTES", "stdio_transport"]

DRAIN_SECONDS: Final = 60.0
"""How long, after stdin closes, the server still works on requests it has read."""
MAX_LINE_BYTES: Final = 4 * 1024 * 1024
"""The longest line read as a message (as the HTTP transport's body limit)."""


class _Output:
    """Stdout, one line per message, and the ids of requests read but not yet answered."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.lock = anyio.Lock()
        self.pending: Counter[tuple[type, str | int]] = Counter()  # an id may be reused
        self.drained: anyio.Event | None = None
        self.broken = False

    def expect(self, request_id: str | int) -> None:
        """Note a request handed to the session (its answer is awaited at the end)."""
        self.pending[(type(request_id), request_id)] += 1

    async def write(self, message: dict[str, Any]) -> None:
        """Write ``message`` as one line; an answer settles its request."""
        line = _line(message)
        async with self.lock:
            if not self.broken:
                try:
                    await anyio.to_thread.run_sync(self._put, line)
                except OSError:  # the client closed our stdout: nobody to answer
                    self.broken = True
        request_id = message.get("id")
        if "method" not in message and request_id is not None:
            self.pending -= Counter({(type(request_id), request_id): 1})
        if self.drained is not None and (self.broken or not self.pending):
            self.drained.set()

    async def drain(self) -> None:
        """Wait (at most :data:`DRAIN_SECONDS`) until every request read is answered."""
        if not self.pending or self.broken:
            return
        self.drained = anyio.Event()
        with anyio.move_on_after(DRAIN_SECONDS):
            await self.drained.wait()

    def _put(self, line: bytes) -> None:
        self.out.write(line)
        self.out.flush()


def _line(message: dict[str, Any]) -> bytes:
    """``message`` as one line of UTF-8 JSON.

    U+2028, U+2029 and U+0085 are written as their JSON escapes
    (:func:`~memstore.web.lines.line_safe`): a client reading with Python's
    ``str.splitlines`` (or any reader that breaks lines there) read a memory
    holding one, or a request id, as two lines, neither of them JSON.
    Text holding a lone surrogate (JSON can carry ``"\\ud800"``, UTF-8 cannot)
    is written with every non-ASCII character escaped instead of failing.

    >>> _line({"id": "a\\u2028b"})
    b'{"id":"a\\\\u2028b"}\\n'
    """
    text = line_safe(json.dumps(message, ensure_ascii=False, separators=(",", ":")))
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(message, separators=(",", ":")) + "\n").encode("ascii")


_TOO_LONG: Final = object()
"""What :func:`_read_line` returns for a line over :data:`MAX_LINE_BYTES` (skipped)."""


def _read_line(source: IO[bytes]) -> bytes | object | None:
    """The next line of ``source``, :data:`_TOO_LONG`, or ``None`` at the end of input."""
    line = source.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
        while True:  # skip the rest of it, a bounded chunk at a time
            rest = source.readline(MAX_LINE_BYTES)
            if not rest or rest.endswith(b"\n"):
                break
        return _TOO_LONG
    return line


async def _reader(
    source: IO[bytes], sink: MemoryObjectSendStream[SessionMessage | Exception], output: _Output
) -> None:
    """Frame each line: errors answered here, messages on to the session; then drain."""
    async with sink:
        while (line := await anyio.to_thread.run_sync(_read_line, source)) is not None:
            if not isinstance(line, bytes):
                await output.write(
                    error_reply(
                        types.INVALID_REQUEST,
                        f"Invalid request: a message is at most {MAX_LINE_BYTES} bytes",
                    )
                )
                continue
            if not line.strip():
                continue
            framed = frame(line)
            if framed.error is not None:
                await output.write(framed.error)
            if framed.message is None:
                continue
            root = framed.message.root
            if isinstance(root, types.JSONRPCRequest):
                output.expect(root.id)
            await sink.send(SessionMessage(framed.message))
        await output.drain()  # closing the sink below ends the session


async def _writer(source: MemoryObjectReceiveStream[SessionMessage], output: _Output) -> None:
    async with source:
        async for item in source:
            await output.write(
                item.message.model_dump(by_alias=True, mode="json", exclude_none=True)
            )


@asynccontextmanager
async def stdio_transport(
    stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """The (read, write) streams of an MCP session over ``stdin``/``stdout`` (the process's)."""
    output = _Output(stdout or sys.stdout.buffer)
    read_sink, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_source = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_reader, stdin or sys.stdin.buffer, read_sink, output)
        tg.start_soon(_writer, write_source, output)
        yield read_stream, write_stream
