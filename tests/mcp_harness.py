"""A real MCP client for the tests: ``memstore mcp`` as a subprocess, or in-process.

``stdio(data, *flags)`` starts ``python -m memstore.cli mcp`` and yields a
:class:`Client` over the SDK's ``ClientSession`` (stdio); ``http_server`` starts
it on streamable HTTP on a free loopback port; ``in_process(memory)`` connects
a ``ClientSession`` to the same server object over in-memory streams (fast:
for detailed behaviour). Every helper returns what the wire carried: the
structured content, the text, ``isError``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason='the MCP tests need the SDK: pip install "memstore-engine[mcp]"')

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.memory import create_connected_server_and_client_session

from memstore.mcp.server import build_server, surface
from memstore.mcp.toolkit import Caller
from memstore.memory import Memory
from tests.ports import free_port as free_port  # the tests starting a server of their own
from tests.ports import on_free_port, wait_listening

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Reply:
    """One tool call's answer as the client received it."""

    error: bool
    data: dict[str, Any]
    text: str


class Client:
    """A ``ClientSession`` with a short way to call tools."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, name: str, args: dict[str, Any] | None = None) -> Reply:
        result = await self.session.call_tool(name, args or {})
        text = "\n".join(c.text for c in result.content if c.type == "text")
        return Reply(bool(result.isError), result.structuredContent or {}, text)

    async def ok(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool that must succeed; its structured content."""
        reply = await self.call(name, args)
        assert not reply.error, f"{name} failed: {reply.text}"
        return reply.data

    async def fails(self, name: str, args: dict[str, Any] | None = None) -> str:
        """Call a tool that must fail with a tool error; its message."""
        reply = await self.call(name, args)
        assert reply.error, f"{name} should have failed: {reply.data}"
        return reply.text

    async def resource(self, uri: str) -> Any:
        result = await self.session.read_resource(uri)  # type: ignore[arg-type]
        return json.loads(result.contents[0].text)  # type: ignore[union-attr]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def mcp_command(data: Path | str, *flags: str) -> list[str]:
    """The ``memstore mcp`` command line (hash embedder unless ``flags`` say otherwise)."""
    embed = [] if "--embedder" in flags else ["--embedder", "hash"]
    return [sys.executable, "-m", "memstore.cli", "mcp", "--data", str(data), *embed, *flags]


@contextlib.asynccontextmanager
async def stdio(data: Path | str, *flags: str) -> AsyncIterator[Client]:
    """``memstore mcp`` over stdio, initialised."""
    cmd = mcp_command(data, *flags)
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=_env(), cwd=str(ROOT))
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield Client(session)


@contextlib.asynccontextmanager
async def in_process(
    memory: Memory, *, compat: str | None = None, partition: str | None = None, readonly: str = ""
) -> AsyncIterator[Client]:
    """The same server object, connected over in-memory streams."""
    s = surface(memory, compat=compat, readonly_reason=readonly)
    server = build_server(s, lambda: Caller(partition=partition))
    async with create_connected_server_and_client_session(server) as session:
        yield Client(session)


@contextlib.contextmanager
def http_server(data: Path | str, *flags: str, port: int | None = None) -> Iterator[str]:
    """``memstore mcp --transport http`` on a loopback port; yields its ``/mcp`` URL.

    Without ``port`` a free one, started again on another when it was taken
    before the server bound it (:func:`tests.ports.on_free_port`).
    """

    def start(chosen: int) -> tuple[subprocess.Popen[bytes], int]:
        cmd = mcp_command(data, "--transport", "http", "--port", str(chosen), *flags)
        proc = subprocess.Popen(
            cmd, env=_env(), cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            wait_listening(proc, chosen, lambda: _stderr(proc))
        except BaseException:
            _stop(proc)
            raise
        return proc, chosen

    proc, port = on_free_port(start, port)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop(proc)


def _stderr(proc: subprocess.Popen[bytes]) -> str:
    """What an exited server wrote on its stderr (a pipe: read once it is done)."""
    return proc.stderr.read().decode(errors="replace") if proc.stderr else ""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stderr:
        proc.stderr.close()


@contextlib.asynccontextmanager
async def http_client(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield Client(session)


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m memstore.cli ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "memstore.cli", *args],
        env=_env(),
        cwd=str(ROOT),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def names(items: Sequence[dict[str, Any]]) -> list[str]:
    return [i["name"] for i in items]
