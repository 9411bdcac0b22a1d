"""Text handling: query normalisation, tokens, and the token sets dedup compares.

Everything here is Unicode-aware (the ``regex`` module's property classes), so
accents, CJK, Cyrillic and emoji tokenise sensibly:

>>> normalize_query("What is payment-api?")
'what is payment api'
>>> normalize_query("HTTPServer crashed in FooBAR")
'http server crashed in foo bar'
>>> normalize_query("Café crème, Привет мир!")
'cafe creme привет мир'
>>> normalize_query("Python编程 🚀ok")
'python 编程 🚀 ok'
>>> kw_tokens(normalize_query("what is the q3 plan for payment api?"))
['q3', 'plan', 'payment', 'api']
>>> words("timeout 0.3s at 9:30, v1.2 on 10.0.0.1")
['timeout', '0.3', 's', 'at', '9:30', 'v', '1.2', 'on', '10.0.0.1']
>>> kw_tokens("what is it")
['what', 'is', 'it']
"""

from __future__ import annotations

import datetime as _dt
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import regex

from memstore.eventdate import parse_event_date

if TYPE_CHECKING:
    from memstore.item import Item

__all__ = [
    "STOP_WORDS",
    "dedup_tokens",
    "event_date_words",
    "kw_tokens",
    "normalize_query",
    "stem",
    "token_grams",
    "trigrams",
    "words",
    "words_many",
]

STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during
    each few for from further had has have having he her here hers herself him
    himself his how i if in into is it its itself just me more most my myself no nor
    not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves
    please tell know remember recall anything something thing things whats hey hi
    let lets us get got also really
    """.split()
)
"""English function words and conversational filler, dropped from query tokens."""

TOKENS_VERSION = 12
"""The version of the rules of :func:`words`: raised with every change to them.

A saved lexical index (:mod:`memstore._lexsnapshot`) holds words these rules
made; one saved under another version is refused and rebuilt from the items,
never read with words a query can no longer produce. It also holds what is
derived from the words (the :func:`stem` table, the gram and deletion tables
of :mod:`memstore._vocabindex`): a change to those rules raises the version
too. (Rules a query alone applies, such as :data:`STOP_WORDS`, do not.)
1: words of releases before the version was kept. 2: a text is read in
NFC first, so a decomposed accent no longer hides a CamelCase boundary.
3: characters that are not drawn (zero-width, soft hyphen, ...) are dropped.
4: a run of Chinese or Japanese characters is cut into overlapping pairs.
5: case-folded rather than lower-cased ("ß" is "ss").
6: Greek accents, Arabic and Hebrew vowel points and the tatweel are dropped.
7: a version or decimal after letters is a word of its own ("v1.2.3").
8: decimal digits of every script are ASCII digits ("٣" is "3").
9: Latin letters with no decomposition fold as accents do ("ı" is "i", "ø" "o").
10: the vowel points a tatweel carries go with it.
11: a run of Korean (Hangul) is cut into overlapping pairs, as CJK is.
12: a flag emoji is a word.
"""

# CamelCase / PascalCase boundaries: "fooBar" and "q3Plan" split before the upper
# case letter, "HTTPServer" splits before the last upper case letter of the run.
_CAMEL = regex.compile(r"(?<=[\p{Ll}\p{N}])(?=\p{Lu})|(?<=\p{Lu})(?=\p{Lu}\p{Ll})")
# Combining marks that follow a Latin letter are accents: "é" folds to "e".
# So are Greek tonos and dialytika ("ύ" is "υ"), and Arabic and Hebrew vowel
# points (harakat, niqqud), which most text leaves out: "مَرْحَبًا" is "مرحبا".
# Marks on other scripts (Devanagari vowel signs, ...) carry meaning and stay.
# The lookbehind is one character (the letter before the run of marks): one
# over "\p{M}*" rescanned the run of marks at each mark (quadratic: 100k marks
# took minutes). This form reads each character once, and a scan that starts
# at a mark is five times faster than one that starts at a letter of a script.
# The Arabic tatweel, a stroke that only stretches a word ("مـرحبا"), goes
# too, with the vowel points it carries (NFKD makes one of some ligatures).
_LATIN_MARKS = regex.compile(r"(?<=[\p{Latin}\p{Greek}\p{Arabic}\p{Hebrew}\u0640])\p{M}+|\u0640+")
# Characters that are not drawn (zero-width space and joiners, soft hyphen,
# word joiner, BOM, bidi marks, variation selectors): a word pasted with one
# inside is still the one word it shows ("pay\u200bment" is "payment").
_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}+")
# A decimal digit of any script is its ASCII digit: "٤٥٦٧" (Arabic-Indic),
# "४५६७" (Devanagari) and "4567" are one number. (Full-width and mathematical
# digits are folded already by NFKD.) And the Latin letters that are no
# letter with an accent (nothing for NFKD to take off) but are read as one by
# a reader without the key: "ısıtma" is "isitma", "smørrebrød" "smorrebrod",
# "Łódź" "lodz", "Æsir" "aesir". Both in one scan, rarely matched.
_LATIN_FOLD = {
    "ı": "i", "ø": "o", "ł": "l", "đ": "d", "ð": "d", "ħ": "h", "ŧ": "t",
    "æ": "ae", "œ": "oe", "þ": "th",
}  # fmt: skip
_FOLD_CHARS = regex.compile(rf"[^\P{{Nd}}0-9]|[{''.join(_LATIN_FOLD)}]")
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}"
# A word is a run of letters, digits and marks, or one pictograph (emoji), or
# one flag (a pair of regional indicators: "🇯🇵").
# Decimals, versions and times stay whole ("0.3", "9:30", "10.0.0.1"), also
# after letters: a run of letters and digits ends before the digits of one
# ("v1.2.3" is "v" and "1.2.3", "python3.11" is "python" and "3.11"), so the
# number a user types alone meets it. (A run of digits joins the word only
# whole and not followed by "." or ":" and a digit. The form is the rule
# "(?:[\p{L}\p{M}]|\p{N}++(?![.:]\p{N}))+" unrolled: a word's digits first,
# then runs of letters each followed by digits, or digits alone; half the
# cost of the rule, which tries its alternatives at every character.)
_WORD = regex.compile(
    r"\p{Extended_Pictographic}|\p{Regional_Indicator}{2}|\p{N}+(?:[.:]\p{N}+)+"
    r"|\p{N}*+[\p{L}\p{M}]+(?:\p{N}+(?!\p{N}|[.:]\p{N})[\p{L}\p{M}]*)*|\p{N}+"
)
# Chinese and Japanese are written without spaces: a run of their characters
# (with the katakana long-vowel mark "ー", of no script) is cut into its
# overlapping pairs of characters, as search engines' CJK analysers do, so a
# word or phrase from a sentence meets the sentence whatever surrounds it.
# Korean is too: its words carry particles ("서울에서", "서울은"), which pairs
# see past ("서울" is a pair of both).
_CJK_RUN_CHARS = _CJK + r"\p{Hangul}" + "\u30fc"
# Script boundary inside a run: CJK next to non-CJK letters ("python编程").
_CJK_EDGE = regex.compile(
    rf"(?<=[{_CJK_RUN_CHARS}])(?=[^{_CJK_RUN_CHARS}\W_])"
    rf"|(?<=[^{_CJK_RUN_CHARS}\W_])(?=[{_CJK_RUN_CHARS}])"
)
_CJK_RUN = regex.compile(rf"[{_CJK_RUN_CHARS}]{{3,}}")
_CJK_ANY = regex.compile(rf"[{_CJK_RUN_CHARS}]")
# The ASCII fast path uses the stdlib engine: three times faster on these patterns.
_ASCII_WORD = re.compile(
    r"[0-9]+(?:[.:][0-9]+)+|[0-9]*+[a-z]+(?:[0-9]+(?![0-9]|[.:][0-9])[a-z]*)*|[0-9]+"
)  # _WORD's rule on ASCII text, unrolled as _WORD is
# The CamelCase rule on ASCII text, found without a regex scan: each character
# is mapped to its class ("a" lower-case letter, "d" digit, "U" upper-case
# letter, anything else itself) by one bytes.translate, and the split points are
# where the class string holds "aU" or "dU" (before the "U") or "UUa" (between
# the two "U"s): the ASCII reading of _CAMEL, several times cheaper to scan for.
_ASCII_CLASS = bytes.maketrans(
    b"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    b"a" * 26 + b"d" * 10 + b"U" * 26,
)  # every other byte stays itself: none of them is "a", "d" or "U"
_ASCII_FOLD = bytes.maketrans(
    bytes(range(256)),
    bytes(
        b + 32 if 65 <= b <= 90 else b if 97 <= b <= 122 or 48 <= b <= 57 else 32
        for b in range(256)
    ),
)  # upper-case letters lowered, lower-case letters and digits kept, every other byte a space
_ASCII_FOLD_KEEP_NUL = _ASCII_FOLD[:1].replace(b" ", b"\0") + _ASCII_FOLD[1:]
""":data:`_ASCII_FOLD`, but NUL stays NUL: the separator of :func:`words_many`'s batch."""
_KEEP_SHORT = regex.compile(rf"[\p{{N}}{_CJK}\p{{Extended_Pictographic}}]")


def _camel_cuts(raw: bytes, cls: bytes) -> bytes:
    """ASCII ``raw`` with a space at each CamelCase split point of its class string ``cls``.

    Each split point is after the first class of the "aU", "dU" or "UUa" found.
    """
    cuts: list[int] = []
    for pattern in (b"aU", b"dU", b"UUa"):
        i = cls.find(pattern)
        while i >= 0:
            cuts.append(i + 1)
            i = cls.find(pattern, i + 1)
    cuts.sort()
    return b" ".join([raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)])


_A, _D, _U = b"adU"


def _camel_cuts_many(raw: bytes, cls: bytes) -> bytes:
    """:func:`_camel_cuts` for a batch: the split points found by numpy, not by ``find``.

    The class string of a batch is mostly ``a``, which a ``find`` of ``"aU"``
    stops at nearly everywhere; three vectorised comparisons mark every split
    point at once (after an ``a`` or ``d`` followed by ``U``, and between the
    ``U``s of ``UUa``; no point is both), and one insertion places the spaces.
    """
    c = np.frombuffer(cls, np.uint8)
    upper = c == _U
    lower = c == _A
    cut = upper[1:] & (lower[:-1] | (c[:-1] == _D))  # "aU", "dU": a space before the "U"
    cut[:-1] |= upper[:-2] & upper[1:-1] & lower[2:]  # "UUa": between the two "U"s
    at = np.flatnonzero(cut) + 1
    return np.insert(np.frombuffer(raw, np.uint8), at, 32).tobytes()


def _texts_holding(cls: bytes, patterns: tuple[bytes, ...]) -> list[int]:
    """The indexes, in order, of the NUL-separated texts of ``cls`` holding any of ``patterns``.

    The patterns are searched in the whole batch (none holds a NUL, so a
    match lies within one text) and each match is placed by counting the
    NULs before it: C-level passes instead of a test of every text.
    """
    hits: list[int] = []
    for p in patterns:
        i = cls.find(p)
        while i >= 0:
            hits.append(i)
            i = cls.find(p, i + 1)
    hits.sort()
    found: list[int] = []
    n = at = 0
    for pos in hits:
        n += cls.count(b"\0", at, pos)
        at = pos
        if not found or found[-1] != n:
            found.append(n)
    return found


def _ascii_camel_split(text: str) -> str:
    """ASCII ``text`` with a space at each CamelCase split point ("fooBar" -> "foo Bar")."""
    raw = text.encode("ascii")
    cls = raw.translate(_ASCII_CLASS)
    if b"aU" not in cls and b"dU" not in cls and b"UUa" not in cls:
        return text
    return _camel_cuts(raw, cls).decode("ascii")


def _ascii_words(text: str) -> list[str]:
    """:func:`words` for ASCII text, in a few C-level passes over its bytes.

    One ``bytes.translate`` gives the class string, on which three substring
    tests tell whether there is a CamelCase split point and two whether a
    decimal, version or time ("0.3", "9:30": a digit, "." or ":", a digit)
    needs the regex. Without one, the words are the runs of letters and digits:
    a second translate lower-cases letters and blanks everything else, and a
    ``split`` cuts the runs (the same words ``_ASCII_WORD`` finds).
    """
    raw = text.encode("ascii")
    cls = raw.translate(_ASCII_CLASS)
    if b"aU" in cls or b"dU" in cls or b"UUa" in cls:
        raw = _camel_cuts(raw, cls)  # the cuts split letters only: no "d.d" made or lost
    if b"d.d" in cls or b"d:d" in cls:
        return _ASCII_WORD.findall(raw.decode("ascii").lower())
    return raw.translate(_ASCII_FOLD).decode("ascii").split()


def words(text: str) -> list[str]:
    """Split ``text`` into normalised words: the unit every index is built on.

    Same rules as :func:`normalize_query`, returned as a list.

    >>> words("Payment-API returned HTTP 502 at 3am")
    ['payment', 'api', 'returned', 'http', '502', 'at', '3am']
    """
    if text.isascii():  # fast path: the common case needs no Unicode tables
        return _ascii_words(text)
    # Composed first: in NFD "caféBar" holds a mark between "e" and "B", which
    # the CamelCase rule (a letter before an upper-case one) does not see.
    text = unicodedata.normalize("NFC", _IGNORABLE.sub("", text))
    text = unicodedata.normalize("NFKD", _CAMEL.sub(" ", text))
    text = _LATIN_MARKS.sub("", text)
    # Case-folded after compatibility folding: "𝕬" folds to "A", then to "a".
    # Folded, not lower-cased: "ß" (and "ẞ") is "ss" as "STRASSE" says, and a
    # Greek final sigma "ς" is the "σ" of the capital "Σ".
    text = unicodedata.normalize("NFC", text).casefold()
    if _FOLD_CHARS.search(text):
        text = _FOLD_CHARS.sub(_fold_char, text)
    if _CJK_ANY.search(text):  # the edge rule's lookarounds cost most of a text without CJK
        text = _CJK_RUN.sub(_cjk_bigrams, _CJK_EDGE.sub(" ", text))
    return _WORD.findall(text)


def _fold_char(char: regex.Match[str]) -> str:
    """The ASCII digit of a decimal digit of another script ("٣" -> "3"), or a Latin fold."""
    c = char[0]
    fold = _LATIN_FOLD.get(c)
    if fold is None:  # a digit: the regex module may know one unicodedata does not yet
        value = unicodedata.decimal(c, None)
        fold = c if value is None else str(value)
    return fold


def _cjk_bigrams(run: regex.Match[str]) -> str:
    """The overlapping character pairs of a CJK run: "机器学习" -> "机器 器学 学习"."""
    s = run[0]
    return " ".join([s[i : i + 2] for i in range(len(s) - 1)])


def words_many(texts: Sequence[str]) -> list[list[str]]:
    """:func:`words` of each of ``texts``, in a few C-level passes over them all.

    The ASCII texts are joined with NUL, which every rule of :func:`words`
    treats as it treats a space (a boundary no word, CamelCase split or
    decimal crosses), and classed, cut, lower-cased and decoded once for the
    whole batch, then split text by text; a text with a decimal, version or
    time takes :func:`words`'s regex, and a text that is not ASCII (or holds
    a NUL) is split on its own.

    >>> words_many(["Payment-API timeout", "", "version 2.1 released", "café open"])
    [['payment', 'api', 'timeout'], [], ['version', '2.1', 'released'], ['cafe', 'open']]
    """
    ascii = list(map(str.isascii, texts))
    plain = [t for t, a in zip(texts, ascii, strict=True) if a]
    joined = "\0".join(plain)
    if len(plain) < 2 or joined.count("\0") != len(plain) - 1:
        return list(map(words, texts))
    raw = joined.encode("ascii")
    cls = raw.translate(_ASCII_CLASS)
    if b"aU" in cls or b"dU" in cls or b"UUa" in cls:
        raw = _camel_cuts_many(raw, cls)  # letters only: NUL and "d.d" stay as they were
    out = [t.split() for t in raw.translate(_ASCII_FOLD_KEEP_NUL).decode("ascii").split("\0")]
    if b"d.d" in cls or b"d:d" in cls:
        pieces = raw.split(b"\0")
        for i in _texts_holding(cls, (b"d.d", b"d:d")):
            out[i] = _ASCII_WORD.findall(pieces[i].decode("ascii").lower())
    if len(out) == len(texts):
        return out
    done = iter(out)
    return [next(done) if a else words(t) for t, a in zip(texts, ascii, strict=True)]


def normalize_query(q: str) -> str:
    """Case-fold, split CamelCase, fold accents, turn punctuation into spaces.

    "what is payment-api?" reduces to "what is payment api": without the
    punctuation step a token keeps the mark glued to it ("api?") and misses an
    exact match against "api".
    """
    return " ".join(words(q))


def _keep_short(tok: str) -> bool:
    return _KEEP_SHORT.search(tok) is not None


def kw_tokens(q: str) -> list[str]:
    """The content-bearing tokens of a normalised query, in order, without repeats.

    Stop words and single characters are dropped, except a single character
    that is a digit, an ideograph or an emoji. A query made only of stop words
    keeps all its words: filtering everything would leave the lexical channel
    with nothing to say.
    """
    seen: set[str] = set()
    all_words: list[str] = []
    kept: list[str] = []
    for w in q.split():
        if w in seen:
            continue
        seen.add(w)
        all_words.append(w)
        if w in STOP_WORDS:
            continue
        if len(w) == 1 and not _keep_short(w):
            continue
        kept.append(w)
    return kept if kept else all_words


def _dedup_keep(w: str) -> bool:
    if w in STOP_WORDS:
        return False
    return len(w) >= 3 or _keep_short(w)


_NOT_PLURAL = frozenset(
    "news series species always perhaps sometimes whereas across besides towards "
    "afterwards thanks physics mathematics economics politics lens bus gas yes".split()
)
_ES_PLURAL = ("xes", "ches", "shes", "zes", "sses")


def _fold_plural(w: str) -> str:
    # A light plural fold, so that a restatement in the plural still shares the
    # token: "timeouts" -> "timeout", "retries" -> "retry", "taxes" -> "tax";
    # "status", "class", "analysis", "news" keep theirs.
    if len(w) <= 3 or w[-1] != "s" or w in _NOT_PLURAL or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith(_ES_PLURAL):
        return w[:-2]
    if w[-2] in "su" or w.endswith("is"):
        return w
    return w[:-1]


def dedup_tokens(item: Item) -> frozenset[str]:
    """The token set near-duplicate scoring compares for ``item`` (title + content).

    Stop words are dropped, and so are tokens shorter than three characters
    unless they carry a digit (or are an ideograph or emoji): "q3" and "q4" are
    what tell two otherwise identical plans apart. A trailing plural "s" is
    folded ("timeouts" and "timeout", "retries" and "retry" are one token).
    """
    return text_dedup_tokens(item.title, item.content)


def text_dedup_tokens(title: str, content: str) -> frozenset[str]:
    """:func:`dedup_tokens` for a bare title and content."""
    return word_dedup_tokens(words(f"{title} {content}"))


def word_dedup_tokens(ws: Iterable[str]) -> frozenset[str]:
    """:func:`dedup_tokens` from the words of title and content, already split.

    ``words(f"{title} {content}")`` is ``words(title) + words(content)`` (a
    space ends every word and starts none), so a writer that split the two
    fields for its index passes those words instead of splitting again.
    """
    return frozenset(_fold_plural(w) for w in ws if _dedup_keep(w))


_DOUBLE = frozenset("bdfgklmnprtz")


def stem(word: str) -> str:
    """A light English stem, so that word forms meet: camping, camped, camps -> camp.

    Strips one inflection (-ing, -ed, -ies/-ied, -es after a sibilant, -s, -ly),
    undoubles a final consonant it leaves (stopped -> stop), then drops a final
    "e" so that "bake", "baked" and "baking" share "bak". Only words of letters
    longer than three characters are touched, and a stem keeps three letters.
    Not a linguistic stemmer: a cheap equivalence class for matching.

    >>> [stem(w) for w in ["camping", "camped", "camps", "stopped", "baking", "baked", "tries"]]
    ['camp', 'camp', 'camp', 'stop', 'bak', 'bak', 'try']
    >>> stem("status"), stem("news"), stem("q3")
    ('status', 'news', 'q3')
    """
    if len(word) <= 3 or not word.isalpha() or word in _NOT_PLURAL:
        return word
    w = word
    if w.endswith(("ies", "ied")) and len(w) > 4:
        return w[:-3] + "y"
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if len(w) > 3 and w[-1] == w[-2] and w[-1] in _DOUBLE:
                w = w[:-1]
            break
    else:
        if (w.endswith("ly") and len(w) > 5) or w.endswith(_ES_PLURAL):
            w = w[:-2]
        elif w.endswith("s") and w[-2] not in "su" and not w.endswith("is"):
            w = w[:-1]
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w


_MONTHS = (
    "january february march april may june july august september october november december"
).split()


def event_date_words(event_date: str) -> list[str]:
    """The words an event date adds to an item's search text: its month and year.

    So "what happened in June?" or "in 2022" can find events by when they
    happened, without a date parser in the query.

    >>> event_date_words("2023-06-27T13:56:00Z"), event_date_words("not a date")
    (['june', '2023'], [])

    A bare day in ASCII digits (``YYYY-MM-DD``, the common form) is read by
    ``date.fromisoformat`` alone: what :func:`~memstore.eventdate.parse_event_date`
    does with it after its pattern test, at midnight UTC, so the same month and
    year (a lexicon splits every dated item's date, most of them distinct days).
    """
    if (
        len(event_date) == 10
        and event_date[4] == "-" == event_date[7]
        and event_date.isascii()
        and event_date[:4].isdigit()
        and event_date[5:7].isdigit()
        and event_date[8:].isdigit()
    ):
        try:
            day = _dt.date.fromisoformat(event_date)
        except ValueError:  # no such day (2024-02-30): no date
            return []
        return [_MONTHS[day.month - 1], str(day.year)]
    when = parse_event_date(event_date)
    if when is None:
        return []
    return [_MONTHS[when.month - 1], str(when.year)]


def trigrams(token: str) -> frozenset[str]:
    """The character trigrams of ``token``; a token under three characters is its own gram.

    >>> sorted(trigrams("deploy"))
    ['dep', 'epl', 'loy', 'plo']
    """
    if len(token) < 3:
        return frozenset((token,))
    return frozenset(token[i : i + 3] for i in range(len(token) - 2))


def token_grams(toks: Sequence[str]) -> list[frozenset[str]]:
    """Each token's trigrams, computed once for a whole query.

    A scan scoring many items against one token list hoists this out of its
    loop instead of recomputing the grams per item.
    """
    return [trigrams(t) for t in toks]


def join_words(ws: Iterable[str]) -> str:
    """Join words back into normalised text."""
    return " ".join(ws)
