"""A tokens file that is re-read when it changes: revoking a token needs no restart.

:class:`TokensFile` holds what a parser made of a file (a surface's token
table) and checks, each time :meth:`~TokensFile.current` is asked, whether
the file changed: one ``os.stat`` (inode, size, modification and change
times), a few microseconds. A changed file is read and parsed again; from
then on the new table answers, so a token removed from the file fails from
the next request. A file that no longer parses (or was removed) leaves the
last good table in place and logs one clear error per change, never one per
request. :meth:`~TokensFile.reload` forces a read (``SIGHUP`` calls it).

>>> import json, os, tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     path = os.path.join(d, "tokens.json")
...     with open(path, "w") as f:
...         _ = f.write(json.dumps({"a": 1}))
...     tokens = TokensFile(path, json.loads)
...     with open(path, "w") as f:
...         _ = f.write(json.dumps({"b": 2, "c": 3}))
...     sorted(tokens.current())
['b', 'c']
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

__all__ = ["TokensFile"]

T = TypeVar("T")
_log = logging.getLogger("memstore.web")

_Signature = tuple[int, int, int, int, int]


def _signature(path: Path) -> _Signature | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class TokensFile(Generic[T]):
    """The latest good parse of a file; thread-safe.

    :param parse: the file's text to a value; raises ``ValueError`` (or a
        subclass) for text it refuses.
    :raises OSError, ValueError: at construction, when the file cannot be
        read or parsed (a server must not start without its tokens).
    """

    def __init__(self, path: str | os.PathLike[str], parse: Callable[[str], T]) -> None:
        self.path = Path(path)
        self._parse = parse
        self._lock = threading.Lock()
        self._signature = _signature(self.path)
        self._value: T = parse(self.path.read_text(encoding="utf-8"))
        self.reloads = 0
        """How many times a changed file was read into a new value."""
        self.failures = 0
        """How many times a changed file could not be used (the old value stayed)."""

    def current(self) -> T:
        """The value of the file as it is now, or the last good one when it became unusable."""
        if _signature(self.path) != self._signature:
            self.reload()
        return self._value

    def reload(self) -> bool:
        """Read the file again now; True when its value replaced the previous one.

        A file that cannot be used is logged (once per change: :meth:`current`
        reads a file again only after it changed) and the previous value stays.
        """
        with self._lock:
            signature = _signature(self.path)
            try:
                value = self._parse(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                self.failures += 1
                _log.error(
                    "memstore: %s can no longer be used, still serving the tokens read "
                    "before (fix the file; it is re-read when it changes): %s",
                    self.path,
                    e,
                )
                self._signature = signature
                return False
            self._signature = signature
            self._value = value
            self.reloads += 1
            return True

    def __repr__(self) -> str:
        return f"TokensFile({os.fspath(self.path)!r})"
