"""Markdown-aware chunking of an episode's content into bounded, heading-labelled spans.

Ingest cuts an episode into chunks, each embedded and indexed as one item and
labelled with its ``heading_path``: the headings that enclose it, outermost
first.

>>> doc = "Intro line.\\n\\n# Onboarding\\nAlice joined.\\n\\n## Week 1\\nShe shipped.\\n"
>>> for c in chunk_markdown(doc):
...     print(c.start, c.end, c.heading_path, repr(c.text))
0 13 () 'Intro line.\\n\\n'
13 41 ('Onboarding',) '# Onboarding\\nAlice joined.\\n\\n'
41 64 ('Onboarding', 'Week 1') '## Week 1\\nShe shipped.\\n'

The rules:

* **Nothing lost, nothing repeated.** Chunks tile the content: the first starts
  at 0, each starts where the previous one ends, the last ends at
  ``len(content)``, and ``chunk.text == content[chunk.start:chunk.end]``.
  Offsets are in characters (Python string indices). Empty content gives no
  chunks.
* **Sections.** A heading starts a section that runs to the next heading of
  any level; no chunk spans two sections. A chunk's ``heading_path`` is the
  section's heading preceded by the nearest enclosing heading of each
  shallower level (``# A``, ``### B`` gives ``("A", "B")``). Text before the
  first heading has the empty path; when that text is only blank lines it
  joins the first section instead.
* **Headings** are ATX headings as CommonMark has them: up to three spaces,
  one to six ``#``, then a space, a tab or the end of the line; an optional
  closing run of ``#`` is dropped (``## Setup ##`` is ``"Setup"``). Setext
  headings (a line underlined with ``===`` or ``---``) are *not* recognised
  and stay body text, and neither are headings inside block quotes or list
  items.
* **Code fences** (three or more backticks or tildes, up to three spaces of
  indent, closed by a run of the same character at least as long; unclosed
  runs to the end) are opaque: a ``#`` line inside one is not a heading, and
  a fence is not split when it fits in a chunk.
* **Bounded size.** No chunk is longer than ``max_chars``. A section longer
  than that is split at the best boundary in the window, in this order of
  preference: a paragraph (after a blank line), a line, a sentence
  (``.``/``!``/``?`` and white space, or ``。！？``), any white space; a
  boundary is preferred while it keeps the chunk at least
  :data:`MIN_FILL` full, and a boundary inside a fence is used only when
  there is no other. Only a window without any white space is cut hard.
* **No blank chunks** (only white space), unless the content is blank or has
  a run of white space at least ``max_chars // 2`` long: white space is kept
  with the text that follows it, and trailing white space with the last text.

Cost: linear in the content, plus a bisection per cut.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

__all__ = ["DEFAULT_MAX_CHUNK_CHARS", "MIN_FILL", "Chunk", "chunk_markdown"]

DEFAULT_MAX_CHUNK_CHARS: Final = 1000
"""Longest chunk by default: about the 256 word pieces the local embedding model reads."""
MIN_FILL: Final = 0.5
"""A better kind of boundary is preferred only while it fills the chunk at least this much."""

_EOL: Final = re.compile(r"\r\n|\r|\n")
_ATX: Final = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*))?")
_CLOSING_HASHES: Final = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE_OPEN: Final = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_FENCE_CLOSE: Final = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
_SENTENCE_END: Final = re.compile(r"(?:[.!?][\"')\]]*[ \t]+|[。！？]+)(?=\S)")
_SPACE_RUN: Final = re.compile(r"\s+(?=\S)")
_NON_SPACE: Final = re.compile(r"\S")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One span of an episode's content."""

    index: int
    """Position of the chunk in the episode, from 0."""
    start: int
    """Offset of the first character in the content."""
    end: int
    """Offset just past the last character: ``text == content[start:end]``."""
    text: str
    """The span itself, exactly as in the content (headings and white space included)."""
    heading_path: tuple[str, ...]
    """The enclosing headings, outermost first; ``()`` before the first heading."""


class _Line(NamedTuple):
    start: int
    end: int  # past the line terminator
    body: str  # without the terminator

    @property
    def blank(self) -> bool:
        return not self.body or self.body.isspace()


def chunk_markdown(content: str, *, max_chars: int = DEFAULT_MAX_CHUNK_CHARS) -> list[Chunk]:
    """Cut ``content`` into chunks of at most ``max_chars`` characters (see the module doc).

    >>> [c.text for c in chunk_markdown("One. Two. Three.", max_chars=10)]
    ['One. Two. ', 'Three.']
    >>> [c.heading_path for c in chunk_markdown("```\\n# not a heading\\n```\\n# Real\\n")]
    [(), ('Real',)]

    :raises ValueError: ``max_chars`` below 1.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    if not content:
        return []
    lines = _split_lines(content)
    headings, fences = _scan(lines)
    boundaries = _Boundaries(content, lines, fences)
    chunks: list[Chunk] = []
    for start, end, path in _sections(content, lines, headings):
        for a, b in _split_section(content, start, end, max_chars, boundaries):
            chunks.append(Chunk(len(chunks), a, b, content[a:b], path))
    return chunks


def _split_lines(content: str) -> list[_Line]:
    """The lines of ``content`` with their offsets; terminators are CR LF, CR or LF."""
    lines: list[_Line] = []
    pos = 0
    for m in _EOL.finditer(content):
        lines.append(_Line(pos, m.end(), content[pos : m.start()]))
        pos = m.end()
    if pos < len(content):
        lines.append(_Line(pos, len(content), content[pos:]))
    return lines


def _scan(lines: Sequence[_Line]) -> tuple[list[tuple[int, int, str]], list[tuple[int, int]]]:
    """Headings as ``(line index, level, text)`` and fences as ``(start, end)`` offsets."""
    headings: list[tuple[int, int, str]] = []
    fences: list[tuple[int, int]] = []
    fence: tuple[str, int] | None = None  # (marker character, marker length) while inside
    fence_start = 0
    for i, line in enumerate(lines):
        if fence is not None:
            m = _FENCE_CLOSE.fullmatch(line.body)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1]:
                fences.append((fence_start, line.end))
                fence = None
            continue
        m = _FENCE_OPEN.fullmatch(line.body)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence, fence_start = (m.group(1)[0], len(m.group(1))), line.start
            continue
        m = _ATX.fullmatch(line.body)
        if m:
            headings.append((i, len(m.group(1)), _heading_text(m.group(2) or "")))
    if fence is not None:
        fences.append((fence_start, lines[-1].end))
    return headings, fences


def _heading_text(rest: str) -> str:
    """The text of an ATX heading from what follows its opening ``#``\\ s."""
    return _CLOSING_HASHES.sub("", rest.strip(" \t")).strip(" \t")


def _sections(
    content: str, lines: Sequence[_Line], headings: Sequence[tuple[int, int, str]]
) -> list[tuple[int, int, tuple[str, ...]]]:
    """``(start, end, heading_path)`` of each section, tiling the content."""
    starts: list[tuple[int, tuple[str, ...]]] = []
    stack: list[tuple[int, str]] = []
    for index, level, text in headings:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, text))
        starts.append((lines[index].start, tuple(t for _, t in stack)))
    if not starts:
        starts.append((0, ()))
    elif content[: starts[0][0]].strip():
        starts.insert(0, (0, ()))  # a preamble with text: a section of its own
    else:
        starts[0] = (0, starts[0][1])  # blank lines before the first heading join it
    ends = [s for s, _ in starts[1:]] + [len(content)]
    return [(s, e, path) for (s, path), e in zip(starts, ends, strict=True)]


class _Boundaries:
    """Candidate cut offsets by kind, best kind first, and the fences to avoid."""

    def __init__(
        self, content: str, lines: Sequence[_Line], fences: Sequence[tuple[int, int]]
    ) -> None:
        paragraphs = [
            line.start for prev, line in itertools.pairwise(lines) if prev.blank and not line.blank
        ]
        line_starts = [line.start for line in lines[1:] if not line.blank]
        sentences = [m.end() for m in _SENTENCE_END.finditer(content)]
        spaces = [m.end() for m in _SPACE_RUN.finditer(content)]
        self.kinds: tuple[list[int], ...] = (paragraphs, line_starts, sentences, spaces)
        self.fence_starts = [s for s, _ in fences]
        self.fences = list(fences)

    def enclosing_fence_start(self, offset: int) -> int | None:
        """The start of the fence ``offset`` falls strictly inside, or None."""
        i = bisect.bisect_left(self.fence_starts, offset) - 1
        return self.fences[i][0] if i >= 0 and offset < self.fences[i][1] else None

    def best(self, lo: int, hi: int, fill: int, *, outside_fences: bool) -> int | None:
        """The cut in ``[lo, hi]``: the best kind reaching ``fill``, else the furthest any."""
        furthest: int | None = None
        for offsets in self.kinds:
            i = bisect.bisect_right(offsets, hi) - 1
            while i >= 0 and offsets[i] >= lo:
                fence_start = self.enclosing_fence_start(offsets[i]) if outside_fences else None
                if fence_start is not None:  # skip the whole fence: its start is a fine cut
                    i = bisect.bisect_right(offsets, fence_start) - 1
                    continue
                if offsets[i] >= fill:
                    return offsets[i]
                furthest = max(furthest or 0, offsets[i])
                break
        return furthest


def _split_section(
    content: str, start: int, end: int, max_chars: int, boundaries: _Boundaries
) -> list[tuple[int, int]]:
    """``(start, end)`` pieces of one section, each at most ``max_chars`` long."""
    last = _last_non_space(content, start, end)
    pieces: list[tuple[int, int]] = []
    pos = start
    while end - pos > max_chars:
        # A cut c keeps both sides non-blank: text before it in [pos, c), and the
        # section's last non-space character after it (c <= last).
        m = _NON_SPACE.search(content, pos, end)
        lo = (m.start() if m else end) + 1
        hi = min(pos + max_chars, last if last is not None else end)
        cut = None
        if lo <= hi:
            fill = pos + int(max_chars * MIN_FILL)
            cut = boundaries.best(lo, hi, fill, outside_fences=True)
            if cut is None:
                cut = boundaries.best(lo, hi, fill, outside_fences=False)
            if cut is None:
                cut = hi  # a window without white space: cut hard
        else:
            cut = pos + max_chars  # only white space to cut in: no way to avoid a blank chunk
        pieces.append((pos, cut))
        pos = cut
    pieces.append((pos, end))
    return pieces


def _last_non_space(content: str, start: int, end: int) -> int | None:
    """Offset of the last non-space character in ``content[start:end]``, or None."""
    stripped = content[start:end].rstrip()
    return start + len(stripped) - 1 if stripped else None
