"""A one-line progress bar on stderr, for long calls such as ``Memory.add_many(progress=True)``.

No dependency: a bar of 25 cells redrawn in place (``\\r``) each time the
whole percentage changes, a note for a phase that follows the loop (the
embedding, the write), and a closing ``done``.
"""

from __future__ import annotations

import sys

__all__ = ["Progress"]


class Progress:
    """A one-line progress bar on stderr (no dependency)."""

    def __init__(self, total: int) -> None:
        self.total, self.n, self._last = max(total, 1), 0, -1
        self._out = sys.stderr

    def step(self) -> None:
        self.n += 1
        pct = self.n * 100 // self.total
        if pct != self._last:
            self._last = pct
            bar = "#" * (pct // 4)
            self._out.write(f"\rmemstore: [{bar:<25}] {self.n}/{self.total}")
            self._out.flush()

    def note(self, what: str) -> None:
        self._out.write(f"  {what}...")
        self._out.flush()

    def done(self) -> None:
        self._out.write(" done\n")
        self._out.flush()
