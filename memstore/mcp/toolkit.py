"""Tools as data: a name, typed arguments, a typed result, a handler, and the error rule.

A :class:`ToolSpec` says everything the wire needs: the argument model (its
JSON schema is the tool's ``inputSchema``, every field described for a model
to read), the result model (its schema is the ``outputSchema``; the result
travels as structured content with a short text rendering), and whether the
tool writes. :class:`Toolbox` lists them and runs a call:

- arguments are validated by the model; a bad one returns a tool error
  (``isError``) that names the argument and says what to send, and changes
  nothing;
- a :class:`~memstore.errors.MemstoreError` from the engine becomes a tool
  error with the engine's message (which says what to do);
- a write tool on a read-only server is refused before it runs.

Handlers are plain functions over :class:`~memstore.memory.Memory`; they run
in a worker thread so that a slow embedding never stalls the event loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

import anyio.to_thread
from mcp import types
from pydantic import BaseModel, ValidationError

from memstore.bounded import found_in
from memstore.errors import MemstoreError, OutOfRangeError

__all__ = [
    "SCOPE_FORGET",
    "SCOPE_READ",
    "SCOPE_WRITE",
    "Caller",
    "ToolError",
    "ToolSpec",
    "Toolbox",
    "tool_schema",
]

SCOPE_READ: Final = "recall"
"""The token scope read tools need (the names of ``memstore serve``'s tokens file)."""
SCOPE_WRITE: Final = "ingest"
"""The token scope tools that add or change memories need."""
SCOPE_FORGET: Final = "forget"
"""The token scope tools that delete need."""

A = TypeVar("A", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)


class ToolError(MemstoreError, ValueError):
    """A tool call that cannot be served as asked; the message says what to send instead."""


@dataclass(frozen=True)
class Caller:
    """Who calls: the partition their calls read and write, and what they may do.

    ``partition=None`` is the whole memory; ``scopes=None`` allows everything
    (stdio, or HTTP on loopback without a tokens file).
    """

    partition: str | None = None
    scopes: frozenset[str] | None = None

    def may(self, scope: str) -> bool:
        """Whether this caller holds ``scope``."""
        return self.scopes is None or scope in self.scopes


@dataclass(frozen=True)
class ToolSpec(Generic[A, R]):
    """One tool: its wire description and its handler."""

    name: str
    title: str
    description: str
    args: type[A]
    result: type[R]
    run: Callable[[A, Caller], R]
    """The handler (runs in a worker thread)."""
    render: Callable[[R], str]
    """The short text rendering sent beside the structured content."""
    scope: str = SCOPE_READ
    """The token scope it needs; anything but :data:`SCOPE_READ` is a write."""
    idempotent: bool = False
    destructive: bool = False

    @property
    def writes(self) -> bool:
        """Whether the tool changes the memory (refused by a read-only server)."""
        return self.scope != SCOPE_READ

    def describe(self) -> types.Tool:
        """The tool as ``tools/list`` announces it."""
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            inputSchema=tool_schema(self.args),
            outputSchema=self.result.model_json_schema(),
            annotations=types.ToolAnnotations(
                title=self.title,
                readOnlyHint=not self.writes,
                destructiveHint=self.destructive,
                idempotentHint=self.idempotent,
                openWorldHint=False,
            ),
        )


def tool_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of an argument model, as an ``inputSchema``.

    ``additionalProperties`` is left open: the models accept the aliases
    models guess (``q`` for ``query``, ``k`` for ``limit``), which the schema
    does not list; the model itself refuses anything else with a clear error.
    """
    schema = model.model_json_schema()
    schema.pop("additionalProperties", None)
    schema.pop("title", None)
    return schema


@dataclass
class Toolbox:
    """The tools of one server, and the rules every call goes through."""

    specs: Sequence[ToolSpec[Any, Any]]
    readonly_reason: str = ""
    """Why writes are refused (empty: they are not)."""
    _by_name: dict[str, ToolSpec[Any, Any]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name = {s.name: s for s in self.specs}
        if len(self._by_name) != len(self.specs):
            raise ValueError("two tools share a name")

    def describe(self) -> list[types.Tool]:
        """Every tool, for ``tools/list``."""
        return [s.describe() for s in self.specs]

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None, caller: Caller
    ) -> types.CallToolResult:
        """Run one tool call: a result, or a tool error saying what to send instead."""
        spec = self._by_name.get(name)
        if spec is None:
            return error(f"no tool {name!r}; tools: {', '.join(self._by_name)}")
        try:
            if spec.writes and self.readonly_reason:
                raise ToolError(f"{name} changes memory, and {self.readonly_reason}")
            if not caller.may(spec.scope):
                raise ToolError(f"{name} needs a token with the {spec.scope!r} scope")
            args = parse_args(spec, arguments or {})
            result = await anyio.to_thread.run_sync(spec.run, args, caller)
        except OutOfRangeError as e:  # from the engine: worded as a refused argument is
            return error(f"{e} ({e.code})")
        except MemstoreError as e:
            return error(str(e))
        structured = result.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=spec.render(result))],
            structuredContent=structured,
            isError=False,
        )


def error(message: str) -> types.CallToolResult:
    """A tool error (``isError``) carrying ``message``."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], isError=True
    )


def parse_args(spec: ToolSpec[A, Any], arguments: Mapping[str, Any]) -> A:
    """The call's arguments as the tool's model, or a :class:`ToolError` saying what is wrong."""
    try:
        return spec.args.model_validate(dict(arguments))
    except ValidationError as e:
        raise ToolError(_explain(spec, e)) from None


def _explain(spec: ToolSpec[Any, Any], e: ValidationError) -> str:
    """One sentence per problem, then what the tool takes."""
    problems = []
    for err in e.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        out_of_range = found_in([err])
        if out_of_range is not None:  # the engine's words and code, as every adapter says it
            problems.append(f"{out_of_range} ({out_of_range.code})")
        elif err["type"] == "extra_forbidden":
            problems.append(f"unknown argument {where!r}")
        elif err["type"] == "missing":
            problems.append(f"{where} is required")
        else:
            got = json.dumps(err.get("input"), default=str)[:60]
            problems.append(f"{where}: {_reason(err)} (got {got})")
    return f"{'; '.join(problems)}. {spec.name} takes {_signature(spec.args)}"


def _reason(err: Any) -> str:
    """Pydantic's message for one problem, as a clause: our own validators' text kept as is."""
    if err["type"] == "value_error":
        return str(err["ctx"]["error"])  # without pydantic's "Value error, " in front
    if err["type"] == "string_unicode":  # "unable to parse raw data as a unicode string"
        return "not valid Unicode text (it holds a lone surrogate)"  # as the engine words it
    msg = str(err["msg"])
    return msg[:1].lower() + msg[1:]


def _signature(model: type[BaseModel]) -> str:
    """``name (type, required), ...`` from the model's schema, for error messages."""
    schema = model.model_json_schema()
    required = set(schema.get("required", ()))
    parts = []
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type") or "|".join(
            str(p.get("type", "object")) for p in prop.get("anyOf", ())
        )
        parts.append(f"{name} ({kind or 'object'}{', required' if name in required else ''})")
    return ", ".join(parts) or "no arguments"
