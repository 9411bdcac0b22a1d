"""Embeddings from an OpenAI-compatible HTTP API, with the provider safety rules.

:class:`OpenAICompatibleEmbedder` POSTs ``{"model": ..., "input": [...]}`` to
``{base_url}/embeddings`` (OpenAI, Gemini's OpenAI endpoint, a local Ollama,
vLLM or llama.cpp server...) and returns unit-length float32 rows. It is built
to be pointed at a service you do not control:

* **Explicit model, trusted URL.** There is no default model. The URL must be
  ``https://``, except a loopback endpoint (``127.0.0.0/8``, ``::1``,
  ``localhost``), which may be ``http://``. Credentials, query strings and
  fragments in the URL are refused.
* **No redirects.** A 3xx answer is an error, so the key is never sent on to
  another host.
* **Nothing from the provider leaks into errors.** A failure raises
  :class:`~memstore_index.embedder.EmbeddingError` with the status code and a
  short message of ours; the response body and the API key never appear.
* **Bounded.** Every request has a timeout and a response-size cap, and
  batches are split into requests of at most ``batch_size`` texts.
* **Checked output.** One vector per text, all of one dimension (``dim``, or
  the first response's), finite and non-zero; rows are re-normalised.

>>> OpenAICompatibleEmbedder("http://example.com/v1", model="m")  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
memstore_index.embedder.EmbedderConfigError: base_url must use https:// ... got http://example.com
"""

from __future__ import annotations

import http
import ipaddress
import json
import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt

from memstore_index._abandon import AbandonableCalls, CallAbandoned
from memstore_index.embedder import (
    EmbedderConfigError,
    EmbeddingError,
    check_texts,
    normalize_rows,
)

try:  # the one optional dependency, detected once at import
    import httpx
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        f'OpenAICompatibleEmbedder needs httpx ({exc}): pip install "memstore-engine[http]"'
    ) from exc

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_TIMEOUT",
    "MAX_RESPONSE_BYTES",
    "MAX_TIMEOUT",
    "OpenAICompatibleEmbedder",
    "is_loopback_host",
    "status_text",
    "validate_base_url",
]

DEFAULT_BATCH_SIZE = 64
"""Texts per request."""
DEFAULT_TIMEOUT = 10.0
"""Seconds allowed per request (see :class:`OpenAICompatibleEmbedder`)."""
MAX_TIMEOUT = 300.0
"""The largest ``timeout`` accepted: a request may not hang a write indefinitely."""
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""A response larger than this is refused while it is read."""
_MAX_DETAIL = 120
"""Characters of a transport error's own message kept in ours."""


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback IPs (``127.0.0.0/8``, ``::1``).

    >>> [is_loopback_host(h) for h in ("127.0.0.1", "127.8.9.10", "::1", "localhost")]
    [True, True, True, True]
    >>> [is_loopback_host(h) for h in ("10.0.0.1", "localhost.example.com", "127.0.0.1.nip.io")]
    [False, False, False]
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def validate_base_url(base_url: str) -> str:
    """``base_url`` checked for a provider: HTTPS, or HTTP to a loopback host only.

    Shared by every client of an OpenAI-compatible server (this embedder, the Mind
    Layer provider). :raises EmbedderConfigError: anything else, saying why.
    """
    if not isinstance(base_url, str) or not base_url.strip():
        raise EmbedderConfigError("base_url must be a non-empty URL string")
    try:
        parts = urlsplit(base_url.strip())
        host = parts.hostname or ""
        port = parts.port  # raises ValueError on a malformed port
    except ValueError as exc:
        raise EmbedderConfigError(f"base_url is not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        raise EmbedderConfigError(
            "base_url must be an http(s) URL with a host, e.g. https://api.example.com/v1"
        )
    # Only scheme and host are echoed: anything else could carry a secret.
    shown = f"{scheme}://{parts.netloc.rpartition('@')[2]}"
    if parts.username is not None or parts.password is not None:
        raise EmbedderConfigError(f"base_url must not contain credentials (pass api_key): {shown}")
    if parts.query or parts.fragment:
        raise EmbedderConfigError(f"base_url must not have a query or fragment: {shown}")
    if scheme == "http" and not is_loopback_host(host):
        raise EmbedderConfigError(
            "base_url must use https:// (http:// is only allowed for a loopback host "
            f"such as 127.0.0.1), got {shown}"
        )
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc = f"{netloc}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


class OpenAICompatibleEmbedder:
    """An embedder backed by an OpenAI-compatible ``/embeddings`` endpoint.

    ``model_id`` is ``"{model}@{base_url}"``: vectors from another provider
    or model never compare as the same space. When ``dim`` is not given, it
    is learned from the first response, and every later response must
    match; reading :attr:`dim` before any embedding costs one request.

    An empty string is sent as a single space (providers refuse ``""``), so it
    still gets a valid unit vector. An empty batch makes no request once the
    dimension is known. Requests are sequential and never retried: an error
    fails the whole ``embed`` call. Each step of a request (connecting,
    sending, every wait for data) is limited to ``timeout`` seconds, and a
    response still arriving ``timeout`` seconds after the request started is
    abandoned. Environment proxy settings are honoured for remote hosts and
    ignored for loopback ones.

    Close it (or use it as a context manager) to release its connections.
    Each request runs on a daemon thread the caller waits for
    (:class:`~memstore_index._abandon.AbandonableCalls`): :meth:`close`
    releases a caller still waiting for a provider that stopped answering
    (:class:`~memstore_index.embedder.EmbeddingError`) at once, and the
    request left behind does not hold up the process's exit.

    :param base_url: the API base, without ``/embeddings``, e.g.
        ``https://api.openai.com/v1`` or ``http://127.0.0.1:11434/v1``.
    :param model: the provider's model name; required, never guessed.
    :param api_key: sent as ``Authorization: Bearer ...`` when not None or empty.
    :param dim: the expected vector length, checked on every response.
    :param timeout: seconds, in ``(0, MAX_TIMEOUT]``.
    :param batch_size: texts per request, at least 1.
    :raises EmbedderConfigError: an unsafe or malformed URL, a missing model, or a
        setting out of range.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        dim: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        self.base_url = validate_base_url(base_url)
        if not isinstance(model, str) or not model.strip():
            raise EmbedderConfigError(
                "model must be the provider's model name; there is no default"
            )
        if api_key is not None and not isinstance(api_key, str):
            raise EmbedderConfigError("api_key must be a string or None")
        if api_key and not (api_key.isascii() and api_key.isprintable()):
            raise EmbedderConfigError("api_key must be printable ASCII (no line breaks)")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise EmbedderConfigError(f"dim must be None or an int >= 1, got {dim!r}")
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= MAX_TIMEOUT
        ):
            raise EmbedderConfigError(
                f"timeout must be in (0, {MAX_TIMEOUT:g}] seconds, got {timeout!r}"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise EmbedderConfigError(f"batch_size must be an int >= 1, got {batch_size!r}")
        self.model = model
        self.model_id = f"{model}@{self.base_url}"
        self.timeout = float(timeout)
        self.batch_size = batch_size
        self._dim = dim
        self._api_key = api_key or None
        self._lock = threading.Lock()
        self._host = urlsplit(self.base_url).hostname or ""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(self.timeout),
            follow_redirects=False,
            trust_env=not is_loopback_host(self._host),
        )
        self._calls = AbandonableCalls("memstore-embedding-request")

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (
            f"OpenAICompatibleEmbedder({self.base_url!r}, model={self.model!r}, api_key={key}, "
            f"dim={self._dim!r})"
        )

    def close(self) -> None:
        """Release the connection pool. Embedding afterwards is an error.

        An :meth:`embed` still waiting for an answer raises
        :class:`~memstore_index.embedder.EmbeddingError` at once; its request
        is abandoned to its daemon thread (it ends with its timeout or with the process).
        """
        self._calls.close()
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def dim(self) -> int:
        """The vector length; costs one request if neither given nor seen yet."""
        if self._dim is None:
            self.embed([" "])
        assert self._dim is not None  # set by the first successful response
        return self._dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit-length float32 row per text; one request per ``batch_size`` texts.

        :raises EmbedderInputError: ``texts`` is a bare string or holds a non-string.
        :raises EmbeddingError: the provider failed, timed out, redirected, or
            answered something that is not one valid vector per text.
        """
        batch = [t if t else " " for t in check_texts(texts)]
        if not batch:
            return np.empty((0, self.dim), dtype=np.float32)
        parts = [
            self._request(batch[i : i + self.batch_size])
            for i in range(0, len(batch), self.batch_size)
        ]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _fail(self, what: str, status: int | None = None) -> EmbeddingError:
        return EmbeddingError(
            f"embedding request to {self._host} failed: {what}", status_code=status
        )

    def _redact(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text[:_MAX_DETAIL]

    def _request(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if self._client.is_closed:
            raise EmbeddingError("this OpenAICompatibleEmbedder is closed")
        body = json.dumps({"model": self.model, "input": texts}).encode()
        try:
            raw = self._calls.run(lambda: self._exchange(body))
        except CallAbandoned:
            raise EmbeddingError("this OpenAICompatibleEmbedder was closed") from None
        return self._parse(raw, len(texts))

    def _exchange(self, body: bytes) -> bytes:
        """POST ``body``; the answer's body (bounded in time and size), on a daemon thread."""
        deadline = time.monotonic() + self.timeout
        try:
            with self._client.stream("POST", f"{self.base_url}/embeddings", content=body) as resp:
                status = resp.status_code
                if 300 <= status < 400:
                    raise self._fail(f"HTTP {status}, a redirect (redirects are refused)", status)
                if status != 200:
                    raise self._fail(f"HTTP {status_text(status)} (response body withheld)", status)
                raw = bytearray()
                for chunk in resp.iter_bytes():
                    raw += chunk
                    if len(raw) > MAX_RESPONSE_BYTES:
                        raise self._fail(f"response larger than {MAX_RESPONSE_BYTES} bytes", status)
                    if time.monotonic() > deadline:
                        raise self._fail(f"timed out after {self.timeout:g}s", status)
        except httpx.TimeoutException:
            raise self._fail(f"timed out after {self.timeout:g}s") from None
        except httpx.HTTPError as exc:
            # The transport's message (DNS, TLS, refused...) helps; redacted and cut short.
            detail = self._redact(str(exc)) or "no detail"
            raise self._fail(f"{type(exc).__name__}: {detail}") from None
        return bytes(raw)

    def _parse(self, raw: bytes, n: int) -> npt.NDArray[np.float32]:
        try:
            doc: Any = json.loads(raw)
        except ValueError:
            raise self._fail("the response is not JSON") from None
        except RecursionError:  # "[[[[...]]]]" nested deeper than Python's stack
            raise self._fail("the response is JSON nested too deeply") from None
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, list) or len(data) != n:
            got = len(data) if isinstance(data, list) else "no"
            raise self._fail(f"expected {n} embeddings in 'data', got {got}")
        if not all(isinstance(d, dict) and isinstance(d.get("embedding"), list) for d in data):
            raise self._fail("every 'data' entry must hold an 'embedding' list of floats")
        indexes = [d.get("index") for d in data]
        if all(i is None for i in indexes):
            rows = [d["embedding"] for d in data]
        elif sorted(i for i in indexes if isinstance(i, int) and not isinstance(i, bool)) == list(
            range(n)
        ):
            rows = [d["embedding"] for d in sorted(data, key=lambda d: d["index"])]
        else:
            raise self._fail(f"the 'index' fields are not a permutation of 0..{n - 1}")
        dims = {len(r) for r in rows}
        if len(dims) != 1:
            raise self._fail(f"embeddings of unequal lengths {sorted(dims)}")
        (got_dim,) = dims
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for r in rows for x in r):
            raise self._fail("an embedding holds a value that is not a number")
        with self._lock:
            if self._dim is None and got_dim > 0:
                self._dim = got_dim
        if got_dim != self._dim:
            raise self._fail(f"expected {self._dim}-dimensional embeddings, got {got_dim}")
        try:
            return normalize_rows(rows, "the provider")
        except EmbeddingError as exc:
            raise self._fail(str(exc)) from None


def status_text(status: int) -> str:
    """``"502 Bad Gateway"``: the standard phrase for a code, never the server's own text."""
    try:
        return f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)
