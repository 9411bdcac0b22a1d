"""Markdown chunking: tiling, size bounds, heading paths and fences, against a reference."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Memory
from memstore.protocol.chunk import DEFAULT_MAX_CHUNK_CHARS, Chunk, chunk_markdown
from memstore.protocol.errors import ProtocolError
from memstore.protocol.limits import (
    MAX_CONTENT_BYTES,
    MAX_EPISODE_CHUNKS,
    MAX_METADATA_BYTES,
    MAX_SOURCE_CHARS,
)
from memstore.protocol.models import IngestRequest
from memstore.protocol.verbs import Verbs


def paths(content: str, **kw: int) -> list[tuple[str, ...]]:
    return [c.heading_path for c in chunk_markdown(content, **kw)]


def texts(content: str, **kw: int) -> list[str]:
    return [c.text for c in chunk_markdown(content, **kw)]


# --- headings -------------------------------------------------------------------------


def test_empty_content_has_no_chunks() -> None:
    assert chunk_markdown("") == []


def test_one_short_section() -> None:
    assert chunk_markdown("just text\n") == [Chunk(0, 0, 10, "just text\n", ())]


def test_heading_path_nests_and_pops() -> None:
    doc = "# A\na\n### B\nb\n## C\nc\n# D\nd\n#### E\ne"
    assert paths(doc) == [("A",), ("A", "B"), ("A", "C"), ("D",), ("D", "E")]
    assert texts(doc) == ["# A\na\n", "### B\nb\n", "## C\nc\n", "# D\nd\n", "#### E\ne"]


@pytest.mark.parametrize(
    ("line", "path"),
    [
        ("# Title", ("Title",)),
        ("#\tTabbed", ("Tabbed",)),
        ("   # Three spaces", ("Three spaces",)),
        ("## Setup ##", ("Setup",)),
        ("## Setup ##   ", ("Setup",)),
        ("# C# and F#", ("C# and F#",)),
        ("# foo#", ("foo#",)),
        ("#", ("",)),
        ("### ###", ("",)),
        ("# **bold** `code`", ("**bold** `code`",)),
        ("###### six", ("six",)),
        ("####### seven", ()),
        ("#hashtag", ()),
        ("    # indented code", ()),
        ("\t# tab indented", ()),
        ("> # quoted", ()),
        ("- # listed", ()),
    ],
)
def test_what_is_a_heading(line: str, path: tuple[str, ...]) -> None:
    assert paths(f"intro\n{line}\nbody\n")[-1] == path


def test_setext_headings_are_body_text() -> None:
    assert paths("Title\n=====\ntext\n\nSub\n---\nmore\n") == [()]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_endings(newline: str) -> None:
    doc = newline.join(["pre", "# A", "a", "## B", "b", ""])
    chunks = chunk_markdown(doc)
    assert [c.heading_path for c in chunks] == [(), ("A",), ("A", "B")]
    assert "".join(c.text for c in chunks) == doc
    assert chunks[1].text == f"# A{newline}a{newline}"


def test_blank_preamble_joins_the_first_section() -> None:
    chunks = chunk_markdown("\n\n  \n# A\ntext\n")
    assert [(c.text, c.heading_path) for c in chunks] == [("\n\n  \n# A\ntext\n", ("A",))]


def test_trailing_blank_lines_stay_with_their_text() -> None:
    assert texts("# A\na\n\n\n# B\nb\n\n") == ["# A\na\n\n\n", "# B\nb\n\n"]


# --- fences ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ("```\n# not\n```\n# yes\n", [(), ("yes",)]),
        ("~~~\n# not\n~~~\n# yes\n", [(), ("yes",)]),
        ("```py\n# not\n```\n# yes\n", [(), ("yes",)]),
        ("````\n# not\n```\n# still not\n````\n# yes\n", [(), ("yes",)]),  # short close
        ("```\n# not\n~~~\n# still not\n```\n# yes\n", [(), ("yes",)]),  # other char
        ("```\n# not\n``` x\n# still not\n```\n# yes\n", [(), ("yes",)]),  # close has info
        ("```\n# never closed\n# not either\n", [()]),
        ("``` a`b\n# yes\n", [(), ("yes",)]),  # backtick in info: not a fence
        ("    ```\n# yes\n", [(), ("yes",)]),  # four spaces: indented code, not a fence
        ("   ```\n# not\n   ```\n# yes\n", [(), ("yes",)]),
        ("`` two\n# yes\n", [(), ("yes",)]),
    ],
)
def test_fences_hide_headings(doc: str, expected: list[tuple[str, ...]]) -> None:
    assert paths(doc) == expected


def test_a_fence_that_fits_is_not_split() -> None:
    fence = "```\n" + "".join(f"line {i}\n" for i in range(8)) + "```\n"
    doc = "Some words before the fence.\n" + fence + "after\n"
    for max_chars in range(len(fence) + 1, len(doc) + 1):
        chunks = chunk_markdown(doc, max_chars=max_chars)
        assert any(fence in c.text for c in chunks), max_chars


def test_a_fence_too_long_is_split_at_lines() -> None:
    fence = "```\n" + "".join(f"line {i}\n" for i in range(20)) + "```\n"
    chunks = chunk_markdown(fence, max_chars=40)
    assert len(chunks) > 1
    assert all(c.text.endswith("\n") for c in chunks)
    assert "".join(c.text for c in chunks) == fence


# --- splitting long sections ----------------------------------------------------------


def test_splits_prefer_paragraphs() -> None:
    para = "word " * 10 + "end.\n"
    doc = "# H\n" + para + "\n" + para + "\n" + para
    chunks = chunk_markdown(doc, max_chars=130)
    assert all(len(c.text) <= 130 for c in chunks)
    assert [c.text for c in chunks] == ["# H\n" + para + "\n" + para + "\n", para]
    assert {c.heading_path for c in chunks} == {("H",)}


def test_splits_at_sentences_then_words_then_hard() -> None:
    assert texts("One. Two. Three.", max_chars=10) == ["One. Two. ", "Three."]
    assert texts("aaa bbb ccc ddd", max_chars=8) == ["aaa bbb ", "ccc ddd"]
    assert texts("abcdefghij", max_chars=4) == ["abcd", "efgh", "ij"]
    assert texts("日本語の文。次の文。最後", max_chars=8) == ["日本語の文。", "次の文。最後"]
    assert texts("日本語。次の文です。最後", max_chars=8) == ["日本語。", "次の文です。最後"]


def test_fill_rule_prefers_a_full_chunk() -> None:
    # A paragraph break early in the window loses to a line break late in it.
    doc = "ab\n\n" + "x" * 40 + "\n" + "y" * 40 + "\n"
    first = chunk_markdown(doc, max_chars=60)[0].text
    assert first == "ab\n\n" + "x" * 40 + "\n"


def test_default_size_bound() -> None:
    doc = "word " * 1000
    chunks = chunk_markdown(doc)
    assert max(len(c.text) for c in chunks) <= DEFAULT_MAX_CHUNK_CHARS
    assert len(chunks) == 5 and "".join(c.text for c in chunks) == doc


def test_blank_content_still_tiles() -> None:
    assert texts("   \n\n", max_chars=2) == ["  ", " \n", "\n"]


def test_max_chars_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        chunk_markdown("x", max_chars=0)


# --- properties against a reference -----------------------------------------------------

_EOL = re.compile(r"(\r\n|\r|\n)")


class RefLine(NamedTuple):
    start: int
    body: str
    path: tuple[str, ...]  # the heading path in force on this line
    in_fence: bool
    heading: bool
    opens_fence: bool


def reference_lines(content: str) -> list[RefLine]:
    """Each line of ``content`` with its heading path, and whether it is a fence or heading.

    Written apart from the module: string methods instead of its regular expressions.
    """
    out: list[RefLine] = []
    parts = _EOL.split(content)
    stack: list[tuple[int, str]] = []
    fence: tuple[str, int] | None = None
    pos = 0
    for i in range(0, len(parts), 2):
        body = parts[i]
        eol = parts[i + 1] if i + 1 < len(parts) else ""
        if not body and not eol:
            break
        rest = body.lstrip(" ")
        indent = len(body) - len(rest)
        in_fence = fence is not None
        heading = opens = False
        if fence is not None:
            marker = rest.rstrip(" \t")
            if indent <= 3 and set(marker) == {fence[0]} and len(marker) >= fence[1]:
                fence = None
        elif indent <= 3 and rest[:3] in ("```", "~~~"):
            ch = rest[0]
            n = len(rest) - len(rest.lstrip(ch))
            if not (ch == "`" and "`" in rest[n:]):
                fence, in_fence, opens = (ch, n), True, True
        elif indent <= 3 and rest.startswith("#"):
            level = len(rest) - len(rest.lstrip("#"))
            after = rest[level:]
            if level <= 6 and (after == "" or after[0] in " \t"):
                text = after.strip(" \t")
                bare = text.rstrip("#")
                if not bare:
                    text = ""
                elif len(bare) < len(text) and bare[-1] in " \t":
                    text = bare.strip(" \t")
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, text))
                heading = True
        out.append(RefLine(pos, body, tuple(t for _, t in stack), in_fence, heading, opens))
        pos += len(body) + len(eol)
    return out


def reference_fences(content: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each fence, from the reference lines."""
    lines = reference_lines(content)
    spans: list[tuple[int, int]] = []
    for i, line in enumerate(lines):
        if line.opens_fence:
            spans.append((line.start, line.start))
        if line.in_fence:
            end = lines[i + 1].start if i + 1 < len(lines) else len(content)
            spans[-1] = (spans[-1][0], end)
    return spans


_WORD = st.sampled_from(
    ["alpha", "beta", "Gamma.", "delta!", "eps?", "x", "#", "##", "```", "~~~", "。", "end.", "`"]
)
_PROSE = st.lists(_WORD, min_size=1, max_size=12).map(" ".join)
_HEADING = st.builds(
    lambda indent, level, text, closing: " " * indent + "#" * level + text + closing,
    st.integers(0, 4),
    st.integers(1, 7),
    st.sampled_from(["", " ", " A", "\tB c", " C#", " D.", "x"]),
    st.sampled_from(["", " #", " ##  ", "#"]),
)
_FENCE = st.sampled_from(["```", "````", "~~~", "```py", "``` a`b", "   ```", "    ```", "~~~~ "])
_LINE = st.one_of(
    _PROSE,
    _PROSE,
    _HEADING,
    _FENCE,
    st.sampled_from(["", "", "  ", "===", "---", "# in code?", "\t#"]),
)
_NEWLINE = st.sampled_from(["\n", "\n", "\n", "\n", "\r\n", "\r"])


@st.composite
def markdown(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.tuples(_LINE, _NEWLINE), max_size=30))
    doc = "".join(body + eol for body, eol in lines)
    if draw(st.booleans()) and doc:
        doc = doc.rstrip("\r\n")
    return doc


_CONTENT = markdown() | st.text(max_size=300)
_MAX = st.integers(1, 120)


@settings(max_examples=300, deadline=None)
@given(_CONTENT, _MAX)
def test_chunks_tile_the_content_within_the_bound(content: str, max_chars: int) -> None:
    chunks = chunk_markdown(content, max_chars=max_chars)
    assert "".join(c.text for c in chunks) == content
    pos = 0
    for i, c in enumerate(chunks):
        assert (c.index, c.start) == (i, pos)
        assert c.text == content[c.start : c.end]
        assert 0 < len(c.text) <= max_chars
        pos = c.end
    assert pos == len(content)


@settings(max_examples=300, deadline=None)
@given(_CONTENT, _MAX)
def test_heading_paths_match_the_reference(content: str, max_chars: int) -> None:
    """Every non-space character's chunk carries the path in force on its line."""
    chunks = chunk_markdown(content, max_chars=max_chars)
    for line in reference_lines(content):
        for offset, ch in enumerate(line.body):
            if ch.isspace():
                continue
            at = line.start + offset
            chunk = next(c for c in chunks if c.start <= at < c.end)
            assert chunk.heading_path == line.path, (at, line.body)


@settings(max_examples=300, deadline=None)
@given(_CONTENT)
def test_unbounded_chunks_are_the_sections(content: str) -> None:
    """With room for everything, a chunk starts exactly at each heading (and at 0)."""
    chunks = chunk_markdown(content, max_chars=max(len(content), 1))
    if not content:
        assert chunks == []
        return
    headings = [line.start for line in reference_lines(content) if line.heading]
    if headings and not content[: headings[0]].strip():
        headings[0] = 0  # a blank preamble joins the first section
    assert [c.start for c in chunks] == sorted({0, *headings})


def _longest_space_run(text: str) -> int:
    return max((len(m.group()) for m in re.finditer(r"\s+", text)), default=0)


@settings(max_examples=300, deadline=None)
@given(_CONTENT, _MAX)
def test_no_blank_chunks(content: str, max_chars: int) -> None:
    if not content.strip() or _longest_space_run(content) >= max_chars // 2:
        return
    assert all(c.text.strip() for c in chunk_markdown(content, max_chars=max_chars))


@settings(max_examples=300, deadline=None)
@given(_CONTENT, _MAX)
def test_fences_that_fit_are_not_split(content: str, max_chars: int) -> None:
    """A fence plus the white space around it, when that fits, is never cut."""
    cuts = {c.start for c in chunk_markdown(content, max_chars=max_chars)}
    for start, end in reference_fences(content):
        before = start - (len(content[:start]) - len(content[:start].rstrip()))
        after = end + (len(content[end:]) - len(content[end:].lstrip()))
        if after - before <= max_chars:
            assert not any(start < cut < end for cut in cuts), (start, end)


def test_reference_sees_fences() -> None:
    """The reference itself: a fence and the heading it hides."""
    doc = "a\n```\n# x\n```\n# y\n"
    assert reference_fences(doc) == [(2, 14)]
    assert reference_fences("```\n```\n~~~\n") == [(0, 8), (8, 12)]  # back to back
    assert [line.path for line in reference_lines(doc)] == [(), (), (), (), ("y",)]
    assert [line.heading for line in reference_lines(doc)] == [False] * 4 + [True]


# ------------------------------------------------------------ the episode's bound


def test_the_largest_episode_within_every_bound_is_stored(tmp_path: Path) -> None:
    """The longest tenant, source and metadata with MAX_EPISODE_CHUNKS chunks fit the engine."""
    content = "#\n" * MAX_EPISODE_CHUNKS
    assert len(content.encode()) <= MAX_CONTENT_BYTES
    metadata = {"m": "x" * (MAX_METADATA_BYTES - len('{"m":""}'))}
    req = IngestRequest(source="s" * MAX_SOURCE_CHARS, content=content, metadata=metadata)
    with Memory(tmp_path, embedder=None) as mem:
        Verbs(mem).ingest("t" * 64, req)
        assert len(mem.store) == 1 + MAX_EPISODE_CHUNKS


def test_an_episode_of_more_chunks_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    content = "#\n" * (MAX_CONTENT_BYTES // 2)  # the most chunks content can hold
    with Memory(tmp_path, embedder=None) as mem:
        with pytest.raises(ProtocolError) as info:
            Verbs(mem).ingest("t", IngestRequest(source="s", content=content))
        assert (info.value.status, info.value.code) == (400, "invalid_request")
        assert f"at most {MAX_EPISODE_CHUNKS}" in info.value.message
        assert len(mem.store) == 0
