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
>>> kw_tokens("what is it")
['what', 'is', 'it']
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import regex

if TYPE_CHECKING:
    from memstore.item import Item

__all__ = [
    "STOP_WORDS",
    "dedup_tokens",
    "kw_tokens",
    "normalize_query",
    "token_grams",
    "trigrams",
    "words",
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

# CamelCase / PascalCase boundaries: "fooBar" and "q3Plan" split before the upper
# case letter, "HTTPServer" splits before the last upper case letter of the run.
_CAMEL = regex.compile(r"(?<=[\p{Ll}\p{N}])(?=\p{Lu})|(?<=\p{Lu})(?=\p{Lu}\p{Ll})")
# Combining marks that follow a Latin letter are accents: "é" folds to "e".
# Marks on other scripts (Devanagari vowel signs, ...) carry meaning and stay.
_LATIN_MARKS = regex.compile(r"(?<=\p{Latin}\p{M}*)\p{M}+")
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}"
# A word is a run of letters, digits and marks, or one pictograph (emoji).
_WORD = regex.compile(r"\p{Extended_Pictographic}|[\p{L}\p{N}\p{M}]+")
# Script boundary inside a run: CJK next to non-CJK letters ("python编程").
_CJK_EDGE = regex.compile(rf"(?<=[{_CJK}])(?=[^{_CJK}\W_])|(?<=[^{_CJK}\W_])(?=[{_CJK}])")
_ASCII_WORD = regex.compile(r"[a-z0-9]+")
_ASCII_CAMEL = regex.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_KEEP_SHORT = regex.compile(rf"[\p{{N}}{_CJK}\p{{Extended_Pictographic}}]")


def words(text: str) -> list[str]:
    """Split ``text`` into normalised words: the unit every index is built on.

    Same rules as :func:`normalize_query`, returned as a list.

    >>> words("Payment-API returned HTTP 502 at 3am")
    ['payment', 'api', 'returned', 'http', '502', 'at', '3am']
    """
    if text.isascii():  # fast path: the common case needs no Unicode tables
        return _ASCII_WORD.findall(_ASCII_CAMEL.sub(" ", text).lower())
    text = _CAMEL.sub(" ", text).lower()
    text = unicodedata.normalize("NFKD", text)
    text = _LATIN_MARKS.sub("", text)
    text = unicodedata.normalize("NFC", text)
    text = _CJK_EDGE.sub(" ", text)
    return _WORD.findall(text)


def normalize_query(q: str) -> str:
    """Lowercase, split CamelCase, fold Latin accents, turn punctuation into spaces.

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


def _fold_plural(w: str) -> str:
    # A light plural fold ("timeouts" -> "timeout"), so that a restatement in
    # the plural still shares the token; "status", "class", "analysis" keep theirs.
    if len(w) > 3 and w[-1] == "s" and w[-2] not in "su" and not w.endswith("is"):
        return w[:-1]
    return w


def dedup_tokens(item: Item) -> frozenset[str]:
    """The token set near-duplicate scoring compares for ``item`` (title + content).

    Stop words are dropped, and so are tokens shorter than three characters
    unless they carry a digit (or are an ideograph or emoji): "q3" and "q4" are
    what tell two otherwise identical plans apart. A trailing plural "s" is
    folded ("timeouts" and "timeout" are one token).
    """
    return text_dedup_tokens(item.title, item.content)


def text_dedup_tokens(title: str, content: str) -> frozenset[str]:
    """:func:`dedup_tokens` for a bare title and content."""
    return frozenset(_fold_plural(w) for w in words(f"{title} {content}") if _dedup_keep(w))


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
