"""JSON-RPC framing: one raw message in, the message to serve or the error to answer.

The MCP SDK (1.30) is lenient where JSON-RPC 2.0 is strict, and quiet where a
client needs an answer: a line of stdio that is not JSON gets no reply at all
(the client waits forever), ``{"id": true, "method": "ping"}`` is taken for a
notification and dropped, an unknown method is answered -32602 (invalid
params), a request with bad params gets ``"Invalid request parameters"``
(not which) while a hundred lines of pydantic go to stderr, and a bad body
over HTTP is answered with the made-up id ``"server-error"``. Both transports
therefore pass every incoming message through :func:`frame` first, which
answers as JSON-RPC says:

- not UTF-8, not JSON, nested deeper than
  :data:`~memstore.web.body.DEFAULT_MAX_JSON_DEPTH`, an object naming a key
  twice (``{"id": 1, "id": 2}``: parsers differ on which one counts, so a
  proxy that checked one would pass another request), or an integer of more
  digits than Python reads (4300): -32700 (parse error);
- an array (a batch: MCP since 2025-06-18 has none), a value that is not an
  object, an ``id`` that is not a string or an integer, ``jsonrpc`` other
  than ``"2.0"``, a ``method`` that is not a string, ``params`` that are not
  an object, or an object that is neither a request, a notification nor a
  response: -32600 (invalid request);
- a request for a method MCP does not define for a client: -32601 (method
  not found);
- a request whose params its method cannot take: -32602 (invalid params),
  the message naming the first problem (``params.arguments: Input should be
  a valid dictionary``);
- a notification the server cannot use (an unknown method, bad params):
  dropped quietly, as JSON-RPC requires (a notification is never answered).

The error's ``id`` is the request's when it could be read, else ``null``.

>>> frame(b"not json").error["error"]["code"], frame(b"not json").error["id"]
(-32700, None)
>>> frame(b'{"jsonrpc": "2.0", "id": 7, "method": "nope"}').error["error"]["code"]
-32601
>>> frame(b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {}}').error["error"]
{'code': -32602, 'message': 'Invalid params: params.name: Field required'}
>>> frame(b'{"jsonrpc": "2.0", "method": "nope"}')
Framed(message=None, error=None)
>>> frame(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}').message is not None
True
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from typing import Any, Final

from mcp import types
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from memstore.arguments import has_lone_surrogate
from memstore.web.body import (
    DEFAULT_MAX_JSON_DEPTH,
    RepeatedKey,
    json_depth,
    too_many_digits,
    unique_pairs,
)

__all__ = [
    "REQUEST_METHODS",
    "Framed",
    "error_reply",
    "frame",
]


def _models(union: Any) -> dict[str, type[BaseModel]]:
    """The SDK's request or notification models of a union, by their ``method``."""
    found: dict[str, type[BaseModel]] = {}
    for model in typing.get_args(union):
        for method in typing.get_args(model.model_fields["method"].annotation):
            found[method] = model
    return found


_REQUESTS: Final = _models(types.ClientRequestType)
_NOTIFICATIONS: Final = _models(types.ClientNotificationType)
REQUEST_METHODS: Final = frozenset(_REQUESTS)
"""Every method a client may call (those a server does not serve get the SDK's -32601)."""


@dataclass(frozen=True)
class Framed:
    """What to do with one raw message: serve ``message``, answer ``error``, or neither.

    Neither is a notification to drop. ``error`` is a whole JSON-RPC error
    response, ready for ``json.dumps``.
    """

    message: types.JSONRPCMessage | None = None
    error: dict[str, Any] | None = None


def error_reply(code: int, message: str, request_id: str | int | None = None) -> dict[str, Any]:
    """A JSON-RPC error response (``id`` ``null`` when the request's could not be read).

    >>> error_reply(-32600, "no batches")
    {'jsonrpc': '2.0', 'id': None, 'error': {'code': -32600, 'message': 'no batches'}}
    """
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


class _Constant(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity``: Python reads them, JSON has none."""


def _no_constants(name: str) -> Any:
    raise _Constant(f"{name} is not JSON")


def _parse(raw: bytes | str) -> Any:
    """The JSON value of ``raw``; ``ValueError`` saying why it is not one."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    depth = json_depth(raw.encode("utf-8", "surrogatepass"))
    if depth > DEFAULT_MAX_JSON_DEPTH:
        raise ValueError(
            f"arrays and objects nest {depth} levels deep; the limit is {DEFAULT_MAX_JSON_DEPTH}"
        )
    try:
        return json.loads(raw, parse_constant=_no_constants, object_pairs_hook=unique_pairs)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise ValueError("nested too deep") from None
    except (json.JSONDecodeError, RepeatedKey, _Constant) as e:
        raise ValueError(str(e)) from None
    except ValueError:  # valid JSON Python will not read: an integer of too many digits
        raise ValueError(too_many_digits("the message")) from None


def _is_id(value: Any) -> bool:
    """A request id MCP allows: a string or an integer (``true`` is not one).

    A string holding a lone surrogate (``"\\ud800"``) is not one either: no
    UTF-8 answer could carry it back.
    """
    if isinstance(value, str):
        return not has_lone_surrogate(value)
    return isinstance(value, int) and not isinstance(value, bool)


def frame(raw: bytes | str) -> Framed:
    """Read one raw JSON-RPC message (a stdio line, an HTTP body); see the module doc."""
    try:
        value = _parse(raw)
    except ValueError as e:
        return Framed(error=error_reply(types.PARSE_ERROR, f"Parse error: {e}"))
    if isinstance(value, list):
        return Framed(
            error=error_reply(
                types.INVALID_REQUEST, "Invalid request: batches (JSON arrays) are not supported"
            )
        )
    if not isinstance(value, dict):
        return Framed(
            error=error_reply(types.INVALID_REQUEST, "Invalid request: expected a JSON object")
        )
    has_id = "id" in value
    request_id = value.get("id")
    if has_id and not _is_id(request_id):
        return Framed(
            error=error_reply(
                types.INVALID_REQUEST,
                "Invalid request: id must be a string (of valid Unicode) or an integer",
            )
        )
    method = value.get("method")
    if "method" in value and not isinstance(method, str):
        return _invalid("method must be a string", value, request_id)
    if value.get("jsonrpc") != "2.0":
        return _invalid('jsonrpc must be "2.0"', value, request_id)
    if "params" in value and not isinstance(value["params"], dict | None):
        return _invalid("params must be an object", value, request_id)
    if isinstance(method, str) and has_id and method not in REQUEST_METHODS:
        return Framed(
            error=error_reply(types.METHOD_NOT_FOUND, f"Method not found: {method}", request_id)
        )
    if isinstance(method, str) and not has_id:
        return _notification(value)
    if method is None and not ("result" in value) ^ ("error" in value):
        return _invalid("expected a method, a result or an error", value, request_id)
    try:
        message = types.JSONRPCMessage.model_validate(value)
    except ValidationError as e:
        return _invalid(_first_problem(e), value, request_id)
    if isinstance(method, str):  # a request: its params as its method takes them
        try:  # what the SDK's session checks: the request as JSON, against its method's model
            seen = message.root.model_dump(by_alias=True, mode="json", exclude_none=True)
            _REQUESTS[method].model_validate(seen)
        except ValidationError as e:
            why = f"Invalid params: {_first_problem(e)}"
            return Framed(error=error_reply(types.INVALID_PARAMS, why, request_id))
        except (PydanticSerializationError, UnicodeError):
            why = "Invalid params: a name in them is not valid Unicode (a lone surrogate)"
            return Framed(error=error_reply(types.INVALID_PARAMS, why, request_id))
    return Framed(message=message)


def _first_problem(e: ValidationError) -> str:
    """Where the first problem pydantic found is, and what it is (``params.name: ...``)."""
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"] if not str(p).startswith("JSONRPC"))
    return f"{where or 'message'}: {first['msg']}"


def _invalid(why: str, value: dict[str, Any], request_id: Any) -> Framed:
    """-32600; a notification (no ``id``, a ``method``) is dropped instead: it is never answered."""
    if "id" not in value and "method" in value:
        return Framed()
    return Framed(error=error_reply(types.INVALID_REQUEST, f"Invalid request: {why}", request_id))


def _notification(value: dict[str, Any]) -> Framed:
    """A notification the server can use, or nothing (it is never answered)."""
    model = _NOTIFICATIONS.get(value["method"])
    if model is None:
        return Framed()
    try:  # as the SDK's session will read it: dumped to JSON, then its method's model
        message = types.JSONRPCMessage.model_validate(value)
        model.model_validate(message.root.model_dump(by_alias=True, mode="json", exclude_none=True))
        return Framed(message=message)
    except (ValidationError, PydanticSerializationError, UnicodeError):
        return Framed()
