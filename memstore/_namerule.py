"""The rules on invisible characters in names, which :mod:`memstore.validate` holds new names to.

Kept apart from the other writing rules: they are the rules on what a name
*looks* like rather than what it holds, and the ones a store grandfathers
(names written before them are kept, see :func:`memstore.validate.validate_base`).
An id refuses every control character anyway (it holds no whitespace); a tag
may hold a space, but no control character (:func:`control_character`) and
no format character (:func:`format_character`).

>>> format_character("report\\u200b")
'\\u200b'
>>> format_named("\\u200b")
'a format character (U+200B ZERO WIDTH SPACE), which is invisible'
>>> control_named(control_character("deploy\\x1b[31m"))
"a control character (U+001B '\\\\x1b'), which is not printable"
"""

from __future__ import annotations

import unicodedata
from typing import Final

import regex

__all__ = [
    "CONTROL_RULE",
    "FORMAT_RULE",
    "control_character",
    "control_named",
    "format_character",
    "format_named",
]

_FORMAT: Final = regex.compile(r"\p{Cf}")
_EMOJI_ZWJ: Final = regex.compile(
    r"(?<=\p{Extended_Pictographic}[\p{Emoji_Modifier}\uFE0F]*)\u200D(?=\p{Extended_Pictographic})"
)
FORMAT_RULE: Final = "no format character (a zero-width joiner only inside an emoji)"
_CONTROL: Final = regex.compile(r"\p{Cc}")
CONTROL_RULE: Final = "no control character"


def format_character(text: str) -> str:
    """The first Unicode format character (category Cf) in ``text`` a name may not hold, or ``""``.

    Format characters are invisible: bidi controls (U+202A-U+202E,
    U+2066-U+2069, U+200E, U+200F), zero-width characters (U+200B-U+200D,
    U+2060, U+FEFF), the soft hyphen (U+00AD), the tag characters
    (U+E0000-U+E007F) and the rest of the category. One exception: a
    zero-width joiner (U+200D) between two pictographs (an emoji modifier or
    U+FE0F may follow the first) is part of one emoji (``"\\U0001f469\\u200d\\U0001f4bb"``,
    woman technologist) and shows as one; anywhere else it joins nothing
    visibly (``"a\\u200db"`` reads as ``"ab"``) and is refused like the others.
    The zero-width non-joiner (U+200C), which Persian and some Indic scripts
    use inside words, is refused too: a name is matched exactly, and whether
    one shows cannot be told from the text alone.

    >>> format_character("caf\\u00e9"), format_character("a\\u202eb")
    ('', '\\u202e')
    """
    if text.isascii():
        return ""
    for found in _FORMAT.finditer(text):
        if found.group() == "\u200d" and _EMOJI_ZWJ.match(text, found.start()):
            continue
        return found.group()
    return ""


def format_named(ch: str) -> str:
    """``a format character (U+200B ZERO WIDTH SPACE), which is invisible``."""
    name = unicodedata.name(ch, "")
    return f"a format character (U+{ord(ch):04X}{' ' + name if name else ''}), which is invisible"


def control_character(text: str) -> str:
    """The first control character (category Cc) in ``text``, or ``""``.

    The C0 controls (U+0000-U+001F: the tab, the escape that starts a
    terminal's colour and cursor sequences...), DELETE (U+007F) and the C1
    controls (U+0080-U+009F). None shows as itself: ``"ops\\x1b[8m"`` hides
    what a terminal prints after it, and ``"a\\tb"`` reads as ``"a b"``.
    Printable text (nearly every name) is answered without the pattern.

    >>> control_character("on call"), control_character("on\\x7fcall")
    ('', '\\x7f')
    """
    if text.isprintable():  # a control character is never printable
        return ""
    found = _CONTROL.search(text)
    return found.group() if found else ""


def control_named(ch: str) -> str:
    """``a control character (U+0009 '\\t'), which is not printable``.

    Control characters have no name in the Unicode database; the code point
    and the escape a reader can type name it.
    """
    return f"a control character (U+{ord(ch):04X} {ch!r}), which is not printable"
